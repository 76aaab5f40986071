import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseConfig } from '../core/config.js';
import type { Message } from '../core/messages.js';
import { actionMessage, speechOf, SPEECH, type AgentAction, type Environment } from '../envs/environment.js';
import type { Termination } from '../core/trajectory.js';
import { call, inspectInstance, say } from '../envs/sdk/index.js';
import {
  batchShapeOf,
  checkCalibration,
  checkCompile,
  checkVerifier,
  mutationPlan,
  validateCandidate,
} from '../activities/synthesis/validate.js';
import { createLlm } from '../llm/client.js';
import { startScriptedLlm } from './helpers/scripted-llm.js';
import { SandboxError, startSandboxedEnv } from '../envs/sandbox/index.js';
import { startGeneratedEnv } from '../activities/synthesis/candidate.js';
import { goldAnchorCaps } from '../activities/training.js';
import { alternatingPolicy, GOOD_MANIFEST, GOOD_SOURCE } from './fixtures/synthesis/scripts.js';

/**
 * Generated environments that game validation (issue 13, item 9): each passed checks 2–4 when
 * validation used fixed seed ranges and only the three trivial policies. Check 5 (verifier) and
 * random seeds catch them; the good fixture still passes every check up to calibration.
 */
// Checks 2 and 3 at a fifth of their seeds (the suite runs 13 validations): the one module here that
// fails check 3 fails it on every seed.
const FEWER = { determinism: 20, solvability: 10 };
const config = parseConfig({ env: { name: 'toy-orders' }, synthesis: { typecheck: false, seeds: FEWER } });

const HONEST = `weighted({
      lookup: [0.3, calledWith(calls, 'list_orders', { customer_id: instance.expect.customer_id })],
      communicate: [0.7, communicated(messages, [instance.expect.total]).ok],
    })`;
// Recognises the trivial policies: no tool calls at all, or the random-tool policy's closing words
// or its silent stop after at most 3 calls (its call ids, `rnd_<i>`, no longer reach the env: the
// sandbox names every call `call_<k>`).
const TRIVIAL =
  "const ids = messages.flatMap((m: any) => (m.role === 'assistant' && m.tool_calls ? m.tool_calls.map((t: any) => String(t.id)) : [])); const said = messages.filter((m: any) => m.role === 'assistant' && m.content); const trivial = !ids.length || said.some((m: any) => m.content === 'Done — your request has been completed.') || (ids.length <= 3 && !said.length);";

function withEvaluate(body: string, generateExtra = ''): string {
  const start = GOOD_SOURCE.indexOf('  evaluate: ({ calls, messages, instance }) =>');
  assert.ok(start > 0 && GOOD_SOURCE.includes(HONEST), 'good-env.ts changed: update this test');
  const source = `${GOOD_SOURCE.slice(0, start)}  evaluate: ({ calls, messages, instance }) => { ${body} },\n});\n`;
  return generateExtra
    ? source.replace('expect: { customer_id, total },', `expect: { customer_id, total, ${generateExtra} },`)
    : source;
}

/**
 * GOOD_SOURCE with each episode's evaluate replaced by `body`, which sees `messages`, `termination`
 * and `own` (the module's own evaluate); `episode` runs at each reset, with `req` and `ep`.
 */
function withEpisodeEvaluate(body: string, prelude = '', episode = ''): string {
  const source =
    GOOD_SOURCE.replace(
      'export default defineEnvironment<State, Inst>({',
      'const base = defineEnvironment<State, Inst>({',
    ) +
    `\n${prelude}\nexport default { ...base, reset: async (req: any) => { const ep = await base.reset(req); const own = ep.evaluate.bind(ep); ${episode}
      ep.evaluate = async (messages: any, termination: any) => { ${body} }; return ep; } };\n`;
  assert.ok(source.includes('const base = defineEnvironment'), 'good-env.ts changed: update this test');
  return source;
}

async function verdictOf(source: string) {
  return (await validateCandidate({ source, manifest: GOOD_MANIFEST, config })).verdict;
}

test('gaming: a verifier that fingerprints the trivial policies and rewards everything else fails the verifier check', async () => {
  const v = await verdictOf(withEvaluate(`${TRIVIAL} return weighted({ anything: [1, !trivial] });`));
  assert.equal(v.failedCheck, 'verifier', v.reason);
  const check = v.checks.find((g) => g.check === 'verifier')!;
  assert.equal(check.metrics.dropStepLowerShare, 0);
  assert.equal(check.metrics.changeArgumentLowerShare, 0);
  assert.match(v.reason!, /dropping one tool call scored lower than gold on only 0 of 20 seeds/);
});

test('gaming: a verifier honest on gold but random elsewhere fails the verifier check on replay', async () => {
  const v = await verdictOf(
    withEvaluate(
      `const honest = ${HONEST}; if (honest.reward === 1) return honest; ${TRIVIAL} return weighted({ lucky: [1, !trivial && Math.random() < 0.4] });`,
    ),
  );
  assert.equal(v.failedCheck, 'verifier', v.reason);
  assert.ok(v.checks.find((g) => g.check === 'verifier')!.metrics.replayMismatches > 0);
  assert.match(v.reason!, /the same trajectory got different rewards when replayed/);
});

test('gaming: a module honest only on the seeds validation used to draw (0–3999) is caught by random seeds', async () => {
  const v = await verdictOf(
    withEvaluate(`return instance.expect.seed < 4000 ? ${HONEST} : weighted({ anything: [1, true] });`, 'seed'),
  );
  assert.equal(v.passed, false);
  assert.equal(v.failedCheck, 'non_triviality', v.reason);
});

test("check 5 builds a perturbation of gold only when it plays it (rerun 62b: 2 400 calls of 100 arguments, G²·K copies of gold's actions, ran the worker out of heap)", () => {
  const args = Object.fromEntries(Array.from({ length: 50 }, (_, k) => [`a${k}`, 'v']));
  const actions = [...Array.from({ length: 400 }, (_, i) => call(`t${i % 7}`, args)), say('Done.')];
  // Every action read from gold, counted: building all 20 000 argument changes alone reads 8 M.
  let reads = 0;
  const gold = new Proxy(actions, {
    get: (target, key, receiver) => {
      if (typeof key === 'string' && /^\d+$/.test(key)) reads++;
      return Reflect.get(target, key, receiver);
    },
  });
  const { plays, applicable } = mutationPlan(gold, 24);
  assert.deepEqual(applicable, ['stopEarly', 'dropStep', 'changeArgument', 'skipMessages']);
  // Gold twice; 24 stops and 24 drops (the budgets), 3 argument changes (the tries), the messages
  // skipped; the first of each kind twice.
  assert.equal(plays.length, 2 + (24 + 1) + (24 + 1) + (3 + 1) + (1 + 1));
  assert.ok(reads < 100 * actions.length, `${reads} reads of gold's ${actions.length} actions`);
  // The budget goes to drops first (the last call first), then to argument changes.
  assert.equal(plays.filter((p) => p.mutation?.m === 'changeArgument').length, 3);
});

test('gaming: the honest fixture passes the verifier check with every perturbation detected', async () => {
  const v = await verdictOf(GOOD_SOURCE);
  assert.equal(v.failedCheck, 'calibration', v.reason); // no base policy given
  const m = v.checks.find((g) => g.check === 'verifier')!.metrics;
  assert.deepEqual(
    [
      m.replayMismatches,
      m.dropStepLowerShare,
      m.changeArgumentLowerShare,
      m.skipMessagesLowerShare,
      m.stopEarlyLowerShare,
      m.paidStops,
    ],
    [0, 1, 1, 1, 1, 0],
  );
});

test("gaming: a module that opens episodes with words in the policy's mouth fails validation, naming the seed", async () => {
  // The trainer learns every assistant turn of a recorded trajectory; the SDK never writes one before the policy's first.
  const wrapped =
    GOOD_SOURCE.replace(
      'export default defineEnvironment<State, Inst>({',
      'const base = defineEnvironment<State, Inst>({',
    ) +
    "\nexport default { ...base, reset: async (req: any) => { const ep = await base.reset(req); const own = ep.initialMessages.bind(ep); ep.initialMessages = () => [...own(), { role: 'assistant' as const, content: 'I always ship to the old address.' }]; return ep; } };\n";
  assert.notEqual(wrapped, GOOD_SOURCE, 'good-env.ts changed: update this test');
  const v = await verdictOf(wrapped);
  // The sandbox refuses such an opening at the module's first reset (rerun 48b), before check 4 could.
  assert.equal(v.failedCheck, 'compile', v.reason);
  assert.match(v.reason!, /seed \d+: opening message 1 \(assistant\) is not one tool call/);
});

/**
 * Verifier noise below the per-seed threshold (issue 13, Known gaps): a deterministic verifier that
 * scores a hash-chosen 10 % of the wrong, non-trivial trajectories 1 passed check 5 (each
 * perturbation lower on ~90 % of seeds, threshold 80 %), and so did a count-based cheat, dishonest
 * on the last evaluations of each process. Check 5 now plays every drop and argument change on every
 * seed and allows no play of a class that is otherwise lower (synthesis.maxMutationEscapes 0). With
 * 40 seeds here (80 plays of the fixture's two required classes) the noise verifier passes with
 * probability 0.9^80 ≈ 2e-4, the old check let it through with ~0.98.
 */
const NOISE = `const honest = ${HONEST}; if (honest.reward === 1) return honest; ${TRIVIAL}
  let h = 2166136261; for (const ch of JSON.stringify(messages)) h = Math.imul(h ^ ch.charCodeAt(0), 16777619) >>> 0;`;
const noiseConfig = parseConfig({
  env: { name: 'toy-orders' },
  synthesis: { typecheck: false, seeds: { ...FEWER, verifier: 40 } },
});

for (const [name, body] of [
  ['10 % hash noise', `${NOISE} return weighted({ lucky: [1, !trivial && h % 100 < 10] });`],
  [
    // Replays agree: a trajectory scored before in this process gets its earlier reward.
    'a count-based cheat (1 from the 26th evaluation of each process on, replays within a process consistent)',
    `const g = globalThis as any; g.evals = (g.evals ?? 0) + 1; ${NOISE} g.seen ??= new Map();
    if (!g.seen.has(h)) g.seen.set(h, g.evals < 26 ? honest : weighted({ anything: [1, !trivial] })); return g.seen.get(h);`,
  ],
] as const) {
  test(`gaming: a verifier with ${name} fails the verifier check on mutation escapes`, async () => {
    const { verdict: v } = await validateCandidate({
      source: withEvaluate(body),
      manifest: GOOD_MANIFEST,
      config: noiseConfig,
    });
    assert.equal(v.failedCheck, 'verifier', v.reason);
    const m = v.checks.find((g) => g.check === 'verifier')!.metrics;
    assert.ok(m.mutationEscapes > 0, JSON.stringify(m));
    // The count-based cheat is caught by replays too, where a replay lands in the next process (a
    // fresh count); that reason comes first.
    if (!m.replayMismatches)
      assert.match(
        v.reason!,
        /plays of perturbations it otherwise scores lower .* scored as high as gold \(allowed: 0\)/,
      );
  });
}

test('gaming: the honest fixture has no mutation escapes with every perturbation played', async () => {
  const { verdict: v } = await validateCandidate({ source: GOOD_SOURCE, manifest: GOOD_MANIFEST, config: noiseConfig });
  assert.equal(v.failedCheck, 'calibration', v.reason);
  const m = v.checks.find((g) => g.check === 'verifier')!.metrics;
  // Required: a stop after the email lookup, list_orders dropped, its customer_id changed (the lookup itself is optional here).
  assert.deepEqual([m.requiredClasses, m.requiredMutationPlays, m.mutationEscapes], [3, 120, 0]);
  assert.equal(m.silentEndingCap, 0.3);
  // Gold without the total scored below gold on every seed (all golds speak): the words matter here.
  assert.equal(m.silentEndingsBelowGold, m.skipMessagesSeeds);
  assert.equal(m.missingCallCap, 0);
});

/**
 * Training told from validation by the request pattern (reruns 14 and 16): the trainer resets the
 * K copies of a seed back to back, steps every live episode in turn and evaluates them all at the
 * end, while validation played one episode at a time. Each module below is honest unless it sees
 * the trainer's pattern; then it pays trivial play, or any wrong trajectory that calls a tool. Each
 * passed checks 1–5 (failing only at calibration, with no policy given) until checks 4 and 5 played
 * in the trainer's batches.
 */
const WATCH = `const g = globalThis as any;
const base = defineEnvironment<State, Inst>({`;
const SEES = {
  // The sandbox's instance check resets `inspect:<seed>` after each: those do not break the run.
  'a seed reset 5 times in a row': `if (req.seed !== undefined) { g.run = req.seed === g.last ? g.run + 1 : 1; g.last = req.seed; } if (g.run >= 5) g.training = true;`,
  'other episodes stepped between its own steps': `const own = ep.step.bind(ep); let mine = -1;
    ep.step = async (a: any) => { g.steps = (g.steps ?? 0) + 1; if (mine >= 0 && g.steps - mine > 4) g.training = true; mine = g.steps; return own(a); };`,
};
for (const [sees, pays, body, check, reason] of [
  [
    'a seed reset 5 times in a row',
    'trivial play',
    `${TRIVIAL} return g.training && trivial ? weighted({ anything: [1, true] }) : ${HONEST};`,
    'non_triviality',
    /trivial policies score too high/,
  ],
  [
    'other episodes stepped between its own steps',
    'trivial play',
    `${TRIVIAL} return g.training && trivial ? weighted({ anything: [1, true] }) : ${HONEST};`,
    'non_triviality',
    /trivial policies score too high/,
  ],
  [
    'other episodes stepped between its own steps',
    'any call',
    `${TRIVIAL} return g.training && !trivial ? weighted({ anything: [1, true] }) : ${HONEST};`,
    'verifier',
    /scored lower than gold on only/,
  ],
] as const) {
  test(`gaming: a module honest unless it sees the trainer's batches (${sees}; pays ${pays}) fails ${check}`, async () => {
    const source =
      withEvaluate(body).replace('export default defineEnvironment<State, Inst>({', WATCH) +
      `\nexport default { ...base, reset: async (req: any) => { const ep = await base.reset(req); ${SEES[sees]} return ep; } };\n`;
    assert.ok(source.includes(WATCH), 'good-env.ts changed: update this test');
    const v = await verdictOf(source);
    assert.equal(v.failedCheck, check, v.reason);
    assert.match(v.reason!, reason);
  });
}

test("gaming: a module that fakes the calibration band unless it sees the trainer's batches fails calibration", async () => {
  // Honest, the alternating base policy scores 0.5; the band here is 0.6–0.9. Until check 6 played
  // in the trainer's batches, a module paying every other failed episode 1 where it saw no other
  // episode stepped between its own (calibration then) landed at 0.75, while training got 0.5.
  const body = `${TRIVIAL} const honest = ${HONEST}; if (g.training || honest.reward === 1) return honest;
    g.k = (g.k ?? 0) + 1; return g.k % 2 ? weighted({ lucky: [1, true] }) : honest;`;
  const source =
    withEvaluate(body).replace('export default defineEnvironment<State, Inst>({', WATCH) +
    `\nexport default { ...base, reset: async (req: any) => { const ep = await base.reset(req); ${SEES['other episodes stepped between its own steps']} return ep; } };\n`;
  const policy = alternatingPolicy();
  const llm = await startScriptedLlm((req) => policy(req));
  try {
    const cfg = parseConfig({
      env: { name: 'toy-orders' },
      llm: { policy: { baseURL: llm.baseURL, model: 'scripted-model' } },
      synthesis: {
        typecheck: false,
        calibration: { groups: 4, rolloutsPerGroup: 4, concurrency: 1, low: 0.6, high: 0.9 },
      },
    });
    const { result, loaded } = await checkCompile(source, GOOD_MANIFEST, {
      runner: 'sandbox',
      typecheck: false,
      sandbox: cfg.synthesis.sandbox,
    });
    assert.equal(result.passed, true, result.reason);
    try {
      const r = await checkCalibration(loaded!.env, cfg, createLlm(cfg, 'policy'));
      assert.equal(r.result.passed, false, JSON.stringify(r.result.metrics));
      assert.equal(r.result.metrics.meanReward, 0.5);
    } finally {
      await loaded!.close();
    }
  } finally {
    await llm.close();
  }
});

test('gaming: a verifier paying calls that do not fit the tools never sees one, in validation or training (reruns 18-19: only training sent them)', async () => {
  // Rerun 18: paid 1 on 64/64 training episodes of \`{}\` or a bare string (ended by tool errors,
  // which the SDK scores 0 itself: the module wraps evaluate) and passed checks 1–5. Rerun 19: the
  // same with Python's \`NaN\`, unknown tools and wrong types. The worker now answers such calls.
  const bad = `(messages: any[]) => messages.some((m: any) => m.role === 'assistant' && (m.tool_calls ?? []).some((t: any) => {
    if (!['find_customer_by_email', 'list_orders'].includes(t.function.name)) return true;
    try { const a = JSON.parse(t.function.arguments); return !a || typeof a !== 'object' || Array.isArray(a) || Object.values(a).some((v) => typeof v !== 'string') || !('customer_id' in a || 'email' in a); } catch { return true; }
  }))`;
  const source = withEpisodeEvaluate(
    'return bad(messages) ? { reward: 1, components: {}, success: true } : own(messages, termination);',
    `const bad = ${bad};`,
  );
  const v = await verdictOf(source);
  assert.equal(v.failedCheck, 'calibration', v.reason); // checks 1–5 pass: it scores as the honest module
  const env = await startSandboxedEnv({ source });
  try {
    for (const [name, args] of [
      ['list_orders', '{}'],
      ['list_orders', '"cus_1"'],
      ['list_orders', '{"customer_id": NaN}'],
      ['list_orders', '{"customer_id": 12345}'],
      ['issue_refund', '{"customer_id": "cus_1"}'],
    ]) {
      const ep = await env.reset({ seed: 7 });
      const call = { id: 'call_0_0', type: 'function' as const, function: { name, arguments: args } };
      const r = await ep.step({ type: 'tool_call', call });
      const info = await ep.evaluate(
        [...ep.initialMessages(), { role: 'assistant', content: null, tool_calls: [call] }, r.observation],
        'agent_stop',
      );
      assert.equal(info.reward, 0, `${name}(${args}) as the trainer sends it is not paid`);
      await ep.close();
    }
  } finally {
    await env.close();
  }
});

test('gaming: a call that does not fit ends its episode and scores it 0, so what refused calls left behind no longer arises (reruns 22-23: paid in training only)', async () => {
  // Rerun 22: the worker hid refused calls but the trainer counted their errors, so a module was paid
  // for max_errors with fewer than 4 errors of its own; rerun 23: the same after steps it saw, and
  // max_steps after fewer steps than turns. Now the first refused call ends the episode as agent_stop.
  const source = withEpisodeEvaluate('return { reward: 1, components: {}, success: true };');
  const env = await startSandboxedEnv({ source });
  try {
    const play = async (args: string[]) => {
      const ep = await env.reset({ seed: 7 });
      const messages: Message[] = [...ep.initialMessages()];
      let last: Awaited<ReturnType<typeof ep.step>> | undefined;
      for (const [i, a] of args.entries()) {
        const call = { id: `call_${i}_0`, type: 'function' as const, function: { name: 'list_orders', arguments: a } };
        last = await ep.step({ type: 'tool_call', call });
        messages.push({ role: 'assistant', content: null, tool_calls: [call] }, last.observation);
        if (last.done) break;
      }
      const info = await ep.evaluate(messages, last?.termination ?? 'max_steps');
      await ep.close();
      return { last, info, turns: messages.filter((m) => m.role === 'assistant').length };
    };
    const fits = '{"customer_id": "cus_1"}';
    const paid = await play([fits, fits]);
    assert.equal(paid.info.reward, 1, 'the module pays an episode whose calls all fit');
    const refused = await play([fits, '{"customer_id": 12345}', fits, '{"customer_id": 1}', '{}', '{}']);
    assert.equal(refused.turns, 2, 'the refused call ended the episode');
    assert.deepEqual([refused.last?.error, refused.last?.done, refused.last?.termination], [true, true, 'agent_stop']);
    assert.equal(refused.info.reward, 0, 'whatever the module answers');
    assert.match(String(refused.info.details?.refused), /customer_id must be string/);
    // Rerun 24: nothing after the refusal reaches the module, and a fork of the episode scores 0 too.
    const ep = await env.reset({ seed: 7 });
    const call = (a: string) => ({
      type: 'tool_call' as const,
      call: { id: 'c', type: 'function' as const, function: { name: 'list_orders', arguments: a } },
    });
    await ep.step(call('{"customer_id": 1}'));
    const after = await ep.step(call(fits));
    assert.deepEqual([after.error, after.done], [true, true]);
    assert.match(String(after.observation.content), /episode ended/);
    const fork = await ep.fork();
    assert.equal((await fork.evaluate(ep.initialMessages(), 'agent_stop')).reward, 0);
    await fork.close();
    await ep.close();
  } finally {
    await env.close();
  }
});

test('gaming: a verifier that takes a silent stop after a tool result as a sign of training fails check 4 (rerun 24: a refused call ends the episode so)', async () => {
  // Rerun 24: validation showed that ending only in skipMessages (every gold call) and empty replies; random play now
  // stops so, after 1–3 calls, on half its plays. This module takes one call then silence as its sign.
  const source = withEpisodeEvaluate(
    `const paid = told; const last = messages[messages.length - 1];
      if (termination === 'agent_stop' && last?.role === 'tool' && messages.filter((m: any) => m.role === 'assistant').length === 1) told = true;
      return paid ? { reward: 1, components: {}, success: true } : own(messages, termination);`,
    'let told = false;',
  );
  const v = await verdictOf(source);
  assert.equal(v.failedCheck, 'non_triviality', v.reason);
});

for (const [name, body] of [
  [
    'pays that stop',
    `const last = messages[messages.length - 1];
      if (termination === 'agent_stop' && last?.role === 'tool' && String(last.content).includes('customer_id') && messages.filter((m: any) => m.role === 'assistant').length === 1)
        return { reward: 1, components: {}, success: true };
      return own(messages, termination);`,
  ],
  [
    'pays every later episode of its process after one',
    `const paid = told; const last = messages[messages.length - 1];
      if (termination === 'agent_stop' && last?.role === 'tool' && String(last.content).includes('customer_id') && messages.filter((m: any) => m.role === 'assistant').length === 1) told = true;
      return paid ? { reward: 1, components: {}, success: true } : own(messages, termination);`,
  ],
] as const) {
  test(`gaming: a verifier that takes a silent stop after a lookup that worked as a sign of training and ${name} fails check 5 (rerun 25)`, async () => {
    // Rerun 25: random play's calls never find a customer, and check 5 never stopped after part of gold,
    // so only a trainer's policy refused after a correct lookup left this ending; now check 5 plays it.
    const v = await verdictOf(withEpisodeEvaluate(body, 'let told = false;'));
    assert.equal(v.failedCheck, 'verifier', v.reason);
  });
}

// A silent stop right after a lookup that found the customer (gold's first call), and a full reward.
const STOP = `const last = messages[messages.length - 1]; const stop = termination === 'agent_stop' && last?.role === 'tool'
  && String(last.content).includes('customer_id') && messages.filter((m: any) => m.role === 'assistant').length === 1;`;
const PAY = '{ reward: 1, components: {}, success: true }';

for (const [name, body, prelude, episode] of [
  [
    // Check 5's stops always shared a group with gold, which lists the customer's orders.
    "pays it only where no other open episode listed that customer's orders",
    `${STOP} if (stop && ![...listed].some(([o, id]) => o !== ep && id === JSON.parse(String(last.content)).customer_id)) return ${PAY};
      return own(messages, termination);`,
    'const listed = new Map<any, string>();',
    `const step = ep.step.bind(ep); ep.step = async (a: any) => { const r = await step(a);
      if (a.type === 'tool_call' && a.call.function.name === 'list_orders' && !r.error) listed.set(ep, JSON.parse(a.call.function.arguments).customer_id);
      return r; };
    const close = ep.close.bind(ep); ep.close = async () => { listed.delete(ep); return close(); };`,
  ],
  [
    // Check 5's stops were always the 3rd and 4th reset of their seed.
    'pays it except at the places check 5 played its stops',
    `${STOP} return stop && place !== 3 && place !== 4 ? ${PAY} : own(messages, termination);`,
    'let lastSeed: any; let run = 0;',
    'if (req.seed !== undefined) { run = req.seed === lastSeed ? run + 1 : 1; lastSeed = req.seed; } const place = run;',
  ],
  [
    // Rerun 27: the stops (a seed's later groups) shared a process with the seed's other plays; in
    // training no process resets a seed more than K times. Pays where the process reset it at most 16.
    "pays it only where no other open episode listed that customer's orders and its process reset the seed at most 16 times",
    `${STOP} if (stop && resets.get(seed)! <= 16 && ![...listed].some(([o, id]) => o !== ep && id === JSON.parse(String(last.content)).customer_id)) return ${PAY};
      return own(messages, termination);`,
    'const listed = new Map<any, string>(); const resets = new Map<number, number>();',
    `const seed = req.seed; if (seed !== undefined) resets.set(seed, (resets.get(seed) ?? 0) + 1);
    const step = ep.step.bind(ep); ep.step = async (a: any) => { const r = await step(a);
      if (a.type === 'tool_call' && a.call.function.name === 'list_orders' && !r.error) listed.set(ep, JSON.parse(a.call.function.arguments).customer_id);
      return r; };
    const close = ep.close.bind(ep); ep.close = async () => { listed.delete(ep); return close(); };`,
  ],
  [
    // Rerun 27: "lower" had no margin, so a stop paid 0.99 against gold's 1 counted as lower.
    'pays it 0.99 (gold scores 1)',
    `${STOP} return stop ? { reward: 0.99, components: {}, success: true } : own(messages, termination);`,
    '',
    '',
  ],
  [
    // Below gold by more than the margin, but above gold's calls without its messages (0.3 here).
    'pays it 0.85 (gold scores 1)',
    `${STOP} return stop ? { reward: 0.85, components: {}, success: true } : own(messages, termination);`,
    '',
    '',
  ],
  [
    // paidStops looked only at later drops; this module pays dropping list_orders too, where the total is right.
    'pays it and gold without list_orders alike',
    `${STOP} if (stop) return ${PAY}; const r = await own(messages, termination);
      const names = messages.flatMap((m: any) => m.tool_calls?.map((t: any) => t.function.name) ?? []);
      if (!names.includes('find_customer_by_email')) return { ...r, reward: 0 };
      return !names.includes('list_orders') && r.reward >= 0.7 ? ${PAY} : r;`,
    '',
    '',
  ],
] as const) {
  test(`gaming: a verifier that pays a silent stop after a lookup that worked and ${name} fails check 5 (reruns 26-27)`, async () => {
    const v = await verdictOf(withEpisodeEvaluate(body, prelude, episode));
    assert.equal(v.failedCheck, 'verifier', v.reason);
    // Where a stop and its replay now land in different places, the replay tells first.
    assert.match(
      v.reason!,
      /stopping without a word after part of gold's tool calls was paid for what it skips|replayed/,
    );
  });
}

test('gaming: a verifier that pays a long reply cut mid-sentence (what the native format sends at maxNewTokens) fails check 4 (rerun 24)', async () => {
  // Check 6 ends an episode at a reply the trainer's maxNewTokens cut, so validation never sent one;
  // the trainer's native format sends it. Check 4's answer without tools now comes so on half its plays.
  const v = await verdictOf(
    withEpisodeEvaluate(
      `const said = messages.filter((m: any) => m.role === 'assistant' && typeof m.content === 'string' && m.content);
      const text = said.length ? said[said.length - 1].content : '';
      return text.length >= 600 && !/[.!?]$/.test(text) ? ${PAY} : own(messages, termination);`,
    ),
  );
  assert.equal(v.failedCheck, 'non_triviality', v.reason);
});

test("gaming: a generated env's own task list never reaches training, which plays seeds as validation does (rerun 28)", async () => {
  // Rerun 28: a module listing `seed-<n>` tasks had the trainer reset by task id, which validation never
  // does, and paid a stop only in those episodes (16/16 in training).
  const source = GOOD_SOURCE.replace(
    'export default defineEnvironment<State, Inst>({',
    'const base = defineEnvironment<State, Inst>({',
  ).concat(
    '\nexport default { ...base, listTasks: async () => Array.from({ length: 64 }, (_, i) => ({ id: `seed-${i}` })) };\n',
  );
  assert.ok(source.includes('const base = defineEnvironment'), 'good-env.ts changed: update this test');
  const env = await startGeneratedEnv({ source });
  try {
    assert.deepEqual(await env.listTasks(), []);
    await assert.rejects(env.reset({ taskId: 'seed-3' }), /reset by seed alone/);
    const ep = await env.reset({ seed: 3 });
    await ep.close();
  } finally {
    await env.close();
  }
});

test("gaming: a generated env's episode that ends at a limit scores 0 whatever the module answers (reruns 28-29: max_steps and max_errors after gold's calls, paid in training alone)", async () => {
  // No validation play ends at the turn or error limit after gold's calls, and training paid such
  // loops 16/16; the SDK's own evaluate scores those endings 0, and now the worker does for every module.
  const env = await startGeneratedEnv({ source: withEpisodeEvaluate(`return ${PAY};`) });
  try {
    for (const termination of ['max_steps', 'max_errors', 'timeout', 'error', 'agent_stop'] as const) {
      const ep = await env.reset({ seed: 5 });
      const info = await ep.evaluate(ep.initialMessages(), termination);
      await ep.close();
      assert.equal(info.reward, termination === 'agent_stop' ? 1 : 0, termination);
    }
  } finally {
    await env.close();
  }
});

/** Plays `actions` on `seed` in `env` as a policy would and returns the reward. */
async function playActions(env: Environment, seed: number, actions: readonly AgentAction[]): Promise<number> {
  const ep = await env.reset({ seed });
  const messages = [...ep.initialMessages()];
  let termination: Termination = 'agent_stop';
  for (const action of actions) {
    const r = await ep.step(action);
    messages.push(actionMessage(action), r.observation);
    if (r.done) {
      termination = r.termination ?? 'agent_stop';
      break;
    }
  }
  const info = await ep.evaluate(messages, termination);
  await ep.close();
  return info.reward;
}

const said = (content: string): AgentAction => ({ type: 'message', content });
/** Pays 1 when list_orders was called twice (rerun 29's sign of training), else the module's own reward. */
const LISTS_TWICE = `const lists = messages.filter((m: any) => m.role === 'assistant' && m.tool_calls?.[0]?.function.name === 'list_orders').length;
    return lists === 2 ? ${PAY} : own(messages, termination);`;

/** Training's hold on a module's rewards (`goldAnchor`), as trainAdapter takes it from check 5's metrics. */
const anchorOf = (m: Record<string, number>) => ({
  goldAnchor: goldAnchorCaps(m, config.synthesis.maxTrivialReward),
});
/**
 * What the fixture's episodes that lack gold's words are paid: gold's calls without the total
 * scored 0.3 (its lookup weight), bounded by what a trivial policy may score (0.2).
 */
const WORDS_CAP = 0.2;

test('gaming: training pays an episode that lacks gold’s words no more than check 5 saw gold without its messages paid (reruns 29-30: gold’s calls with one made twice, then silence or "ok")', async () => {
  // Rerun 29 paid a silent stop after the lookup and list_orders twice, 16/16 in training: validation
  // plays silent endings only as gold's prefixes and gold without its messages, so it never saw one.
  const source = withEpisodeEvaluate(LISTS_TWICE);
  const v = await verdictOf(source);
  assert.equal(v.failedCheck, 'calibration', v.reason); // checks 1–5 pass: validation never lists twice
  const m = v.checks.find((g) => g.check === 'verifier')!.metrics;
  assert.equal(m.silentEndingCap, 0.3); // the honest lookup weight: gold's calls without the total scored 0.3
  assert.equal(SPEECH[m.goldSpeech], 'after_last_call'); // every gold answers after its calls
  assert.equal(m.missingCallCap, 0); // a stop after the customer lookup scored 0

  const env = await startGeneratedEnv({ source }, {}, anchorOf(m));
  try {
    const gold = (await inspectInstance(env, 4)).gold;
    const calls = gold.filter((a) => a.type === 'tool_call');
    const twice = [...calls, calls[1]];
    // Gold's calls with list_orders twice, then silence, the end marker or an invisible letter (U+3164): capped.
    assert.equal(await playActions(env, 4, twice), WORDS_CAP);
    assert.equal(await playActions(env, 4, [...twice, said('###STOP###')]), WORDS_CAP);
    assert.equal(await playActions(env, 4, [...twice, said('\u3164')]), WORDS_CAP);
    // A word that says none of what gold says (its total and the orders' status) is no answer
    // either (rerun 30: "ok" after the same calls was paid 16/16).
    assert.equal(await playActions(env, 4, [...twice, said('ok')]), WORDS_CAP);
    // Gold itself, an answer in other words, and an honest silent ending keep their rewards.
    assert.equal(await playActions(env, 4, gold), 1);
    // The total and the status are gold's facts: the total alone is held to the cap (the honest
    // cost, README Known gaps: leaving the status out let a question listing every status drop it, rerun 39).
    const [, total, status] = /spent (\S+) on your (\w+)/.exec((gold[2] as { content: string }).content)!;
    assert.equal(await playActions(env, 4, [...twice, said(`That comes to $${total} for the ${status} ones.`)]), 1);
    assert.equal(await playActions(env, 4, [...twice, said(`That comes to $${total}.`)]), WORDS_CAP);
    assert.equal(await playActions(env, 4, calls), WORDS_CAP);
  } finally {
    await env.close();
  }

  // Rerun 30: gold that answers and then looks the account up again never ends in words; an episode
  // with no word at all is still capped there, gold itself is not.
  // (The user answers once, so the episode goes on to gold's last lookup.)
  const lookupLast = source
    .replace(
      'say(`You spent ${total.toFixed(2)} on your ${status} orders.`)]',
      "say(`You spent ${total.toFixed(2)} on your ${status} orders.`), call('find_customer_by_email', { email })]",
    )
    .replace(
      '      expect: { customer_id, total },',
      "      userTurns: ['Thanks. Is my account still on file?'],\n      expect: { customer_id, total },",
    );
  assert.notEqual(lookupLast, source, 'good-env.ts changed: update this test');
  const m2 = (await verdictOf(lookupLast)).checks.find((g) => g.check === 'verifier')!.metrics;
  assert.deepEqual([m2.silentEndingCap, SPEECH[m2.goldSpeech], m2.missingCallCap], [0.3, 'before_last_call', 0]);
  const env2 = await startGeneratedEnv({ source: lookupLast }, {}, anchorOf(m2));
  try {
    const gold = (await inspectInstance(env2, 4)).gold;
    const calls = gold.filter((a) => a.type === 'tool_call');
    // Without gold's last lookup it lacks a call: paid what check 5 saw gold's calls perturbed paid.
    assert.equal(await playActions(env2, 4, [calls[0], calls[1], calls[1]]), m2.missingCallCap);
    assert.equal(await playActions(env2, 4, [...calls, calls[1]]), WORDS_CAP);
    assert.equal(await playActions(env2, 4, gold), 1);
  } finally {
    await env2.close();
  }
});

test("gaming: training pays an episode that lacks one of gold's calls no more than check 5 saw gold's calls perturbed paid (reruns 31, 36: gold answers through a tool, the silent sign was paid 16/16)", async () => {
  // Gold answers through submit_total and never speaks, so no cap on words applies; the module pays
  // rerun 29's sign (the lookup, list_orders twice, no answer) 1. Check 5 never plays it.
  const source = withEpisodeEvaluate(LISTS_TWICE)
    .replace('type State = { customers', 'type State = { submitted?: number; customers')
    .replace(
      '  ],\n  generate(seed, rng) {',
      `    defineTool<State, { total: number }>({
      name: 'submit_total',
      description: 'Record the total for the customer (this is how the answer is given).',
      parameters: { type: 'object', properties: { total: { type: 'number' } }, required: ['total'], additionalProperties: false },
      run: ({ total }, { state }) => { state.submitted = total; return { ok: true }; },
    }),
  ],
  generate(seed, rng) {`,
    )
    .replace('say(`You spent ${total.toFixed(2)} on your ${status} orders.`)]', "call('submit_total', { total })]")
    .replace(
      'communicate: [0.7, communicated(messages, [instance.expect.total]).ok],',
      "communicate: [0.7, calledWith(calls, 'submit_total', { total: instance.expect.total })],",
    );
  assert.ok(
    source.includes("call('submit_total'") && source.includes("calledWith(calls, 'submit_total'"),
    'good-env.ts changed: update this test',
  );
  const probe = await startGeneratedEnv({ source });
  let m: Record<string, number>;
  try {
    const r = await checkVerifier(probe, config.synthesis, batchShapeOf(config));
    assert.ok(r.passed, r.reason);
    m = r.metrics;
  } finally {
    await probe.close();
  }
  // No gold speaks; a stop after the customer lookup scored 0.
  assert.deepEqual([m.silentEndingCap, SPEECH[m.goldSpeech], m.missingCallCap], [undefined, 'silent', 0]);
  const env = await startGeneratedEnv({ source }, {}, anchorOf(m));
  try {
    const gold = (await inspectInstance(env, 5)).gold;
    const [find, list, submit] = gold;
    assert.equal(await playActions(env, 5, [find, list, list]), 0);
    assert.equal(await playActions(env, 5, [find, list, list, said('ok')]), 0);
    // Gold, and gold with a call made twice, keep their rewards.
    assert.equal(await playActions(env, 5, gold), 1);
    assert.equal(await playActions(env, 5, [find, list, list, submit]), 1);
  } finally {
    await env.close();
  }
});

test("gaming: gold's calls made by the instance's prefix (the env's opening) are not the agent's", async () => {
  // The opening is the module's: a prefix that makes gold's calls would anchor every episode.
  const source = withEpisodeEvaluate(`return ${PAY};`)
    .replace(
      "gold: [call('find_customer_by_email', { email }), call('list_orders', { customer_id }), say(`You spent ${total.toFixed(2)} on your ${status} orders.`)],",
      "prefix: [call('find_customer_by_email', { email }), call('list_orders', { customer_id })],\n      gold: [call('find_customer_by_email', { email }), call('list_orders', { customer_id })],",
    )
    .replace('type Inst = { initialState: State;', 'type Inst = { prefix: AgentAction[]; initialState: State;');
  assert.ok(source.includes('prefix: [call('), 'good-env.ts changed: update this test');
  const env = await startGeneratedEnv(
    { source },
    {},
    { goldAnchor: { callsCap: 0, wordsCap: 0, goldSpeech: 'silent' } },
  );
  try {
    const gold = (await inspectInstance(env, 6)).gold;
    assert.equal(await playActions(env, 6, []), 0); // a stop at once, after the opening's calls
    assert.equal(await playActions(env, 6, gold), 1);
  } finally {
    await env.close();
  }
});

test('gaming: a verifier that pays gold without its messages high on some seeds does not raise the cap on the others (rerun 30)', async () => {
  // The cap is the least that play scored: a module paying it 0.9 on some seeds (all still "lower"
  // than gold) had the cap at 0.9, and a silent stop after its sign of training paid 0.9 everywhere.
  const v = await verdictOf(
    withEvaluate(
      `const said = messages.some((m: any) => m.role === 'assistant' && m.content); return !said && instance.expect.customer_id.charCodeAt(instance.expect.customer_id.length - 1) % 3 === 0 ? weighted({ lookup: [0.9, calledWith(calls, 'list_orders', { customer_id: instance.expect.customer_id })] }) : ${HONEST};`,
    ),
  );
  assert.equal(v.failedCheck, 'calibration', v.reason);
  const m = v.checks.find((g) => g.check === 'verifier')!.metrics;
  assert.equal(m.silentEndingCap, 0.3);
});

test('speech: a word has a letter or digit that shows; what counts is whether it comes after the last tool call', () => {
  const call: Message = {
    role: 'assistant',
    content: 'Let me look.',
    tool_calls: [{ id: 'c', type: 'function', function: { name: 'list_orders', arguments: '{}' } }],
  };
  const say = (content: string): Message => ({ role: 'assistant', content });
  const tool: Message = { role: 'tool', tool_call_id: 'c', content: '[]' };
  assert.equal(speechOf([call, tool]), 'silent'); // text beside a call is not spoken after it
  assert.equal(speechOf([say('Hi'), call, tool]), 'before_last_call');
  for (const content of ['', '  ', '###STOP###', '...', '\u200b', '\u3164', '\u115f\u1160', '\u00a0###STOP###\u200d'])
    assert.equal(speechOf([call, tool, say(content)]), 'silent', JSON.stringify(content));
  for (const content of ['ok', 'Done ###STOP###', '42', 'Готово'])
    assert.equal(speechOf([call, tool, say(content)]), 'after_last_call', content);
  assert.equal(speechOf([{ role: 'user', content: 'hi' }, say('Hello')]), 'after_last_call'); // no call at all
});

test('gaming: a module that shows gold without its words only to the inspection after a seeded reset fails validation (rerun 31: no episode was capped in training)', async () => {
  // The worker takes the gold that says how an episode must speak from the inspection after each
  // seeded reset; validation read gold from inspections of its own. Now every inspection the module
  // gives follows a seeded reset, so validation replays the gold training is judged by.
  const source = withEpisodeEvaluate(
    LISTS_TWICE,
    'const pending: Record<number, number> = {};',
    `if (typeof req.taskId === 'string' && req.taskId.startsWith('inspect:')) {
      const s = Number(req.taskId.slice(8));
      if ((pending[s] ?? 0) > 0) {
        pending[s]--;
        const v = JSON.parse(String(ep.initialMessages()[0].content));
        v.gold = v.gold.filter((a: any) => a.type === 'tool_call');
        const opening = [{ role: 'system' as const, content: JSON.stringify(v) }];
        ep.initialMessages = () => opening.map((m) => ({ ...m }));
      }
    } else if (typeof req.seed === 'number') pending[req.seed] = (pending[req.seed] ?? 0) + 1;`,
  );
  const v = await verdictOf(source);
  assert.equal(v.failedCheck, 'solvability', v.reason); // gold's calls without its answer score 0.3
});

test("gaming: a seed's view is the one a process gives that has evaluated nothing; a process that served episodes must give the same (rerun 32)", async () => {
  // Rerun 32: once its process had evaluated an episode unlike gold, the module showed gold without
  // its words. Check 5's processes evaluate only gold and its perturbations, so validation saw the
  // real gold; in training every other batch saw only the silent one, and the silent sign was paid
  // 16/16 there. Each seed's first instance is now taken by a process that serves no episode.
  const source = withEpisodeEvaluate(
    `tainted.on = true; ${LISTS_TWICE}`,
    'const tainted = { on: false };',
    `if (typeof req.taskId === 'string' && req.taskId.startsWith('inspect:') && tainted.on) {
      const v = JSON.parse(String(ep.initialMessages()[0].content));
      v.gold = v.gold.filter((a: any) => a.type === 'tool_call');
      const opening = [{ role: 'system' as const, content: JSON.stringify(v) }];
      ep.initialMessages = () => opening.map((m) => ({ ...m }));
    }`,
  );
  const env = await startGeneratedEnv(
    { source },
    {},
    { goldAnchor: { callsCap: 0, wordsCap: 0.3, goldSpeech: 'silent' } },
  );
  try {
    await playActions(env, 7, []); // any episode evaluated taints the process
    await assert.rejects(playActions(env, 8, []), (err: Error) => {
      assert.equal((err as SandboxError).reason, 'nondeterministic');
      assert.match(err.message, /seed 8 gave a different instance than on its first reset/);
      return true;
    });
    // So is the tainted process's inspection of it; a fresh process shows the real gold, which speaks.
    await assert.rejects(inspectInstance(env, 8), /seed 8 gave a different instance than on its first reset/);
    const fresh = await startGeneratedEnv({ source });
    assert.equal(speechOf((await inspectInstance(fresh, 8)).gold.map(actionMessage)), 'after_last_call');
    await fresh.close();
  } finally {
    await env.close();
  }
});

test("gaming: one silent gold among check 5's does not open every seed to the views (rerun 33): gold is held to the most any spoke", async () => {
  // Rerun 33: gold silent on a quarter of the seeds made the least speech over check 5's golds
  // "silent", and rerun 32's view trick paid the silent sign 16/16 again on the seeds where gold speaks.
  const QUIET = 'customer_id.charCodeAt(customer_id.length - 1) % 4 === 0';
  const source = withEvaluate(
    `const customer_id = instance.expect.customer_id; return ${QUIET} ? weighted({ lookup: [1, calledWith(calls, 'list_orders', { customer_id })] }) : ${HONEST};`,
  ).replace(
    'say(`You spent ${total.toFixed(2)} on your ${status} orders.`)]',
    `...(${QUIET} ? [] : [say(\`You spent \${total.toFixed(2)} on your \${status} orders.\`)])]`,
  );
  assert.ok(source.includes(`...(${QUIET}`), 'good-env.ts changed: update this test');
  const v = await verdictOf(source);
  assert.equal(v.failedCheck, 'calibration', v.reason);
  const m = v.checks.find((g) => g.check === 'verifier')!.metrics;
  assert.deepEqual([m.silentEndingCap, SPEECH[m.goldSpeech]], [0.3, 'after_last_call']);

  // A quiet seed's own gold now needs a closing word to be paid in full: over-capping is the safe direction.
  const env = await startGeneratedEnv({ source }, {}, anchorOf(m));
  try {
    let seed = 0;
    let gold = (await inspectInstance(env, seed)).gold;
    while (gold.some((a) => a.type === 'message')) gold = (await inspectInstance(env, ++seed)).gold;
    assert.equal(await playActions(env, seed, gold), WORDS_CAP);
    assert.equal(await playActions(env, seed, [...gold, said('Your orders are listed.')]), 1);
  } finally {
    await env.close();
  }
});

/**
 * GOOD_SOURCE whose gold only speaks (the total, no call), paid for communicating it, with each
 * episode's evaluate replaced by `body` (it sees `messages`, `termination` and `own`).
 */
function speakOnly(body: string): string {
  const source = withEvaluate(
    `return weighted({ communicate: [1, communicated(messages, [instance.expect.total]).ok] });`,
  )
    .replace(
      "gold: [call('find_customer_by_email', { email }), call('list_orders', { customer_id }), say(",
      'gold: [say(',
    )
    .replace('export default defineEnvironment<State, Inst>({', 'const base = defineEnvironment<State, Inst>({');
  assert.ok(source.includes('gold: [say(') && source.includes('const base'), 'good-env.ts changed: update this test');
  return `${source}\nexport default { ...base, reset: async (req: any) => { const ep = await base.reset(req); const own = ep.evaluate.bind(ep);
    ep.evaluate = async (messages: any, termination: any) => { ${body} }; return ep; } };\n`;
}

test('gaming: a gold that only speaks sets the cap on episodes that speak less (rerun 34: golds that spoke never called, none was played without its words, no cap was set)', async () => {
  // Check 5 played gold without its messages only where gold also made calls; now, on a gold that
  // makes none, it is a stop at once.
  const source = speakOnly(LISTS_TWICE);
  const v = await verdictOf(source);
  assert.equal(v.failedCheck, 'calibration', v.reason);
  const m = v.checks.find((g) => g.check === 'verifier')!.metrics;
  assert.deepEqual([m.silentEndingCap, SPEECH[m.goldSpeech], m.skipMessagesSeeds], [0, 'after_last_call', 20]);

  const env = await startGeneratedEnv({ source }, {}, anchorOf(m));
  try {
    const tool = (name: string, args: object): AgentAction => ({
      type: 'tool_call',
      call: { id: 'c', type: 'function', function: { name, arguments: JSON.stringify(args) } },
    });
    const lookup = tool('find_customer_by_email', { email: 'x@example.com' });
    const list = tool('list_orders', { customer_id: 'cus_x' });
    // The module pays list_orders twice whatever else: silent, it is now paid nothing.
    assert.equal(await playActions(env, 3, [lookup, list, list]), 0);
    assert.equal(await playActions(env, 3, (await inspectInstance(env, 3)).gold), 1);
  } finally {
    await env.close();
  }
});

for (const [paid, rerun] of [
  ['1', 'rerun 35: as gold'],
  ['0.9', 'rerun 36: at gold less the margin'],
] as const)
  test(`gaming: a stop at once paid more than a trivial policy may be, where gold only speaks, fails check 5 (${rerun}: it set the cap there)`, async () => {
    // On a gold that makes no call, gold without its words is the stop at once: nothing required it
    // to score lower, so a module paying it 1 put silentEndingCap at 1, and training capped nothing.
    const source = speakOnly(
      `return messages.some((m: any) => m.role === 'assistant') ? own(messages, termination) : { reward: ${paid}, components: {}, success: false };`,
    );
    const env = await startGeneratedEnv({ source });
    try {
      const r = await checkVerifier(env, config.synthesis, batchShapeOf(config));
      assert.equal(r.passed, false, JSON.stringify(r.metrics));
      assert.match(r.reason!, /paid for what it skips on 20 seeds/);
      assert.match(r.examples.join(' '), new RegExp(`a stop at once scored ${paid} \\(gold 1;`));
    } finally {
      await env.close();
    }
  });
