import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { AgentAction } from '../envs/environment.js';
import { SandboxError, startSandboxedEnv } from '../envs/sandbox/index.js';

/**
 * The env's CPU limit (`cpuSeconds`) is a total over all its processes (rerun 42b): a module spends
 * CPU in a tool, `burn`, of `n` million steps; the test sizes `n` by how fast this machine runs the
 * same loop, so each call costs about the CPU it asks for whatever the machine's speed or load.
 */
const SPIN = 'let x = 0; for (let i = 0; i < n * 1e6; i++) x = (x * 31 + i) | 0;';
const spin = new Function('n', `${SPIN} return x;`) as (n: number) => number;

/** Millions of loop steps per CPU second here (the sandbox runs the same node). */
function stepsPerSecond(): number {
  spin(20); // warm up the JIT
  const start = process.cpuUsage();
  spin(200);
  const used = process.cpuUsage(start);
  return 200 / ((used.user + used.system) / 1e6);
}

const source = (atClose = '') => `
let closes = 0;
const episode = (k) => ({
  id: 'e' + k,
  taskId: 'x',
  initialMessages: () => [{ role: 'user', content: 'go' }],
  async step(action) {
    const n = JSON.parse(action.call.function.arguments).n;
    ${SPIN}
    return { observation: { role: 'tool', tool_call_id: action.call.id, content: 'spun ' + x }, error: false, done: false };
  },
  evaluate: async () => ({ reward: 0, components: {}, success: false, details: {} }),
  fork: async () => episode(k),
  close: async () => { closes++; ${atClose} },
});
let resets = 0;
export default {
  info: { name: 'cpu', kind: 'synthetic', description: 'spends CPU on request' },
  tools: () => [{ type: 'function', function: { name: 'burn', parameters: { type: 'object', properties: { n: { type: 'number' } }, required: ['n'] } } }],
  systemPrompt: () => 'x',
  listTasks: async () => [{ id: 'x' }],
  reset: async () => episode(++resets),
};`;

const burn = (n: number, i: number): AgentAction => ({
  type: 'tool_call',
  call: { id: `c${i}`, type: 'function', function: { name: 'burn', arguments: JSON.stringify({ n }) } },
});
const cpuLimit = (e: unknown) => e instanceof SandboxError && e.reason === 'timeout' && e.limit === 'cpuSeconds';

test('sandbox CPU total: once the env has spent cpuSeconds, no fresh process is started (rerun 42b: each got 1 s more)', async () => {
  const perSecond = stepsPerSecond();
  const env = await startSandboxedEnv({ source: source(), limits: { episodesPerProcess: 1, cpuSeconds: 2 } });
  try {
    // 0.5 s an episode, each in a process of its own: the total passes 2 s by the fifth.
    let asked = 0;
    const run = async (i: number) => {
      const ep = await env.reset({ taskId: 'x' });
      await ep.step(burn(0.5 * perSecond, i));
      asked += 0.5;
      await ep.close();
    };
    let failed: unknown;
    for (let i = 0; i < 10 && !failed; i++) await run(i).catch((e: unknown) => (failed = e));
    assert.ok(cpuLimit(failed), `10 episodes of 0.5 s ran under a 2 s total (${String(failed)})`);
    assert.ok(asked <= 3.5, `${asked} s of CPU asked for before the env stopped`);
  } finally {
    await env.close();
  }
});

test('sandbox CPU total: two processes alive together share what is left (rerun 42b: 4.97 s of a 3 s total)', async () => {
  const perSecond = stepsPerSecond();
  const env = await startSandboxedEnv({ source: source(), limits: { episodesPerProcess: 2, cpuSeconds: 2 } });
  try {
    // e1 stays open in the first process; the second reset retires it; b1 opens in a fresh one.
    const e1 = await env.reset({ taskId: 'x' });
    await (await env.reset({ taskId: 'x' })).close();
    const b1 = await env.reset({ taskId: 'x' });
    let asked = 0;
    let failed: unknown;
    for (let i = 0; i < 12 && !failed; i++)
      await (i % 2 ? b1 : e1)
        .step(burn(0.25 * perSecond, i))
        .then(() => (asked += 0.25))
        .catch((e: unknown) => (failed = e));
    assert.ok(cpuLimit(failed), `12 steps of 0.25 s ran under a 2 s total (${String(failed)})`);
    // Each process alone may spend 2 s: together they had 4 s before either reached its own limit.
    assert.ok(asked <= 3, `${asked} s of CPU asked for and answered before the env stopped`);
  } finally {
    await env.close();
  }
});

test('sandbox CPU total: processes whose episodes close together are each counted (rerun 43b: 3.05 s counted of 9.17 s)', async () => {
  const perSecond = stepsPerSecond();
  const env = await startSandboxedEnv({ source: source(), limits: { episodesPerProcess: 2, cpuSeconds: 5 } });
  try {
    // Two batches of six episodes over three processes, 0.4 s each, closed together: 2.4 s a
    // batch and the processes' start-up. Keeping one process's CPU of each batch's three counted
    // about 1 s of the first, under 5 s with the second's running.
    let failed: unknown;
    for (let batch = 0; batch < 2 && !failed; batch++) {
      try {
        const eps = [];
        for (let i = 0; i < 6; i++) eps.push(await env.reset({ taskId: 'x' }));
        await Promise.all(eps.map((ep, i) => ep.step(burn(0.4 * perSecond, i))));
        await Promise.all(eps.map((ep) => ep.close()));
      } catch (e) {
        failed = e;
      }
    }
    assert.ok(cpuLimit(failed), `4.8 s of steps and six starts ran under a 5 s total (${String(failed)})`);
  } finally {
    await env.close();
  }
});

test("sandbox CPU total: a process that dies at its last episode's close fails the env, not only that process (rerun 42b)", async () => {
  const env = await startSandboxedEnv({
    source: source('if (closes === 2) process.exit(0);'),
    limits: { episodesPerProcess: 2 },
  });
  try {
    await (await env.reset({ taskId: 'x' })).close();
    await (await env.reset({ taskId: 'x' })).close(); // the module exits here, as its process retires
    await assert.rejects(
      env.reset({ taskId: 'x' }),
      (e: unknown) => e instanceof SandboxError && e.reason === 'crash' && /exited with code 0/.test(e.message),
    );
  } finally {
    await env.close();
  }
});
