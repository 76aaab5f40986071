import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseConfig, type ConfigInput } from '../core/config.js';
import {
  calibrationStats,
  judgeCalibration,
  judgeDeterminism,
  judgeNonTriviality,
  judgeSolvability,
  SynthesisConfigSchema,
} from '../core/synthesis.js';
import { createLlm } from '../llm/client.js';
import { loadCandidate } from '../activities/synthesis/candidate.js';
import { checkCalibration, checkCompile, playBatch, scripted, type Policy } from '../activities/synthesis/validate.js';
import type { Environment, Episode } from '../envs/environment.js';
import { synthesizeEnvironment, validateEnvironment } from '../activities/synthesis/index.js';
import { openStore } from '../store/index.js';
import { startScriptedLlm } from './helpers/scripted-llm.js';
import { alternatingPolicy, BROKEN, generatorReply, GOOD_MANIFEST, GOOD_SOURCE } from './fixtures/synthesis/scripts.js';

const sc = SynthesisConfigSchema.parse({});

test("check 4's batches send requests in the order of the trainer's collect (trace_trainer/rollout.py), one at a time", async () => {
  const log: string[] = [];
  let inFlight = 0;
  const request = async <T>(entry: string, answer: T): Promise<T> => {
    log.push(entry);
    assert.equal(++inFlight, 1, `${entry} sent while another request was in flight`);
    await new Promise((r) => setImmediate(r));
    inFlight--;
    return answer;
  };
  let opened = 0;
  const env: Environment = {
    info: { name: 'recorder', kind: 'synthetic', description: '' },
    tools: () => [],
    systemPrompt: () => '',
    listTasks: async () => [],
    reset: async (req) => {
      const id = `${'seed' in req ? req.seed : '?'}.${opened++}`;
      const episode: Episode = {
        id,
        taskId: id,
        initialMessages: () => [{ role: 'user', content: 'hi' }],
        step: (action) =>
          request(`step ${id}${action.type === 'message' ? ` ${action.content}` : ''}`, {
            observation: { role: 'user', content: 'ok' },
            error: false,
            done: false,
          }),
        evaluate: (_m, termination) =>
          request(`evaluate ${id} ${termination}`, { reward: 0, components: {}, success: false }),
        fork: () => Promise.reject(new Error('not used')),
        close: () => request(`close ${id}`, undefined),
      };
      return request(`reset ${id}`, episode);
    },
  };
  // Copy c of a seed says c + 1 things, then stops; with 3 turns the third copy is cut off (max_steps).
  const speaks =
    (copy: number): Policy =>
    (_m, i) =>
      i <= copy ? { type: 'message', content: `t${i}` } : null;
  const plays = [7, 9].flatMap((seed) => [0, 1, 2].map((copy) => ({ seed, policy: scripted(speaks(copy)) })));
  const played = await playBatch(env, plays, { maxTurns: 3, maxErrors: 4 });
  const ids = ['7.0', '7.1', '7.2', '9.3', '9.4', '9.5'];
  const ends = ['agent_stop', 'agent_stop', 'max_steps'];
  assert.deepEqual(log, [
    ...ids.map((id) => `reset ${id}`),
    ...ids.map((id) => `step ${id} t0`),
    ...ids.filter((_, i) => i % 3 >= 1).map((id) => `step ${id} t1`),
    ...ids.filter((_, i) => i % 3 === 2).map((id) => `step ${id} t2`),
    ...ids.map((id, i) => `evaluate ${id} ${ends[i % 3]}`),
    ...ids.map((id) => `close ${id}`),
  ]);
  assert.deepEqual(
    played.map((p) => p.termination),
    [...ends, ...ends],
  );
});

test('check thresholds: determinism, solvability, non-triviality, calibration', () => {
  assert.equal(judgeDeterminism({ seeds: 100, mismatched: [], distinct: 95 }, sc).passed, true);
  assert.match(judgeDeterminism({ seeds: 100, mismatched: [], distinct: 94 }, sc).reason!, /only 94 of 100/);
  assert.match(judgeDeterminism({ seeds: 100, mismatched: [3], distinct: 100 }, sc).reason!, /seeds 3/);
  assert.equal(
    judgeSolvability(
      Array.from({ length: 50 }, (_, seed) => ({ seed, reward: 1 })),
      sc,
    ).passed,
    true,
  );
  const s = judgeSolvability(
    [...Array.from({ length: 49 }, (_, seed) => ({ seed, reward: 1 })), { seed: 49, reward: 0.3, note: 'x' }],
    sc,
  );
  assert.equal(s.passed, false);
  assert.deepEqual(s.examples, ['seed 49: reward 0.3 — x']);
  assert.equal(judgeNonTriviality({ stop: 0.2, random: 0 }, sc).passed, true);
  assert.match(judgeNonTriviality({ stop: 0.21 }, sc).reason!, /stop 0\.210/);
  const stats = calibrationStats([
    [
      { reward: 1, success: true },
      { reward: 0, success: false },
    ],
    [
      { reward: 0, success: false },
      { reward: 0, success: false },
    ],
  ]);
  assert.deepEqual(stats, { meanReward: 0.25, successRate: 0.25, informativeShare: 0.5 });
  assert.equal(judgeCalibration(stats, sc).passed, true);
  assert.match(
    judgeCalibration({ meanReward: 0.9, successRate: 0.9, informativeShare: 0.4 }, sc).reason!,
    /mean reward 0\.900 outside \[0\.2, 0\.6\].*40% of rollout groups/,
  );
});

function testConfig(baseURL: string, dir: string, synthesis: ConfigInput['synthesis'] = {}) {
  return parseConfig({
    env: { name: 'toy-orders' },
    store: { kind: 'local', dir },
    llm: { generator: { baseURL, model: 'scripted-model' }, policy: { baseURL, model: 'scripted-model' } },
    synthesis: { maxAttempts: 6, calibration: { groups: 4, rolloutsPerGroup: 4, concurrency: 1 }, ...synthesis },
  });
}

test('check 6 (calibration) against the scripted policy server: in band when half succeed, out of band when all do', async () => {
  const policy = alternatingPolicy();
  const llm = await startScriptedLlm((req) => policy(req));
  const dir = mkdtempSync(path.join(tmpdir(), 'synth-cal-'));
  try {
    const config = testConfig(llm.baseURL, dir);
    const good = await loadCandidate(GOOD_SOURCE, 'in-process');
    const r = await checkCalibration(good.env, config, createLlm(config, 'policy'));
    assert.equal(r.result.passed, true, r.result.reason);
    assert.deepEqual(r.result.metrics, { meanReward: 0.5, successRate: 0.5, informativeShare: 1 });
    assert.equal(r.rollouts.length, 16);
    const mis = await loadCandidate(BROKEN[4].source, 'in-process');
    const bad = await checkCalibration(mis.env, config, createLlm(config, 'policy'));
    assert.equal(bad.result.passed, false);
    assert.match(bad.result.reason!, /mean reward 1\.000 outside .*make the task harder/);
  } finally {
    await llm.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("check 6's base policy ends an episode where the trainer's room ends (max_seq_len 4096), its reply unsent (reruns 22, 23)", async () => {
  // A module that filled the trainer's room but not the LLM server's saw episodes end early in training alone.
  const llm = await startScriptedLlm((req) =>
    req.messages.length > 2
      ? { content: 'done' }
      : { toolCalls: [{ name: 'list_orders', arguments: '{"customer_id": "c1"}' }], promptTokens: 4092 },
  );
  const dir = mkdtempSync(path.join(tmpdir(), 'synth-cut-'));
  try {
    const config = testConfig(llm.baseURL, dir);
    const good = await loadCandidate(GOOD_SOURCE, 'in-process');
    const r = await checkCalibration(good.env, config, createLlm(config, 'policy'));
    assert.equal(r.rollouts.length, 16);
    for (const t of r.rollouts) {
      assert.equal(t.termination, 'max_steps');
      assert.ok(!t.messages.some((m) => m.role === 'assistant'), 'the reply past the room is not stepped');
    }
    // A prompt past the server's own context is refused before any reply (rerun 23): the same ending.
    const full = await startScriptedLlm(() => ({
      status: 400,
      body: JSON.stringify({
        error: {
          message: 'messages: prompt is 50311 tokens',
          type: 'invalid_request_error',
          code: 'context_length_exceeded',
        },
      }),
    }));
    try {
      const refusing = testConfig(full.baseURL, dir);
      const cut = await checkCalibration(good.env, refusing, createLlm(refusing, 'policy'));
      assert.deepEqual(new Set(cut.rollouts.map((t) => t.termination)), new Set(['max_steps']));
    } finally {
      await full.close();
    }
    // A reply the trainer's maxNewTokens stopped is no action either (rerun 23: a tell in training alone).
    const long = await startScriptedLlm(() => ({
      content: '{"type": "message", "content": "I will now',
      truncated: true,
    }));
    try {
      const capped = testConfig(long.baseURL, dir);
      const cut = await checkCalibration(good.env, capped, createLlm(capped, 'policy'));
      assert.deepEqual(new Set(cut.rollouts.map((t) => t.termination)), new Set(['max_steps']));
      assert.ok(!cut.rollouts.some((t) => t.messages.some((m) => m.role === 'assistant')));
      assert.equal(long.requests[0].max_tokens, capped.training.maxNewTokens);
    } finally {
      await long.close();
    }
  } finally {
    await llm.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('check 1 rejects foreign imports, type errors and manifest mismatches with reasons', async () => {
  const opts = { runner: 'in-process' as const, typecheck: true };
  const foreign = await checkCompile(`import { readFileSync } from 'node:fs';\n${GOOD_SOURCE}`, GOOD_MANIFEST, opts);
  assert.match(foreign.result.reason!, /imports 'node:fs'; a generated environment may import only from '#env-sdk'/);
  const typed = await checkCompile(GOOD_SOURCE.replace('return orders;', 'return orders.nope;'), GOOD_MANIFEST, opts);
  assert.match(
    typed.result.reason!,
    /does not type-check against the SDK: line \d+:\d+: Property 'nope' does not exist/,
  );
  // tsc quotes the module's names: one line, cut (rerun 60b: 50 KB reasons).
  const longName = `x${'a'.repeat(50_000)}`;
  const quoted = await checkCompile(GOOD_SOURCE.replace('return orders;', `return ${longName};`), GOOD_MANIFEST, opts);
  assert.match(quoted.result.reason!, /does not type-check against the SDK: .*Cannot find name/);
  assert.ok(quoted.result.reason!.length < 700, 'reason cut');
  assert.ok(quoted.result.examples.every((e) => e.length < 700));
  // A load error is cut on whole characters, one line (rerun 62b: half an emoji at 500 units).
  for (const pad of ['', 'A']) {
    const thrown = JSON.stringify(`${pad}${'😀'.repeat(400)}\n\u001b`);
    const loadError = await checkCompile(`throw new Error(${thrown});\n${GOOD_SOURCE}`, GOOD_MANIFEST, opts);
    const reason = loadError.result.reason!;
    assert.match(reason, /^the module failed to load: /);
    const halfPair = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
    assert.ok(!halfPair.test(reason) && !/[\n\u001b]/.test(reason) && reason.length < 700, reason.slice(-40));
  }
  const named = await checkCompile(
    GOOD_SOURCE,
    { ...GOOD_MANIFEST, tools: ['list_orders'] },
    { ...opts, typecheck: false },
  );
  assert.match(
    named.result.reason!,
    /tools \[find_customer_by_email, list_orders\] do not match manifest\.tools \[list_orders\]/,
  );
  // A tool schema whose $refs fan out past what the policy's grammar can take (8^12 nodes inlined).
  const defs = Object.fromEntries(
    [...Array(12)].map((_, i) => [`d${i}`, { anyOf: Array(8).fill({ $ref: `#/$defs/d${i + 1}` }) }]),
  );
  const bomb = JSON.stringify({
    type: 'object',
    properties: { customer_id: { $ref: '#/$defs/d0' } },
    $defs: { ...defs, d12: { type: 'string' } },
  });
  const laughs = await checkCompile(
    GOOD_SOURCE.replace(
      "properties: { customer_id: { type: 'string' } }, required: ['customer_id'], additionalProperties: false",
      `...${bomb}`,
    ),
    GOOD_MANIFEST,
    { ...opts, typecheck: false },
  );
  assert.match(laughs.result.reason!, /tool list_orders's parameters: expands to more than 20000 schema nodes/);
});

test("repair loop: a scripted generator broken in each check's way, then good, is accepted on attempt 6 (sandboxed)", async () => {
  const policy = alternatingPolicy();
  const replies = [...BROKEN.map((b) => generatorReply(b.source)), generatorReply(GOOD_SOURCE)];
  let generated = 0;
  const llm = await startScriptedLlm((req) => (req.response_format ? replies[generated++] : policy(req)));
  const dir = mkdtempSync(path.join(tmpdir(), 'synth-loop-'));
  try {
    const config = testConfig(llm.baseURL, dir);
    const capability = {
      name: 'structured_data_reasoning',
      description: 'Filters and aggregates records before answering or acting.',
    };
    const res = await synthesizeEnvironment({ config, runId: 'r1', capability });
    assert.equal(res.status, 'accepted', res.lastFailure);
    assert.equal(res.attempts, 6);
    assert.equal(res.verdictRefs.length, 6);
    const store = openStore(config.store);
    const verdicts = await Promise.all(
      res.verdictRefs.map((r) => store.getJson<{ passed: boolean; failedCheck?: string; reason?: string }>(r)),
    );
    assert.deepEqual(
      verdicts.map((v) => v.failedCheck ?? 'passed'),
      [...BROKEN.map((b) => b.check), 'passed'],
    );
    for (const v of verdicts.slice(0, 5)) assert.ok(v.reason && v.reason.length > 20, `a reason: ${v.reason}`);
    assert.equal(await store.getText(res.envRef!), GOOD_SOURCE);

    // Each repair request carries the previous check's failure back to the generator.
    const genRequests = llm.requests.filter((r) => r.response_format);
    assert.equal(genRequests.length, 6);
    assert.match(
      String(genRequests[0].messages[1].content),
      /Capability to isolate: structured_data_reasoning[\s\S]*find_customer_by_email[\s\S]*defineEnvironment/,
    );
    BROKEN.forEach((b, i) =>
      assert.match(
        String(genRequests[i + 1].messages.at(-1)!.content),
        new RegExp(`failed validation check '${b.check}'`),
      ),
    );
    assert.ok(
      (await store.list('runs/r1/synthesis/structured_data_reasoning/attempt-5/')).includes(
        'runs/r1/synthesis/structured_data_reasoning/attempt-5/rollouts.jsonl',
      ),
    );

    // Idempotent: a retried activity returns the stored result without calling the generator.
    const again = await synthesizeEnvironment({ config, runId: 'r1', capability });
    assert.deepEqual(again.envRef, res.envRef);
    assert.equal(llm.requests.filter((r) => r.response_format).length, 6);
    const v = await validateEnvironment({ config, runId: 'r1', capability, environment: res.envRef! });
    assert.equal(v.ok, true);
  } finally {
    await llm.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('no attempt passes: synthesis_failed with reasons, or a flagged reference fallback when allowed', async () => {
  const llm = await startScriptedLlm((req) =>
    req.response_format ? generatorReply(BROKEN[0].source) : { content: 'x' },
  );
  const dir = mkdtempSync(path.join(tmpdir(), 'synth-fail-'));
  try {
    const capability = { name: 'verify_preconditions', description: 'Checks conditions before acting.' };
    const failure = {
      id: 'toy-orders/t3/t0',
      env: 'toy-orders',
      taskId: 't3',
      trial: 0,
      model: 'm',
      reward: 0,
      success: false,
      termination: 'user_stop',
      steps: 2,
      durationMs: 5,
      usage: { promptTokens: 1, completionTokens: 1, calls: 1 },
      rewardInfo: { reward: 0, components: { DB: 0 }, success: false },
      messages: [
        { role: 'system', content: 'policy' },
        { role: 'user', content: 'Cancel order ord_77 please' },
        {
          role: 'assistant',
          content: null,
          tool_calls: [
            { id: 'c1', type: 'function', function: { name: 'cancel_order', arguments: '{"order_id":"ord_77"}' } },
          ],
        },
        { role: 'tool', tool_call_id: 'c1', content: 'cancelled' },
      ],
    };
    const examplesRef = await openStore({ kind: 'local', dir }).put('runs/r2/examples.json', JSON.stringify([failure]));
    const failed = await synthesizeEnvironment({
      config: testConfig(llm.baseURL, dir, { maxAttempts: 2 }),
      runId: 'r2',
      capability,
      examplesRef,
    });
    assert.match(
      String(llm.requests[0].messages[1].content),
      /LACKING\n## Failure 1\n[\s\S]*cancel_order[\s\S]*ord_77/,
    );
    assert.equal(failed.status, 'synthesis_failed');
    assert.equal(failed.attempts, 2);
    assert.equal(failed.envRef, undefined);
    assert.match(failed.lastFailure!, /^compile: the module syntax error: line \d+/);
    const v = await validateEnvironment({ config: testConfig(llm.baseURL, dir), runId: 'r2', capability });
    assert.deepEqual(
      [v.ok, v.reason?.startsWith('synthesis_failed after 2 attempt(s): compile: the module syntax error')],
      [false, true],
    );
    const fb = await synthesizeEnvironment({
      config: testConfig(llm.baseURL, dir, { maxAttempts: 1, allowReferenceFallback: true }),
      runId: 'r3',
      capability,
    });
    assert.equal(fb.status, 'reference_fallback');
    assert.equal(fb.reference, 'precondition_verification');
    assert.match(
      await openStore({ kind: 'local', dir }).getText(fb.envRef!),
      /capability: 'precondition_verification'/,
    );
  } finally {
    await llm.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
