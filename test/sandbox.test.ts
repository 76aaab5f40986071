import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { SandboxError, startSandboxedEnv } from '../envs/sandbox/index.js';
import { actionMessage } from '../envs/environment.js';
import { formatConformance, runConformance } from '../envs/protocol/conformance.js';
import { inspectInstance } from '../envs/sdk/index.js';
import type { Environment, Message } from '../envs/sdk/index.js';
import sdkEnv from './fixtures/sandbox/sdk-env.js';
import { ATTACK, attackSource } from './fixtures/sandbox/attack-source.js';

const reason = (r: string) => (e: unknown) => e instanceof SandboxError && e.reason === r;

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
