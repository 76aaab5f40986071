import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import { checkSyntax, enumDeclaration, openingFault, SandboxError, startSandboxedEnv } from '../envs/sandbox/index.js';
import { staticProblem } from '../activities/synthesis/candidate.js';
import { oneLine } from '../envs/sandbox/process.js';
import { actionMessage, type AgentAction } from '../envs/environment.js';
import { formatConformance, runConformance } from '../envs/protocol/conformance.js';
import { inspectInstance } from '../envs/sdk/index.js';
import type { Environment, Message } from '../envs/sdk/index.js';
import sdkEnv from './fixtures/sandbox/sdk-env.js';
import { ATTACK, attackSource } from './fixtures/sandbox/attack-source.js';
import { growth } from './helpers/growth.js';

const reason = (r: string) => (e: unknown) => e instanceof SandboxError && e.reason === r;

/** The attack fixture's source with `from` replaced by `to` (failing if the fixture no longer holds `from`). */
function attackWith(from: string, to: string): string {
  const source = attackSource("return 'ok'");
  assert.ok(source.includes(from), 'fixture changed: update this test');
  return source.replace(from, to);
}

/** Starts `source` in a sandbox and expects `run` on it to fail as an env_error matching `message`. */
async function envErrorOf(source: string, run: (env: Environment) => Promise<unknown>, message: RegExp) {
  const env = await startSandboxedEnv({ source });
  try {
    await assert.rejects(run(env), (e: unknown) => reason('env_error')(e) && message.test((e as Error).message));
  } finally {
    await env.close();
  }
}

/** Plays the gold solution of one seed and returns the reward and the transcript. */
async function playGold(env: Environment, seed: number) {
  const { gold } = await inspectInstance(env, seed);
  const ep = await env.reset({ seed });
  const messages: Message[] = ep.initialMessages();
  for (const action of gold) {
    messages.push(actionMessage(action));
    const r = await ep.step(action);
    messages.push(r.observation);
  }
  const info = await ep.evaluate(messages, 'user_stop');
  await ep.close();
  return { reward: info.reward, messages };
}

test('sandbox: an SDK-built module (imports #env-sdk) passes conformance and behaves exactly as in-process', async () => {
  const env = await startSandboxedEnv({ modulePath: 'test/fixtures/sandbox/sdk-env.ts' });
  try {
    assert.equal(env.info.name, 'sandbox-deposit');
    const checks = await runConformance(env, { reset: { seed: 7 } });
    assert.ok(
      checks.every((c) => c.ok),
      formatConformance(checks),
    );
    for (const seed of [1, 2, 3]) {
      assert.deepEqual(
        await inspectInstance(env, seed),
        await inspectInstance(sdkEnv, seed),
        `seed ${seed} instance differs`,
      );
      const boxed = await playGold(env, seed);
      assert.equal(boxed.reward, 1, `gold of seed ${seed} scored ${boxed.reward} in the sandbox`);
      assert.deepEqual(boxed.messages, (await playGold(sdkEnv, seed)).messages);
    }
  } finally {
    await env.close();
  }
});

test('sandbox: concurrent episodes through one sandbox stay independent', async () => {
  const env = await startSandboxedEnv({ modulePath: 'test/fixtures/sandbox/sdk-env.ts' });
  try {
    const seeds = Array.from({ length: 16 }, (_, i) => 100 + i);
    const rewards = await Promise.all(seeds.map(async (seed) => (await playGold(env, seed)).reward));
    assert.deepEqual(
      rewards,
      seeds.map(() => 1),
    );
  } finally {
    await env.close();
  }
});

test('sandbox: a module given as source (with #env-sdk) runs too', async () => {
  const source = readFileSync('test/fixtures/sandbox/sdk-env.ts', 'utf8');
  const env = await startSandboxedEnv({ source });
  try {
    assert.equal((await playGold(env, 11)).reward, 1);
  } finally {
    await env.close();
  }
});

test('sandbox: a cached bundle is never stale: editing the module file is picked up', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'trace-sandbox-test-'));
  const file = path.join(dir, 'env.ts');
  const observe = async () => {
    const env = await startSandboxedEnv({ modulePath: file });
    try {
      return (await (await env.reset({ taskId: 'attack' })).step(ATTACK)).observation.content;
    } finally {
      await env.close();
    }
  };
  try {
    writeFileSync(file, attackSource("return 'v1'"));
    assert.equal(await observe(), 'v1');
    assert.equal(await observe(), 'v1', 'second start (cached bundle)');
    writeFileSync(file, attackSource("return 'v2'"));
    assert.equal(await observe(), 'v2', 'the edited module must be rebundled');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('sandbox: broken modules fail with a reason before anything runs', async () => {
  await assert.rejects(
    startSandboxedEnv({ source: 'export default {' }),
    (e: unknown) => reason('compile')(e) && /env\.ts:1:/.test((e as Error).message),
  );
  await assert.rejects(
    startSandboxedEnv({ source: "import x from 'no-such-package-xyz'; export default x;" }),
    (e: unknown) => reason('compile')(e) && /no-such-package-xyz/.test((e as Error).message),
  );
  await assert.rejects(
    startSandboxedEnv({ source: 'export default 42;' }),
    (e: unknown) => reason('crash')(e) && /not an Environment/.test((e as Error).message),
  );
  await assert.rejects(
    startSandboxedEnv({ source: "throw new Error('boom at import'); export default {};" }),
    (e: unknown) => reason('crash')(e) && /boom at import/.test((e as Error).message),
  );
  await assert.rejects(startSandboxedEnv({}), /exactly one of source or modulePath/);
  await assert.rejects(startSandboxedEnv({ source: 'export default {}', limits: { wallMs: -1 } }), /limits: wallMs/);
});

test('sandbox: an ordinary env exception is an env_error and the sandbox keeps working', async () => {
  const env = await startSandboxedEnv({
    source: attackSource(
      "if (globalThis.once) return 'second'; globalThis.once = 1; throw new Error('tool bug')",
      "console.log('module says hello');",
    ),
  });
  try {
    const ep = await env.reset({ taskId: 'attack' });
    await assert.rejects(
      ep.step(ATTACK),
      (e: unknown) => reason('env_error')(e) && /tool bug/.test((e as Error).message),
    );
    assert.equal((await ep.step(ATTACK)).observation.content, 'second');
    assert.match(env.logs(), /module says hello/, 'console output is kept as logs');
  } finally {
    await env.close();
  }
});

test('sandbox: a step result that breaks the Environment interface is an env_error naming the field', async () => {
  const source = attackSource('return 1').replace(
    "return { observation: { role: 'tool', tool_call_id: action.call?.id ?? 'x', content: String(out) }, error: false, done: false };",
    "void out; void action; return { observation: { role: 'robot' }, error: false, done: false };",
  );
  assert.ok(source.includes("role: 'robot'"), 'fixture template changed; update this test');
  const env = await startSandboxedEnv({ source });
  try {
    const ep = await env.reset({ taskId: 'attack' });
    await assert.rejects(
      ep.step(ATTACK),
      (e: unknown) => reason('env_error')(e) && /observation\.role/.test((e as Error).message),
    );
  } finally {
    await env.close();
  }
});

test('sandbox: observations, evaluate answers and openings past 64 KiB are env_errors (reruns 17-18: padded only in training, 792 MB of trajectories)', async () => {
  const env = await startSandboxedEnv({
    source: attackSource(
      "return 'x'.repeat(Number(JSON.parse(action.call.function.arguments).n))",
      '',
      "{ pad: 'y'.repeat(70_000) }",
    ),
  });
  try {
    const ep = await env.reset({ taskId: 'attack' });
    const sized = (n: number) => ({
      ...ATTACK,
      call: { ...ATTACK.call, function: { ...ATTACK.call.function, arguments: JSON.stringify({ n }) } },
    });
    assert.equal(String((await ep.step(sized(60_000))).observation.content).length, 60_000);
    await assert.rejects(
      ep.step(sized(70_000)),
      (e: unknown) =>
        reason('env_error')(e) && /the observation is \d+ bytes; at most 65536/.test((e as Error).message),
    );
    const again = await env.reset({ taskId: 'attack' });
    await assert.rejects(
      again.evaluate([], 'agent_stop'),
      (e: unknown) =>
        reason('env_error')(e) && /\d+ bytes \(components, details\); at most 65536/.test((e as Error).message),
    );
  } finally {
    await env.close();
  }
  // Components count too (rerun 18 padded them once details were capped), and so does the opening.
  const source = attackSource("return 'ok'")
    .replace(
      'components: {}',
      "components: Object.fromEntries(Array.from({ length: 2000 }, (_, i) => ['c' + i + 'x'.repeat(30), 0]))",
    )
    .replace(
      "initialMessages: () => [{ role: 'user', content: 'go' }]",
      "initialMessages: () => [{ role: 'user', content: 'go'.repeat(globalThis.long ? 40_000 : 1) }]",
    )
    .replace('async step(action: any) {', 'async step(action: any) { (globalThis as any).long = true;');
  assert.ok(
    source.includes("'c' + i") && source.includes('globalThis.long') && source.includes('long = true'),
    'fixture changed',
  );
  const padded = await startSandboxedEnv({ source });
  try {
    const ep = await padded.reset({ taskId: 'attack' });
    await assert.rejects(
      ep.evaluate([], 'agent_stop'),
      (e: unknown) => reason('env_error')(e) && /\(components, details\); at most 65536/.test((e as Error).message),
    );
    await ep.step(ATTACK);
    await assert.rejects(
      padded.reset({ taskId: 'attack' }),
      (e: unknown) =>
        reason('env_error')(e) && /the opening is 800\d\d bytes; at most 65536/.test((e as Error).message),
    );
  } finally {
    await padded.close();
  }
});

test("sandbox: an opening is the user's turn, then tool calls and their results (rerun 48b: two user turns stopped training on Mistral's templates)", async () => {
  const user: Message = { role: 'user', content: 'go' };
  const call = (...ids: string[]): Message => ({
    role: 'assistant',
    content: null,
    tool_calls: ids.map((id) => ({ id, type: 'function', function: { name: 'f', arguments: '{}' } })),
  });
  const result = (id: string): Message => ({ role: 'tool', tool_call_id: id, content: 'r' });
  const withArguments = (m: Message, args: string): Message =>
    m.role === 'assistant'
      ? { ...m, tool_calls: m.tool_calls?.map((c) => ({ ...c, function: { ...c.function, arguments: args } })) }
      : m;
  assert.equal(openingFault([user]), undefined);
  assert.equal(openingFault([user, call('a'), result('a'), call('b'), result('b')]), undefined);
  for (const bad of [
    [],
    [call('a'), result('a')],
    [user, user],
    [{ role: 'system', content: 's' } as Message, user],
    [user, { role: 'assistant', content: 'hi' } as Message],
    [user, call('a')],
    [user, call('a'), result('b')],
    [user, call('a'), call('b'), result('a'), result('b')],
    // One call a turn, each id once (rerun 49b: Llama's and Mistral's templates raised on either).
    [user, call('a', 'b'), result('a'), result('b')],
    [user, call('a'), result('a'), call('a'), result('a')],
    // Arguments the trainer cannot parse (rerun 50b: 1 000 levels, an integer of 4 301 digits).
    [user, withArguments(call('a'), '['.repeat(1000) + ']'.repeat(1000)), result('a')],
    [user, withArguments(call('a'), `{"n": ${'9'.repeat(4301)}}`), result('a')],
    [user, withArguments(call('a'), '[1]'), result('a')],
  ])
    assert.ok(openingFault(bad), JSON.stringify(bad.map((m) => m.role)));
  const source = attackWith(
    "initialMessages: () => [{ role: 'user', content: 'go' }]",
    "initialMessages: () => [{ role: 'user', content: 'go' }, { role: 'user', content: 'again' }]",
  );
  // A generated env's (seeds only); a module served as it is may open as its target does.
  const generated = await startSandboxedEnv({ source, seedsOnly: true });
  try {
    await assert.rejects(
      generated.reset({ seed: 1 }),
      (e: unknown) => reason('env_error')(e) && /seed 1: opening message 1 \(user\)/.test((e as Error).message),
    );
  } finally {
    await generated.close();
  }
  const served = await startSandboxedEnv({ source });
  try {
    await (await served.reset({ taskId: 'attack' })).close();
  } finally {
    await served.close();
  }
});

test("sandbox: a seed's instance view is scanned before it is parsed (rerun 49b: 20 000 levels overflowed the worker's stack at every seeded reset)", async () => {
  await envErrorOf(
    attackWith(
      'reset: async () => episode,',
      "reset: async (req: any) => String(req.taskId ?? '').startsWith('inspect:') ? { ...episode, initialMessages: () => [{ role: 'system', content: '['.repeat(20_000) + ']'.repeat(20_000) }] } : episode,",
    ),
    (env) => env.reset({ seed: 3 }),
    /seed 3: its instance view nests arrays\/objects deeper than 64 levels/,
  );
});

test("sandbox: a module's thrown error is one line of at most 500 characters in the reason (rerun 51b: 4 MiB reached the trainer whole)", async () => {
  await envErrorOf(
    attackWith(
      'evaluate: async () => ({',
      "evaluate: async () => { throw new Error('bad\\n'.repeat(50_000)); }, unused: async () => ({",
    ),
    async (env) => (await env.reset({ taskId: 'attack' })).evaluate([], 'agent_stop'),
    /^(?=[^\n]{0,800}$)(?=.*bad\\u000abad).*\(\d+ characters\)/,
  );
  // So is a refusal quoting the module's schema, at start (rerun 52b: 53 KB over 3 000 lines).
  await assert.rejects(
    startSandboxedEnv({
      source: attackWith(
        "parameters: { type: 'object', properties: {}, additionalProperties: true }",
        "parameters: { type: 'object', properties: {}, additionalProperties: true, ['x\\n'.repeat(3000)]: 1 }",
      ),
    }),
    (e: unknown) => reason('env_error')(e) && /^(?=[^\n]{0,800}$).*\(\d+ characters\)/.test((e as Error).message),
  );
});

test("sandbox: every reason is one bounded line, whatever path the module's text took (rerun 53b: a crash's stderr, an observation's call id)", async () => {
  const oneBoundedLine = /^(?=[^\n\r\u001b\u2028]{0,1300}$)/;
  // Its stderr before it exits without the runner's notice: 4 KB with escapes and returns.
  await assert.rejects(
    startSandboxedEnv({
      source:
        "process.stderr.write(('\\r\\u001b[2J' + 'A'.repeat(1500) + '\\u2028').repeat(3) + '\\n'); export default { info: 1 };",
    }),
    (e: unknown) => reason('crash')(e) && oneBoundedLine.test((e as Error).message),
  );
  // A tool call id of its own in the observation: 40 000 characters over 20 000 lines.
  await envErrorOf(
    attackWith("tool_call_id: action.call?.id ?? 'x'", "tool_call_id: 'x\\n'.repeat(20_000)"),
    async (env) => (await env.reset({ taskId: 'attack' })).step(ATTACK),
    new RegExp(`${oneBoundedLine.source}.*answers tool call 'x\\\\u000ax`),
  );
  // Whatever else: the error itself bounds its message.
  const e = new SandboxError('env_error', 'x\n'.repeat(100_000));
  assert.match(e.message, oneBoundedLine);
  // Cut on whole characters, with no half pair of the module's own (rerun 54b: the cut split an
  // emoji, on which the trainer's tokenizer and the generator's repair prompt fail).
  const halfPair = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
  for (const text of ['x' + '😀'.repeat(2000), '😀'.repeat(2000), 'lone \ud83d here', 'C1 \u009b and bidi \u202e'])
    for (const message of [new SandboxError('env_error', text).message, oneLine(text)]) {
      assert.doesNotMatch(message, halfPair, JSON.stringify(message.slice(-60)));
      assert.doesNotMatch(message, /[\u0080-\u009f\u202a-\u202e]/);
    }
  await envErrorOf(
    attackWith("tool_call_id: action.call?.id ?? 'x'", "tool_call_id: 'x' + '😀'.repeat(100)"),
    async (env) => (await env.reset({ taskId: 'attack' })).step(ATTACK),
    /answers tool call 'x(😀){31}…/u,
  );
});

test('sandbox: oneLine shows the first 500 characters of a text of any length, escaped (rerun 72f: it escaped all 2 M newlines of a thrown error first; bench/one-line.ts)', () => {
  assert.equal(oneLine('\n'.repeat(2_000_000)), `${'\\u000a'.repeat(83)}\\u… (2000000 characters)`);
  assert.equal(oneLine(`${'a'.repeat(499)}\n`), `${'a'.repeat(499)}\\u000a`.slice(0, 500) + '… (500 characters)');
  assert.equal(
    oneLine(`${'a'.repeat(499)}\u2028`.slice(0, 500)),
    `${'a'.repeat(499)}\\u2028`.slice(0, 500) + '… (500 characters)',
  );
  assert.equal(oneLine('short\ttext'), 'short\\u0009text');
});

test("sandbox: a thrown value that cannot be read as text is the env's error, and the sandbox goes on (rerun 55b: reported as a bad request line)", async () => {
  for (const thrown of [
    'Object.create(null)',
    '(() => { const p = Proxy.revocable({}, {}); p.revoke(); return p.proxy; })()',
    "new Proxy({}, { getPrototypeOf() { throw new Error('no'); } })",
  ]) {
    const env = await startSandboxedEnv({ source: attackSource(`throw ${thrown}`) });
    try {
      const ep = await env.reset({ taskId: 'attack' });
      await assert.rejects(
        ep.step(ATTACK),
        (e: unknown) => reason('env_error')(e) && /cannot be read as text/.test((e as Error).message),
        thrown,
      );
      await env.reset({ taskId: 'attack' });
    } finally {
      await env.close();
    }
  }
});

test('sandbox: an inspection whose close never answers fails the reset with the timeout that killed it (rerun 55b: a plain Error)', async () => {
  const env = await startSandboxedEnv({
    source: attackWith('close: async () => {},', 'close: () => new Promise<void>(() => {}),'),
    limits: { wallMs: 1500 },
  });
  try {
    await assert.rejects(
      env.reset({ seed: 1 }),
      (e: unknown) => reason('timeout')(e) && /wallMs/.test((e as Error).message),
    );
  } finally {
    await env.close();
  }
});

test("sandbox: the tools' descriptions and parameters are bounded together (rerun 55b: 3.5 MB in every prompt; 72j: in the parameters)", async () => {
  for (const [from, to] of [
    ["function: { name: 'attack',", "function: { name: 'attack', description: 'd'.repeat(70_000),"],
    [
      "name: 'attack', parameters: { type: 'object'",
      "name: 'attack', description: 'd'.repeat(30_000), parameters: { description: 'd'.repeat(40_000), type: 'object'",
    ],
  ])
    await assert.rejects(
      startSandboxedEnv({ source: attackWith(from, to) }),
      (e: unknown) =>
        reason('env_error')(e) &&
        /descriptions and parameters come to more than 65536 bytes \(at tool attack\)/.test((e as Error).message),
    );
});

test('sandbox: an enum is refused before esbuild computes it, and a bundle is at most 8 MiB (rerun 56b: 28 doubling members crashed the worker at check 1)', async () => {
  // 22 members come to 25 MB of esbuild's output (28 crashed the process); none is computed now.
  const members = Array.from({ length: 22 }, (_, i) => `M${i + 1} = M${i} + M${i}`).join(', ');
  const withEnum = attackSource("return 'ok'", `enum Doubling { M0 = 'ab', ${members} }\nvoid Doubling;`);
  assert.match((await staticProblem(withEnum)) ?? '', /declares a TypeScript enum/);
  await assert.rejects(
    startSandboxedEnv({ source: withEnum }),
    (e: unknown) => reason('compile')(e) && /declares a TypeScript enum/.test((e as Error).message),
  );
  // Comments between the words do not hide one; a schema's `enum` key is no enum.
  assert.match((await staticProblem('enum/**/E /* x */ { A }\nexport default 1;')) ?? '', /TypeScript enum/);
  assert.equal(enumDeclaration("const p = { type: 'string', enum: ['a'] }; p.enum;"), undefined);
  // Read in time linear in the gaps (rerun 58b: comments between the words, split every way, took
  // the regex seconds of the worker's event loop; reruns 59b, 60b: quadratic, 1.5 s for 6 000
  // `// enum a` lines): the cost of sixteen times the text is about sixteen times, not 256.
  for (const [what, text] of [
    ['a banner', (k: number) => `enum X${' /**/'.repeat(k)} ;`],
    ['open comments', (k: number) => `${'enum /*'.repeat(k)}*/`],
    ['enum lines', (k: number) => '// enum a\n'.repeat(k)],
  ] as const) {
    const { ratio, said } = await growth((k) => enumDeclaration(text(k)), 2000, 16);
    assert.ok(ratio < 48, `${what}: ${said}`);
  }
  // Check 1's import scan costs the worker linear time (rerun 60b: bare "import"s held it 4 s).
  const imports = await growth((k) => staticProblem(`// ${'import '.repeat(k)}\nexport default 1;`), 2000, 16);
  assert.ok(imports.ratio < 48, `bare imports: ${imports.said}`);
  // So is an import's specifier, controls escaped (rerun 59b: 50 KB with ESC and NUL).
  const quoted = (await staticProblem(`import x from '${'p\u001b\u0000'.repeat(20_000)}';\nexport default x;`)) ?? '';
  assert.match(quoted, /^imports '/);
  assert.ok(quoted.length < 700 && !/[\u0000-\u001f]/.test(quoted), quoted.slice(0, 80));
  // A syntax error quoting a long token is cut (rerun 58b: a 100 KB reason).
  assert.ok(((await checkSyntax(`const x = 1 ${'a'.repeat(100_000)};`)) ?? '').length < 700);
  await assert.rejects(
    startSandboxedEnv({
      source: attackSource("return 'ok'", `(globalThis as any).big = '${'x'.repeat(9 * 1024 * 1024)}';`),
    }),
    (e: unknown) => reason('compile')(e) && /the bundle is \d+ bytes; at most 8388608/.test((e as Error).message),
  );
});

/** Pids of the processes started with `TRACE_TEST_MARK=mark` in their environment (a compile inherits the worker's). */
function marked(mark: string): number[] {
  const pids: number[] = [];
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      if (readFileSync(`/proc/${pid}/environ`, 'latin1').includes(`TRACE_TEST_MARK=${mark}\0`)) pids.push(Number(pid));
    } catch {
      // gone, or not ours to read
    }
  }
  return pids;
}

/** Nested arrows: esbuild takes tens of seconds over 7.5 KB (rerun 57b). */
const SLOW_TO_COMPILE = `export const q = ${'a=>'.repeat(2500)}1;\nexport default 1;`;

test('sandbox: a compile dies with the worker that started it, and stops when its caller cancels (rerun 61b: it ran on past both)', async () => {
  const mark = randomBytes(8).toString('hex');
  const script = path.join(mkdtempSync(path.join(os.tmpdir(), 'compile-orphan-')), 'worker.mts');
  const bundleTs = pathToFileURL(path.resolve('envs/sandbox/bundle.ts')).href;
  writeFileSync(
    script,
    `import { checkSyntax } from ${JSON.stringify(bundleTs)};\nawait checkSyntax(${JSON.stringify(SLOW_TO_COMPILE)});\n`,
  );
  const worker = spawn(process.execPath, ['--import', 'tsx', script], {
    env: { ...process.env, TRACE_TEST_MARK: mark },
    stdio: 'ignore',
  });
  try {
    // Until the compile runs beside the worker (its node's command line names compile-child).
    const compiling = () =>
      marked(mark).some((pid) => {
        try {
          return pid !== worker.pid && readFileSync(`/proc/${pid}/cmdline`, 'latin1').includes('compile-child');
        } catch {
          return false;
        }
      });
    for (let tries = 0; !compiling() && worker.exitCode === null && tries < 1200; tries++) await sleep(100);
    assert.ok(compiling(), 'the worker started no compile');
    worker.kill('SIGKILL');
    // Its compile goes with it: before, it ran on for the compile's whole length (tens of seconds).
    for (let tries = 0; marked(mark).length && tries < 150; tries++) await sleep(100);
    assert.deepEqual(marked(mark), [], 'processes of the killed worker left running');
  } finally {
    worker.kill('SIGKILL');
  }
  // A start cancelled while its module compiles fails as cancelled at once, not when the compile ends.
  await assert.rejects(
    startSandboxedEnv({ source: SLOW_TO_COMPILE, signal: AbortSignal.timeout(300) }),
    (e: unknown) => reason('cancelled')(e) && /while compiling/.test((e as Error).message),
  );
});

test('sandbox: at most two compiles run at once in a worker, and a cancelled one stops waiting (rerun 62b: three took 2.46 GiB)', async () => {
  const mark = randomBytes(8).toString('hex');
  process.env.TRACE_TEST_MARK = mark; // inherited by the compiles started now
  const stop = new AbortController();
  const compiles = [1, 2, 3].map(() => checkSyntax(SLOW_TO_COMPILE, stop.signal).catch((e: unknown) => e));
  try {
    const read = (file: string) => {
      try {
        return readFileSync(file, 'latin1');
      } catch {
        return '';
      }
    };
    // A compile's own fork, before it execs esbuild, still reads as a compile: not counted.
    const running = () => {
      const compiles = marked(mark).filter((pid) => read(`/proc/${pid}/cmdline`).includes('compile-child'));
      const parent = (pid: number) => Number(read(`/proc/${pid}/stat`).split(') ')[1]?.split(' ')[1]);
      return compiles.filter((pid) => !compiles.includes(parent(pid))).length;
    };
    let most = 0;
    for (let tries = 0; tries < 1200 && (most < 2 || tries < 20); tries++) {
      most = Math.max(most, running());
      await sleep(100);
    }
    assert.equal(most, 2, `${most} compiles at once`);
  } finally {
    delete process.env.TRACE_TEST_MARK;
    stop.abort(new Error('test over'));
  }
  for (const e of await Promise.all(compiles)) assert.match(String((e as Error).message), /test over/);
});

test("sandbox: esbuild runs on a module's text in a process of its own, and a text that kills it fails alone (rerun 57b: a dead esbuild failed every later compile in the worker)", async () => {
  // A member chain 200 000 deep overflows esbuild's stack: its service dies.
  const deep = `export const x = a${'.b'.repeat(200_000)};\nexport default 1;`;
  await assert.rejects(checkSyntax(deep), /made the compiler fail/);
  assert.match(
    (await staticProblem(`import { defineEnvironment } from '#env-sdk';\n${deep}`)) ?? '',
    /^made the compiler fail/,
  );
  // The next compiles work.
  assert.equal(await checkSyntax(attackSource("return 'ok'")), undefined);
  assert.match((await checkSyntax('const x: number = ;')) ?? '', /^syntax error: line 1:18/);
  const env = await startSandboxedEnv({ source: attackSource("return 'ok'") });
  await env.close();
});

test("sandbox: an episode's task id is bounded and one line (rerun 54b: 3 MB of one made 192 MB of calibration rollouts)", async () => {
  for (const [id, fault] of [
    ["'t'.repeat(257)", /reset: the episode's taskId is 257 characters; at most 256/],
    ["'task\\u001b[2J\\r\\nx'", /taskId 'task\\u001b\[2J\\u000d\\u000ax' holds a control character/],
  ] as const)
    await envErrorOf(
      attackWith("taskId: 'attack',", `taskId: ${id},`),
      (env) => env.reset({ taskId: 'attack' }),
      fault,
    );
  // At the bound it serves.
  const env = await startSandboxedEnv({ source: attackWith("taskId: 'attack',", "taskId: 't'.repeat(256),") });
  assert.equal((await env.reset({ taskId: 'attack' })).taskId.length, 256);
  await env.close();
});

test("sandbox: a module's name and system prompt are bounded at start (rerun 53b: a 1.9 M-character name made 122 MiB of calibration rollouts; rerun 62b: a name's newlines)", async () => {
  for (const [from, to, fault] of [
    ["name: 'attack'", "name: 'a'.repeat(129)", /info\.name is 129 characters; at most 128/],
    // Control characters (rerun 62b: a four-line reason from a name with newlines and ESC).
    ["name: 'attack'", "name: 'at\\ntack\\u001b'", /info\.name 'at\\u000atack\\u001b' holds a control character/],
    [
      "systemPrompt: () => 'attack'",
      "systemPrompt: () => 'é'.repeat(40_000)",
      /systemPrompt is 80000 bytes; at most 65536/,
    ],
    ["description: 'an escape attempt'", "description: 'd'.repeat(70_000)", /info\.description is 70000 bytes/],
  ] as const)
    await assert.rejects(
      startSandboxedEnv({ source: attackWith(from, to) }),
      (e: unknown) => reason('env_error')(e) && fault.test((e as Error).message),
    );
  // At the bounds it starts.
  const env = await startSandboxedEnv({
    source: attackWith("name: 'attack'", "name: 'a'.repeat(128)").replace(
      "systemPrompt: () => 'attack'",
      "systemPrompt: () => 'p'.repeat(65_536)",
    ),
  });
  assert.equal(env.info.name.length, 128);
  await env.close();
});

test('sandbox: close stops the process and removes its directory', async () => {
  const env = await startSandboxedEnv({ source: attackSource('return process.cwd()') });
  const ep = await env.reset({ taskId: 'attack' });
  const cwd = (await ep.step(ATTACK)).observation.content ?? '';
  assert.ok(cwd.length > 0);
  const [dir] = env.processDirs();
  assert.ok(existsSync(dir));
  await env.close();
  assert.equal(existsSync(dir), false);
  await assert.rejects(ep.step(ATTACK), reason('closed'));
  await ep.close(); // the episode went with its process: closing it is not an error
});

test('sandbox: a tool whose parameters use a keyword the worker does not check calls against is refused at start (rerun 20: types under a skipped keyword)', async () => {
  for (const [parameters, fault] of [
    [
      { type: 'object', properties: { id: { not: { type: 'string' } } } },
      /parameters\.properties\.id: keyword 'not' is not supported/,
    ],
    [{ type: 'object', if: { required: ['a'] }, then: { required: ['b'] } }, /keyword 'if' is not supported/],
    [
      { type: 'object', properties: { t: { type: 'array', items: [{ type: 'string' }] } } },
      /items: must be one schema/,
    ],
    [
      { type: 'object', properties: { t: { enum: Array.from({ length: 21_000 }, () => 0) } } },
      /more than 20000 schema nodes/,
    ],
    // Rerun 21: a name one reader decodes and the others do not; a required the check would throw on; a 70 KB const.
    [
      { type: 'object', properties: { c: { $ref: '#/$defs/c%20' } }, $defs: { 'c%20': { type: 'string' } } },
      /properties\.c\.\$ref: must be/,
    ],
    [{ type: 'object', required: 5 }, /required: must be a list/],
    [{ type: 'object', properties: { c: { type: 'strin' } } }, /type: must be one of/],
    [{ type: 'object', properties: { c: { const: 'x'.repeat(70_000) } } }, /bytes of schema; at most 65536/],
    // Rerun 22: control characters the grammar writes raw (JSON forbids them), so the base policy could never send them.
    [{ type: 'object', properties: { s: { enum: ['pending', 'all\b'] } } }, /control character/],
    [{ type: 'object', properties: { 'k\u0001': { type: 'string' } } }, /control character/],
    [{ type: 'object', additionalProperties: 5 }, /additionalProperties: must be/],
    // Rerun 23: half a UTF-16 pair, which the grammar writes as U+FFFD (and xgrammar cannot compile).
    [{ type: 'object', properties: { s: { enum: ['pending', 'all\ud800'] } } }, /lone surrogate/],
    // Rerun 24: anywhere in the parameters (xgrammar cannot compile any of it, so training could not start).
    [{ type: 'object', properties: { s: { type: 'string', description: 'note \udc00' } } }, /lone surrogate/],
    [{ type: 'object', properties: { s: { enum: [['all\ud800']] } } }, /lone surrogate/],
    // Rerun 25: bounds xgrammar cannot compile (training in the action format could not start).
    [{ type: 'object', properties: { n: { type: 'integer', minimum: 0.5 } } }, /n\.minimum: an integer's bound/],
    [{ type: 'object', properties: { n: { type: ['integer', 'string'], maximum: 1e300 } } }, /an integer's bound/],
    [{ type: 'object', properties: { n: { type: 'integer', minimum: 3, maximum: 2 } } }, /no integer lies/],
    [
      { type: 'object', properties: { n: { type: 'integer', exclusiveMinimum: 2, exclusiveMaximum: 3 } } },
      /no integer/,
    ],
    [{ type: 'object', properties: { n: { type: 'number', exclusiveMinimum: 2, maximum: 2 } } }, /no number lies/],
    [{ type: 'object', properties: { s: { type: 'string', minLength: 5, maxLength: 2 } } }, /minLength 5 is above/],
    [{ type: 'object', properties: { a: { type: 'array', minItems: 5, maxItems: 2 } } }, /minItems 5 is above/],
    [{ type: 'object', properties: { s: { type: 'string', maxLength: 2.5 } } }, /maxLength: must be a whole number/],
    [{ type: 'object', properties: { s: { type: 'string', minLength: -1 } } }, /minLength: must be a whole number/],
    [{ type: 'object', properties: { s: { type: 'string', pattern: '^(a)\\1$' } } }, /keyword 'pattern' is not/],
    [{ type: 'object', properties: { a: { type: 'array', minItems: 2 } } }, /minItems needs items/],
    [{ type: 'object', properties: { s: { enum: [] } } }, /enum: must be a list of at least one/],
    [{ type: 'object', properties: { s: false }, required: ['s'] }, /the schema false admits no value/],
    // Rerun 26: read differently by the worker, validation's grammar and the trainer's.
    [{ type: 'object', properties: { t: { type: 'string', format: 'date-time' } } }, /keyword 'format' is not/],
    [
      { type: 'object', properties: { a: { $ref: '#/$defs/a', enum: ['x'] } }, $defs: { a: { type: 'string' } } },
      /'enum' beside \$ref/,
    ],
    [
      {
        type: 'object',
        properties: { n: { $ref: '#/$defs/n' } },
        $defs: { n: { properties: { m: { $ref: '#/$defs/n' } } } },
      },
      /\$ref #\/\$defs\/n is recursive/,
    ],
    [{ type: 'object', title: { $ref: '#/$defs/x' } }, /title: must be a string/],
    // Rerun 27: a const outside its enum (the worker's message read "must be undefined").
    [{ type: 'object', properties: { s: { enum: ['a'], const: 'b' } } }, /its const is not among its enum/],
    // Validation's grammar writes every subset of up to 8 optional properties, only none or all of more.
    [
      { type: 'object', properties: Object.fromEntries([...'abcdefghi'].map((k) => [k, { type: 'string' }])) },
      /9 optional properties; at most 8/,
    ],
    [{ type: 'object', properties: { s: { $ref: '#/$defs/s' } } }, /\$ref: #\/\$defs\/s has no definition/],
    [
      {
        type: 'object',
        properties: { s: { anyOf: Array.from({ length: 9 }, (_, i) => ({ type: 'string', maxLength: 1000 + i })) } },
      },
      /bound string lengths 9 different ways; at most 8/,
    ],
  ] as const) {
    const source = attackSource('return 1').replace(
      "parameters: { type: 'object', properties: {}, additionalProperties: true }",
      `parameters: ${JSON.stringify(parameters)}`,
    );
    assert.ok(source.includes(JSON.stringify(parameters).slice(0, 20)), 'attack-source.ts changed: update this test');
    await assert.rejects(
      startSandboxedEnv({ source }),
      (e: unknown) => reason('env_error')(e) && fault.test((e as Error).message),
    );
  }
  // An episode's own tools must be the env's, parameters and all: the policies are shown the env's (rerun 21).
  const looser = attackSource("return 'ok'").replace(
    'initialMessages: () =>',
    "tools: () => [{ type: 'function', function: { name: 'attack', parameters: { type: 'object' } } }],\n  initialMessages: () =>",
  );
  const env = await startSandboxedEnv({ source: looser });
  try {
    await assert.rejects(
      env.reset({ taskId: 'attack' }),
      (e: unknown) =>
        reason('env_error')(e) && /not one of the env's tools with the same parameters/.test((e as Error).message),
    );
  } finally {
    await env.close();
  }
});

test('sandbox: the env sees tool calls under the same names whoever plays (rerun 17: trainer ids and spacing told training apart; key order)', async () => {
  // The module answers each call with the call as it saw it, and evaluate with the trajectory as it saw it.
  const env = await startSandboxedEnv({
    source: `
// The opening's call has the id the trainer gives its first call: the env's own calls are told by place, not id.
const opening = [{ role: 'user', content: 'go' }, { role: 'assistant', content: null, tool_calls: [{ id: 'call_0_0', type: 'function', function: { name: 'lookup', arguments: '{ "id": "o" }' } }] }, { role: 'tool', tool_call_id: 'call_0_0', content: 'o' }];
const episode = {
  id: 'e', taskId: 't',
  initialMessages: () => opening,
  async step(action: any) { return { observation: { role: 'tool', tool_call_id: action.call.id, content: JSON.stringify(action.call) }, error: false, done: false }; },
  evaluate: async (messages: any) => ({ reward: 0, components: {}, success: false, details: { seen: JSON.stringify(messages) } }),
  fork: async () => episode,
  close: async () => {},
};
export default {
  info: { name: 'echo', kind: 'synthetic', description: 'echoes calls' },
  tools: () => [{ type: 'function', function: { name: 'lookup', parameters: { type: 'object', properties: { id: { type: 'string' }, n: { type: 'number' } } } } }],
  systemPrompt: () => 's',
  listTasks: async () => [{ id: 't' }],
  reset: async () => episode,
};`,
  });
  try {
    const play = async (ids: string[], args: string[], reordered = false) => {
      const ep = await env.reset({ taskId: 't' });
      const messages = ep.initialMessages();
      const stepSaw: string[] = [];
      for (const [i, id] of ids.entries()) {
        const call = { id, type: 'function' as const, function: { name: 'lookup', arguments: args[i] } };
        // Keys in another order and one more, as another client might send them (the HTTP server's schemas drop it).
        const action = reordered
          ? ({
              call: { function: call.function, index: i, type: call.type, id },
              type: 'tool_call',
            } as unknown as AgentAction)
          : { type: 'tool_call' as const, call };
        const r = await ep.step(action);
        assert.equal(
          r.observation.role === 'tool' && r.observation.tool_call_id,
          id,
          'the caller gets its own id back',
        );
        stepSaw.push(String(r.observation.content));
        messages.push(actionMessage(action), r.observation);
      }
      const info = await ep.evaluate(messages, 'agent_stop');
      await ep.close();
      return { stepSaw, evaluateSaw: info.details?.seen };
    };
    // The trainer's ids and Python's spacing; validation's gold ids and JSON.stringify's.
    // Keys in another order than the tool declares them, as only the trainer's policy may write them.
    const trainer = await play(['call_0_0', 'call_1_0'], ['{"n": 1.0, "id": "x"}', '{"id": "\\u00e9"}']);
    const gold = await play(['gold_0', 'gold_1'], ['{"id":"x","n":1}', '{"id":"é"}']);
    assert.deepEqual(trainer, gold);
    const other = await play(['x9', 'x10'], ['{"id":"x","n":1}', '{"id":"é"}'], true);
    assert.deepEqual(other, gold);
    assert.deepEqual(
      trainer.stepSaw.map((s) => JSON.parse(s) as { id: string }).map((c) => c.id),
      ['call_0', 'call_1'],
    );
    const opening = (JSON.parse(String(trainer.evaluateSaw)) as Message[])[1];
    assert.deepEqual(
      opening.role === 'assistant' && opening.tool_calls?.[0],
      { id: 'call_0_0', type: 'function', function: { name: 'lookup', arguments: '{ "id": "o" }' } },
      "the env's own opening is left as it wrote it",
    );
  } finally {
    await env.close();
  }
});

test('sandbox: calls that do not fit the env tools never reach the module, in steps or in evaluate (rerun 19: Python NaN, unknown tools, wrong types were paid in training only; types the grammars imply; rerun 22)', async () => {
  // The module counts the steps it gets and shows the trajectory it evaluates.
  const env = await startSandboxedEnv({
    source: `
let steps = 0;
const episode = {
  id: 'e', taskId: 't',
  initialMessages: () => [{ role: 'user', content: 'go' }],
  async step(action: any) { steps++; return { observation: { role: 'tool', tool_call_id: action.call?.id ?? 'm', content: 'ok' }, error: false, done: false }; },
  // Thrown: a refused call ended the episode, which the worker scores 0 whatever the module answers.
  evaluate: async (messages: any) => { throw new Error('SEEN=' + JSON.stringify({ steps, seen: messages })); },
  fork: async () => episode,
  close: async () => {},
};
export default {
  info: { name: 'strict', kind: 'synthetic', description: 'counts what it sees' },
  tools: () => [{ type: 'function', function: { name: 'lookup', parameters: { type: 'object', properties: { id: { type: 'string' }, limit: { type: 'integer' }, tags: { type: 'array', items: { type: 'string' } }, who: { type: 'array', items: { $ref: '#/$defs/P' } }, any: { anyOf: [{ type: 'string' }, { type: 'number' }] }, nums: { type: 'array', items: { type: 'integer' } }, box: { properties: { n: { type: 'integer' } } } }, required: ['id'], $defs: { P: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] } } } } }, { type: 'function', function: { name: 'typed', parameters: { type: 'object', allOf: [{ properties: { id: { type: 'string' } }, required: ['id'], additionalProperties: false }] } } }, { type: 'function', function: { name: 'wide', parameters: { type: 'object', allOf: [...Array.from({ length: 19000 }, () => ({})), { properties: { id: { type: 'string' } }, additionalProperties: true }] } } }],
  systemPrompt: () => 's',
  listTasks: async () => [{ id: 't' }],
  reset: async () => episode,
};`,
  });
  try {
    const ep = await env.reset({ taskId: 't' });
    const messages: Message[] = [...ep.initialMessages()];
    const play = async (name: string, args: string, content: string | null = null) => {
      const call = { id: `c${messages.length}`, type: 'function' as const, function: { name, arguments: args } };
      const r = await ep.step({ type: 'tool_call', call });
      messages.push({ role: 'assistant', content, tool_calls: [call] }, r.observation);
      return r;
    };
    // With text beside the call, which only the trainer's policy writes: the env gets the call alone (rerun 22).
    const fits = await play(
      'lookup',
      '{"id": "x", "limit": 3, "tags": ["a"], "who": [{"name": "A"}], "any": 7}',
      'Let me look that up for you.',
    );
    assert.equal(fits.error, false);
    const refused = [
      ['lookup', '{"id": NaN}'], // Python's json.dumps of a float('nan')
      ['lookup', '{"id": "x", "limit": Infinity}'], // and of 1e999
      ['issue_refund', '{"id": "x"}'],
      ['lookup', '{"id": 12345}'],
      ['lookup', '{"id": "x", "limit": 1.5}'],
      ['lookup', '{"id": "x", "tags": [1]}'],
      ['lookup', '{"id": "x", "extra": 1}'],
      ['lookup', '{"id": "x", "who": [{"name": "A", "extra": 1}]}'], // through a $ref, as pydantic writes schemas
      ['lookup', '{"id": "x", "who": [{}]}'],
      ['lookup', '{"id": "x", "any": [1]}'], // no alternative of the anyOf
      ['lookup', '{"id": "x", "box": "str"}'], // no type, but properties: the grammars write an object there
      ['lookup', '{"id": "x", "limit": 12345678901234568}'], // 17 digits: the grammar writes at most 16 (rerun 22)
      ['wide', `{${Array.from({ length: 6000 }, (_, i) => `"k${i}":0`).join(',')}}`], // keys walked at each of 19 000 allOf parts (rerun 22)
      ['typed', '{"id": 12345}'], // types under allOf (rerun 20: the check skipped allOf)
      ['lookup', `{"id": "x", "nums": [${'1,'.repeat(25_000)}1]}`], // more schema steps than one call may cost (rerun 20)
      ['lookup', `{"id": "${'x'.repeat(70_000)}"}`], // arguments past 64 KiB
      ['lookup', '{}'],
      ['lookup', ''],
      ['lookup', 'null'],
      ['lookup', '[1]'],
      ['lookup', '"x"'],
      ['lookup', '{"constructor": "x"}'],
      ['wide', `{"deep": ${'['.repeat(100)}${']'.repeat(100)}}`], // 4 000 levels overflowed the re-serialization (rerun 23)
    ];
    for (const [i, [name, args]] of refused.entries()) {
      // The first refusal ends the episode; each other is tried on an episode of its own.
      const r =
        i === 0
          ? await play(name, args, 'let me check')
          : await (
              await env.reset({ taskId: 't' })
            ).step({
              type: 'tool_call',
              call: { id: `c${messages.length - 2}`, type: 'function', function: { name, arguments: args } },
            });
      assert.equal(r.error, true, `${name}(${args}) is refused`);
      // It ends the episode (reruns 22-23: the turns and errors refused calls spent showed otherwise).
      assert.deepEqual([r.done, r.termination], [true, 'agent_stop']);
      assert.match(
        String(r.observation.content),
        /^Error: (unknown tool|arguments|invalid arguments for (lookup|typed|wide))/,
      );
      assert.equal(r.observation.role === 'tool' && r.observation.tool_call_id, `c${messages.length - 2}`);
    }
    const thrown = await ep.evaluate(messages, 'agent_stop').then(
      () => '',
      (e: Error) => e.message,
    );
    const report = JSON.parse(thrown.slice(thrown.indexOf('SEEN=') + 5, thrown.lastIndexOf('}') + 1)) as {
      steps: number;
      seen: Message[];
    };
    assert.equal(report.steps, 1, 'the module stepped the one call that fits');
    const seen = report.seen;
    assert.deepEqual(
      seen.map((m) => m.role),
      ['user', 'assistant', 'tool'],
      'the refused call is left out with its answer and its turn',
    );
    const [, turn] = seen;
    assert.equal(turn.content, null, 'no text beside the call');
    assert.equal(
      turn.role === 'assistant' && turn.tool_calls?.[0].function.arguments,
      '{"any":7,"id":"x","limit":3,"tags":["a"],"who":[{"name":"A"}]}',
    );
    await ep.close();
  } finally {
    await env.close();
  }
});
