import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseConfig } from '../core/config.js';
import { startGeneratedEnv } from '../activities/synthesis/candidate.js';
import { validateCandidate } from '../activities/synthesis/validate.js';
import type { SandboxedEnvironment } from '../envs/sandbox/index.js';
import { FROZEN_EPOCH_MS } from '../envs/sandbox/framing.js';
import { GOOD_MANIFEST, GOOD_SOURCE } from './fixtures/synthesis/scripts.js';

/**
 * Sleeper verifiers (issue 13, red-team rerun 2): honest for the first K evaluations a process
 * makes, then 1 for everything. With K past what validation evaluates (checks 1–5 make ~280
 * evaluations; all of them ran in one process before episodesPerProcess), the module passed
 * validation and then rewarded a policy that stops at once. Now every process serves at most
 * synthesis.sandbox.episodesPerProcess episodes (32), in validation and training alike, so the
 * count restarts in each fresh process and scratch dir.
 */
const config = parseConfig({ env: { name: 'toy-orders' }, synthesis: { typecheck: false } });
const K = 400;

const HONEST = `weighted({
      lookup: [0.3, calledWith(calls, 'list_orders', { customer_id: instance.expect.customer_id })],
      communicate: [0.7, communicated(messages, [instance.expect.total]).ok],
    })`;

function withEvaluate(body: string): string {
  const start = GOOD_SOURCE.indexOf('  evaluate: ({ calls, messages, instance }) =>');
  assert.ok(start > 0 && GOOD_SOURCE.includes(HONEST), 'good-env.ts changed: update this test');
  return `${GOOD_SOURCE.slice(0, start)}  evaluate: ({ calls, messages, instance }) => { ${body} },\n});\n`;
}

const SLEEPERS = {
  // A count in module memory.
  memory: withEvaluate(
    `const g = globalThis as any; g.evals = (g.evals ?? 0) + 1; return g.evals > ${K} ? weighted({ anything: [1, true] }) : ${HONEST};`,
  ),
  // A count in a scratch file (the sandbox's cwd is its writable scratch dir).
  'scratch file': withEvaluate(
    `const fs = (process as any).getBuiltinModule('node:fs'); let n = 0; try { n = Number(fs.readFileSync('evals.txt', 'utf8')); } catch {} fs.writeFileSync('evals.txt', String(n + 1)); return n + 1 > ${K} ? weighted({ anything: [1, true] }) : ${HONEST};`,
  ),
};

/** Rewards of `n` episodes whose policy stops at once (it earns 0 from an honest verifier). */
async function stopAtOnce(env: SandboxedEnvironment, n: number): Promise<number[]> {
  const rewards: number[] = [];
  for (let seed = 0; seed < n; seed++) {
    const ep = await env.reset({ seed });
    rewards.push((await ep.evaluate(ep.initialMessages(), 'agent_stop')).reward);
    await ep.close();
  }
  return rewards;
}

for (const [name, source] of Object.entries(SLEEPERS)) {
  test(`sleeper: a verifier counting evaluations in ${name} passes validation but never turns in training`, async () => {
    const { verdict } = await validateCandidate({ source, manifest: GOOD_MANIFEST, config });
    assert.equal(verdict.failedCheck, 'calibration', verdict.reason); // checks 1–5 passed; no base policy given
    // Training starts its env as validation does (startGeneratedEnv with synthesis.sandbox).
    const env = await startGeneratedEnv({ source }, config.synthesis.sandbox);
    try {
      const rewards = await stopAtOnce(env, K + 20);
      assert.deepEqual(
        rewards.filter((r) => r > 0),
        [],
        'a stop-at-once policy earned reward',
      );
      // A process retires at its 32nd episode; the 33rd starts the next: 420 episodes, 14 processes
      // (more if a pause over idleRetireMs, 5 s, came between two episodes on a busy machine).
      assert.ok(env.processesStarted >= Math.ceil((K + 20) / 32), `${env.processesStarted} processes`);
    } finally {
      await env.close();
    }
    // The sleeper is live: in one long-lived process (as before) it turns after K evaluations.
    const single = await startGeneratedEnv(
      { source },
      { ...config.synthesis.sandbox, episodesPerProcess: 100_000, idleRetireMs: 3_600_000 },
    );
    try {
      const rewards = await stopAtOnce(single, K + 20);
      assert.deepEqual(
        [rewards.slice(0, K).filter((r) => r > 0).length, rewards.slice(K).filter((r) => r === 1).length],
        [0, 20],
      );
    } finally {
      await single.close();
    }
  });
}

test('sleeper: a module cannot see time pass; every clock it can read is frozen', async () => {
  // Reads each clock at import and in a tool; evaluate turns once any of them has moved.
  const readings = `(() => { const fs = (process as any).getBuiltinModule('node:fs'); const os = (process as any).getBuiltinModule('node:os');
    fs.writeFileSync('stamp', String(Math.random()));
    return JSON.stringify([Date.now(), new Date().getTime(), Date(), new (new Date(0).constructor as any)().getTime(), new Intl.DateTimeFormat('en', { timeStyle: 'full', timeZone: 'UTC' }).format(),
      performance.now(), performance.timeOrigin, String(process.hrtime.bigint()), process.hrtime(), process.uptime(), os.uptime(),
      fs.statSync('stamp').mtimeMs, fs.statSync('stamp').mtime.getTime(), String(fs.statSync('stamp', { bigint: true }).mtimeNs)]); })()`;
  const source = withEvaluate(
    `const g = globalThis as any; g.first ??= ${readings}; return ${readings} !== g.first ? weighted({ anything: [1, true] }) : ${HONEST};`,
  );
  const env = await startGeneratedEnv({ source }, config.synthesis.sandbox);
  try {
    const [first] = await stopAtOnce(env, 1);
    await sleep(50); // every real clock moves by ≥ 50 ms
    const ep = await env.reset({ seed: 1 });
    assert.equal((await ep.evaluate(ep.initialMessages(), 'agent_stop')).reward, 0, 'the module saw its clocks move');
    await ep.close();
    assert.equal(first, 0);
  } finally {
    await env.close();
  }
  // The clock shows the fixed instant, as a date an env would print it; the asynchronous file
  // timestamps (callback, promise, FileHandle) are out of reach since rerun 72m (surface.ts).
  const dated = withEvaluate(
    `const g = globalThis as any; throw new Error('now=' + new Date().toISOString() + ' ' + Date.now() + ' files=' + JSON.stringify([g.cb, g.pr, g.fh]));`,
  ).replace(
    'export default',
    `const g0 = globalThis as any; const fs0 = (process as any).getBuiltinModule('node:fs'); fs0.writeFileSync('f', 'x');
const code0 = (f: () => unknown) => { try { f(); return 'open'; } catch (e) { return (e as any).code; } };
g0.cb = code0(() => fs0.stat('f', () => {})); g0.pr = code0(() => fs0.promises.stat('f')); g0.fh = code0(() => fs0.promises.open('f'));
export default`,
  );
  const e2 = await startGeneratedEnv({ source: dated }, config.synthesis.sandbox);
  try {
    const ep = await e2.reset({ seed: 0 });
    const frozen = `now=${new Date(FROZEN_EPOCH_MS).toISOString()} ${FROZEN_EPOCH_MS} files=${JSON.stringify(Array(3).fill('ERR_ACCESS_DENIED'))}`;
    let message = '';
    for (let i = 0; i < 50 && !message.includes(frozen); i++) {
      message = await ep.evaluate(ep.initialMessages(), 'agent_stop').then(
        () => '',
        (e: Error) => e.message,
      );
      if (/null/.test(message))
        await sleep(20); // an asynchronous stat not done yet
      else break;
    }
    assert.ok(message.includes(frozen), message);
  } finally {
    await e2.close();
  }
});

test('sleeper: the instance re-check spans processes, and a process with open episodes finishes them after it retires', async () => {
  const env = await startGeneratedEnv({ source: GOOD_SOURCE }, { ...config.synthesis.sandbox, episodesPerProcess: 2 });
  try {
    const a = await env.reset({ seed: 7 });
    const b = await env.reset({ seed: 8 }); // the first process's last episode: it retires
    const c = await env.reset({ seed: 7 }); // in the second process, checked against the first's instance
    assert.equal(env.processesStarted, 3); // two that serve episodes, and the one that took seeds 7 and 8 first
    assert.deepEqual(c.initialMessages(), a.initialMessages());
    for (const ep of [a, b, c]) assert.equal((await ep.evaluate(ep.initialMessages(), 'agent_stop')).reward, 0);
    await Promise.all([a.close(), b.close(), c.close()]);
    assert.equal(env.processDirs().length, 1, 'the retired process is closed once its episodes are');
  } finally {
    await env.close();
  }
});

test('sleeper: a fork counts toward episodesPerProcess, so the next reset after the last goes to a fresh process (rerun 72j: 1 reset and 10 forks, then a reset, all in one process)', async () => {
  const env = await startGeneratedEnv({ source: GOOD_SOURCE }, { ...config.synthesis.sandbox, episodesPerProcess: 2 });
  try {
    const a = await env.reset({ seed: 1 });
    const started = env.processesStarted;
    const forked = await a.fork(); // the process's second episode: its last
    const b = await env.reset({ seed: 2 });
    assert.equal(env.processesStarted, started + 1);
    await Promise.all([a.close(), forked.close(), b.close()]);
  } finally {
    await env.close();
  }
});

test('sleeper: resets made at once take at most episodesPerProcess episodes in each process (six at once all went to one)', async () => {
  const env = await startGeneratedEnv({ source: GOOD_SOURCE }, { ...config.synthesis.sandbox, episodesPerProcess: 2 });
  try {
    const eps = await Promise.all([1, 2, 3, 4, 5, 6].map((seed) => env.reset({ seed })));
    // Three processes serve two episodes each; three more take the six seeds' first instances.
    assert.equal(env.processesStarted, 6, `${env.processesStarted} processes for six episodes`);
    await Promise.all(eps.map((ep) => ep.close()));
  } finally {
    await env.close();
  }
});

test('sleeper: a fresh process must describe the same environment as the first', async () => {
  // A system prompt drawn at import differs in every process.
  const source =
    GOOD_SOURCE.replace(
      'export default defineEnvironment<State, Inst>({',
      'const base = defineEnvironment<State, Inst>({',
    ) + '\nconst prompt = `Be helpful. ${Math.random()}`;\nexport default { ...base, systemPrompt: () => prompt };\n';
  assert.notEqual(source, GOOD_SOURCE, 'good-env.ts changed: update this test');
  const env = await startGeneratedEnv({ source }, { ...config.synthesis.sandbox, episodesPerProcess: 1 });
  try {
    // The first reset of a seed starts a second process, which takes the seed's first instance.
    await assert.rejects(
      env.reset({ seed: 1 }),
      (e: Error) =>
        e.name === 'SandboxError' &&
        /sandbox nondeterministic: a fresh sandbox process of the module described a different environment/.test(
          e.message,
        ),
    );
  } finally {
    await env.close();
  }
});

test('sleeper: a process idle for idleRetireMs takes no new episodes, and a successor starts only when a reset needs it', async () => {
  const env = await startGeneratedEnv(
    { source: GOOD_SOURCE },
    { ...config.synthesis.sandbox, episodesPerProcess: 2, idleRetireMs: 50 },
  );
  try {
    // Waits on the retirement itself rather than a fixed 200 ms, which failed once on a starved machine.
    const retired = async () => {
      const since = Date.now();
      while (env.processDirs().length > 0) {
        assert.ok(Date.now() - since < 60_000, 'no idle process retired in 60 s');
        await sleep(10);
      }
    };
    await retired(); // the first process, started to describe the env, retires unused
    // Each count below is processes that serve episodes plus those that take seeds' first instances.
    const a = await env.reset({ seed: 1 });
    assert.equal(env.processesStarted, 3);
    const b = await env.reset({ seed: 2 }); // a is open, so this process is not idle; b is its last
    await Promise.all([a.close(), b.close()]);
    await sleep(200);
    assert.equal(env.processesStarted, 3, 'no process starts before a reset needs one');
    await (await env.reset({ seed: 3 })).close();
    assert.equal(env.processesStarted, 5);
    await retired(); // idle past idleRetireMs: the third process (and the second inspector) retire
    const ep = await env.reset({ seed: 4 });
    assert.equal(env.processesStarted, 7);
    await ep.close();
  } finally {
    await env.close();
  }
});

/**
 * A sleeper on process age (issue 13, Known gaps: "time inside one process"). With the clocks
 * frozen, a module could still see real time through its timers (how often a setInterval fired,
 * whether a timer set at one request had fired by the next, a Timeout's `_idleStart`), through
 * AbortSignal.timeout and Atomics.waitAsync, performance marks and event-loop statistics, CPU
 * usage and the machine's CPU times, and by counting a loop of real I/O that ran through the
 * worker's idle gaps (no asynchronous I/O is open to the module since rerun 72m). Each reading here
 * must move by exactly as much across a 2 s pause as across none.
 */
const AGE_SOURCES = `const gA = globalThis as any; const fsA = (process as any).getBuiltinModule('node:fs'); const osA = (process as any).getBuiltinModule('node:os');
gA.ticks = 0; gA.imm = 0; setInterval(() => { gA.ticks++; }, 10);
const immLoop = () => { gA.imm++; setImmediate(immLoop); }; setImmediate(immLoop);
const i32A = new Int32Array(new SharedArrayBuffer(4));
const tryA = (f: () => unknown) => { try { return f(); } catch (e) { return 'refused:' + (e as any).code; } };
gA.read = () => {
  const r = { ticks: gA.ticks, imm: gA.imm, timerFired: gA.timerFired ?? null, aborted: gA.signal?.aborted ?? null, waited: gA.waited ?? null,
    idleStart: (setTimeout(() => {}, 1) as any)._idleStart ?? null,
    cpu: process.cpuUsage().user, rusage: process.resourceUsage().userCPUTime, cpus: osA.cpus()[0]?.times.user ?? null, load: osA.loadavg()[0],
    mark: tryA(() => performance.mark('m').startTime), elu: tryA(() => performance.eventLoopUtilization().idle) };
  gA.timerFired = false; setTimeout(() => { gA.timerFired = true; }, 50);
  gA.signal = AbortSignal.timeout(50);
  gA.waited = false; (Atomics as any).waitAsync(i32A, 0, 0, 50).value.then(() => { gA.waited = true; });
  return r;
};
export default`;

test('sleeper: a module cannot see how long its process has lived (virtual timers, the process stopped between requests)', async () => {
  const source = withEvaluate(`throw new Error('R=' + JSON.stringify((globalThis as any).read()));`).replace(
    'export default',
    AGE_SOURCES,
  );
  const env = await startGeneratedEnv({ source }, config.synthesis.sandbox);
  try {
    const ep = await env.reset({ seed: 0 });
    const read = async () => {
      const message = await ep.evaluate(ep.initialMessages(), 'agent_stop').then(
        () => '',
        (e: Error) => e.message,
      );
      const at = message.indexOf('R=');
      assert.ok(at >= 0, message);
      return JSON.parse(message.slice(at + 2, message.lastIndexOf('}') + 1)) as Record<string, unknown>;
    };
    await read();
    const r1 = await read();
    const r2 = await read(); // no pause
    await sleep(2000);
    const r3 = await read(); // after a pause
    const delta = (a: Record<string, unknown>, b: Record<string, unknown>) =>
      Object.fromEntries(Object.keys(a).map((k) => [k, typeof a[k] === 'number' ? (b[k] as number) - a[k] : b[k]]));
    assert.deepEqual(delta(r2, r3), delta(r1, r2), 'a reading moved with the pause');
    // Timers run only while a request waits on them: none set at one reading fired by the next.
    assert.deepEqual(
      [r3.timerFired, r3.aborted, r3.waited, r3.idleStart, r3.cpu, r3.cpus, r3.mark, r3.elu],
      [false, false, false, null, 0, 0, 'refused:ERR_ACCESS_DENIED', 'refused:ERR_ACCESS_DENIED'],
    );
    await ep.close();
  } finally {
    await env.close();
  }
});

test('sleeper: virtual timers keep ordinary asynchronous module code working', async () => {
  // A module whose reset awaits timers: they fire in deadline order, awaited sleeps resolve at
  // once, intervals stop when cleared, and timers/promises and AbortSignal.timeout work.
  const work = `async () => {
    const { setTimeout: sleepP, setImmediate: immP, setInterval: everyP } = await import('node:timers/promises');
    const order: string[] = [];
    await new Promise<void>((done) => { setTimeout(() => order.push('b'), 20); setTimeout(() => order.push('a'), 10); setImmediate(() => order.push('i')); setTimeout(done, 30); });
    await sleepP(0); await sleepP(60_000); await immP();
    let n = 0; const iv = setInterval(() => { if (++n === 3) clearInterval(iv); }, 5); await sleepP(100);
    let k = 0; for await (const _ of everyP(10)) { if (++k === 2) break; }
    const s = AbortSignal.timeout(1000); await sleepP(1001);
    const r = await Promise.race([sleepP(5, 'short'), sleepP(50, 'long')]);
    return JSON.stringify({ order, n, k, aborted: s.aborted, r });
  }`;
  const source =
    withEvaluate(`throw new Error('S=' + (globalThis as any).seen);`).replace(
      'export default defineEnvironment<State, Inst>({',
      'const base = defineEnvironment<State, Inst>({',
    ) +
    `\nexport default { ...base, reset: async (...a: any[]) => { (globalThis as any).seen = await (${work})(); return (base.reset as any)(...a); } };\n`;
  const env = await startGeneratedEnv({ source }, config.synthesis.sandbox);
  try {
    const started = performance.now();
    const ep = await env.reset({ seed: 0 });
    const message = await ep.evaluate(ep.initialMessages(), 'agent_stop').then(
      () => '',
      (e: Error) => e.message,
    );
    assert.ok(message.includes('S={"order":["i","a","b"],"n":3,"k":2,"aborted":true,"r":"short"}'), message);
    // 60 s and 1 s of sleeps took no real time.
    assert.ok(performance.now() - started < 5_000, `${performance.now() - started} ms`);
    await ep.close();
  } finally {
    await env.close();
  }
});
