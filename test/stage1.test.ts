import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createStage1Activities, loadTrajectories, RolloutInfrastructureError } from '../activities/stage1.js';
import { PassLabelsSchema, Stage1ResultSchema } from '../core/capability.js';
import { startScriptedLlm, type ChatRequest, type ScriptedReply } from './helpers/scripted-llm.js';
import { openStore } from '../store/index.js';
import { openEnvironment } from '../envs/registry.js';
import { createLlm } from '../llm/client.js';
import { tempDir, testConfig } from './helpers/stage1-fixtures.js';

/**
 * Stage 1 end to end through the activity functions, with a scripted OpenAI-compatible server on
 * loopback playing both the policy (on toy-orders) and the analyst, including invalid outputs,
 * transport failures and resumption.
 */

const VERIFY = 'verify_preconditions';
const COMMUNICATE = 'communicate_results';
const DESC = {
  [VERIFY]:
    'Checks the state and rules that an action depends on before acting. LACKING when the agent acts or answers without checking what it needed.',
  [COMMUNICATE]:
    'States the concrete outcome or value the user asked for. LACKING when the user is left without the requested value or result.',
};

/** Policy behaviour per task (by the opening request): two successes, four failures. */
function policy(req: ChatRequest): ScriptedReply {
  const opening = req.messages[1].content ?? '';
  const turn = req.messages.filter((m) => m.role === 'assistant').length;
  if (opening.includes('O-1007')) return { content: 'Your order O-1007 is delivered.' };
  if (opening.includes('delivered so far')) return { content: 'You have 3 delivered orders.' };
  if (opening.includes('O-1003') && turn === 0)
    return { toolCalls: [{ name: 'cancel_order', arguments: '{"order_id":"O-1003","reason":"no_longer_needed"}' }] };
  return { content: 'Done.' };
}

const labels = (l: Record<string, string>) => ({ content: JSON.stringify({ labels: l }) });
const FAILED = new Set(['order_total', 'cancel_pending', 'cancel_shipped', 'change_address']);

function labeler(req: ChatRequest, attempt: number, pass: number): ScriptedReply {
  // Find the task from the first user message (re-asks append messages after it).
  const task = /trajectory toy-orders\/(\w+)\/t0/.exec(req.messages[1].content ?? '')?.[1] ?? '';
  const good = labels({
    [VERIFY]: FAILED.has(task) && !(pass === 2 && task === 'cancel_shipped') ? 'LACKING' : 'PRESENT',
    [COMMUNICATE]: FAILED.has(task) ? (task === 'order_total' ? 'LACKING' : 'PRESENT') : 'NA',
  });
  if (pass === 0 && task === 'order_total') return { content: 'I think it is fine.' }; // never valid
  if (pass === 0 && task === 'cancel_pending') {
    if (attempt === 0) return { content: '{"labels": {' };
    if (attempt === 1) return labels({ [VERIFY]: 'LACKING', [COMMUNICATE]: 'PRESENT', be_nice: 'PRESENT' });
  }
  if (pass === 0 && task === 'change_address' && attempt === 0) return labels({ [VERIFY]: 'LACKING' });
  return good;
}

test('stage 1 activities: rollouts, discovery and labeling with repair, K-of-R selection, idempotent resume', async () => {
  const tmp = await tempDir('trace-stage1-');
  let failTransport = (_task: string, _pass: number) => false;
  const server = await startScriptedLlm((req) => {
    const fmt = req.response_format?.json_schema?.name;
    if (!fmt) return policy(req);
    if (fmt === 'capability_dictionary') {
      const attempt = req.messages.filter((m) => m.role === 'assistant').length;
      if (attempt === 0)
        return { content: JSON.stringify({ capabilities: [{ name: 'Verify-Things!', description: 'Too short.' }] }) };
      if (attempt === 1)
        return {
          content: JSON.stringify({ capabilities: [{ name: 'cancel_order_rules', description: DESC[VERIFY] }] }),
        };
      return {
        content: JSON.stringify({
          capabilities: [
            { name: VERIFY, description: DESC[VERIFY] },
            { name: COMMUNICATE, description: DESC[COMMUNICATE] },
            { name: VERIFY, description: DESC[VERIFY] },
          ],
        }),
      };
    }
    const pass = Number(req.seed);
    const task = /trajectory toy-orders\/(\w+)\/t0/.exec(req.messages[1].content ?? '')?.[1] ?? '';
    if (failTransport(task, pass)) return { status: 503, headers: { 'x-should-retry': 'false' } };
    return labeler(req, req.messages.filter((m) => m.role === 'assistant').length, pass);
  });
  try {
    const config = testConfig(server.baseURL, tmp.dir, {
      env: { name: 'toy-orders', maxTasks: 6 },
      analysis: { passes: 3, minPassesSelected: 2, maxRepairAttempts: 2, examplesPerCapability: 3 },
    });
    const store = openStore(config.store);
    const acts = createStage1Activities();
    const runId = 'r1';

    const tasks = await acts.listRolloutTasks({ config });
    assert.equal(tasks.length, 6);
    assert.ok(tasks.every((t) => t.trial === 0 && t.taskId));
    const b0 = await acts.collectRolloutBatch({ config, runId, batchIndex: 0, tasks: tasks.slice(0, 3) });
    const b1 = await acts.collectRolloutBatch({ config, runId, batchIndex: 1, tasks: tasks.slice(3) });
    assert.equal(b0.count + b1.count, 6);
    assert.equal(b0.successes + b1.successes, 2);
    assert.ok(b0.usage.calls >= 3);
    const before = server.requests.length;
    const again = await acts.collectRolloutBatch({ config, runId, batchIndex: 0, tasks: tasks.slice(0, 3) });
    assert.deepEqual(again.ref, b0.ref);
    assert.equal(server.requests.length, before, 'a finished batch is not redone');
    const rolloutRefs = [b0.ref, b1.ref];
    const trajs = await loadTrajectories(store, rolloutRefs);
    assert.deepEqual(
      trajs
        .filter((t) => t.success)
        .map((t) => t.taskId)
        .sort(),
      ['count_delivered', 'order_status'],
    );

    const disc = await acts.discoverCapabilities({ config, runId, rolloutRefs });
    assert.equal(disc.capabilities, 2, 'the repaired dictionary, deduplicated');
    const discReqs = server.requests.filter((r) => r.response_format?.json_schema?.name === 'capability_dictionary');
    assert.equal(discReqs.length, 3);
    assert.match(discReqs[1].messages.at(-1)!.content!, /capabilities\.0\.description: must be 2–3 sentences/);
    assert.match(discReqs[2].messages.at(-1)!.content!, /names the tool 'cancel_order'/);
    assert.match(discReqs[0].messages[1].content!, /outcome: FAILURE/);
    assert.match(discReqs[0].messages[1].content!, /outcome: SUCCESS/);

    // Pass 0: repairs (bad JSON, unknown name, missing label) and one item that stays garbage.
    const p0 = await acts.labelPass({ config, runId, pass: 0, rolloutRefs, dictionaryRef: disc.ref });
    assert.deepEqual({ labeled: p0.labeled, failedItems: p0.failedItems }, { labeled: 5, failedItems: 1 });
    const pass0 = PassLabelsSchema.parse(await store.getJson(p0.ref));
    assert.equal(pass0.failedItems[0].trajectoryId, 'toy-orders/order_total/t0');
    assert.match(pass0.failedItems[0].error, /invalid LLM output after 3 attempt/);
    const cp = pass0.items.find((i) => i.trajectoryId === 'toy-orders/cancel_pending/t0')!;
    assert.deepEqual(cp.labels, { [VERIFY]: 'LACKING', [COMMUNICATE]: 'PRESENT' });
    const labelReqs = (task: string, pass: number) =>
      server.requests.filter(
        (r) =>
          r.response_format?.json_schema?.name === 'capability_labels' &&
          Number(r.seed) === pass &&
          r.messages[1].content?.includes(`toy-orders/${task}/t0`),
      );
    assert.equal(labelReqs('cancel_pending', 0).length, 3);
    assert.match(labelReqs('cancel_pending', 0)[2].messages.at(-1)!.content!, /be_nice/);
    assert.equal(labelReqs('change_address', 0).length, 2);
    assert.match(labelReqs('change_address', 0)[1].messages.at(-1)!.content!, /communicate_results/);
    assert.match(labelReqs('order_status', 0)[0].messages[0].content!, /When unsure, answer PRESENT/);

    // Pass 1: a transport failure on one item fails the attempt; the retry redoes only that item.
    failTransport = (task, pass) => pass === 1 && task === 'cancel_shipped';
    await assert.rejects(acts.labelPass({ config, runId, pass: 1, rolloutRefs, dictionaryRef: disc.ref }), /503/);
    failTransport = () => false;
    const p1 = await acts.labelPass({ config, runId, pass: 1, rolloutRefs, dictionaryRef: disc.ref });
    assert.equal(p1.labeled, 6);
    for (const t of ['order_total', 'order_status', 'count_delivered', 'cancel_pending', 'change_address']) {
      assert.equal(labelReqs(t, 1).length, 1, `${t} labeled once in pass 1`);
    }
    assert.equal(labelReqs('cancel_shipped', 1).length, 2);
    const p2 = await acts.labelPass({ config, runId, pass: 2, rolloutRefs, dictionaryRef: disc.ref });
    const n = server.requests.length;
    assert.deepEqual(await acts.labelPass({ config, runId, pass: 2, rolloutRefs, dictionaryRef: disc.ref }), p2);
    assert.equal(server.requests.length, n, 'a finished pass is not redone');

    const sel = await acts.selectCapabilities({
      config,
      runId,
      rolloutRefs,
      dictionaryRef: disc.ref,
      passRefs: [p0.ref, p1.ref, p2.ref],
    });
    assert.deepEqual(
      sel.selected.map((s) => s.name),
      [VERIFY],
    );
    // Pass 0: ER⁻ 3/3, pass 1: 4/4, pass 2: 3/4; ER⁺ 0 throughout; Cov = LACKING failures / labeled failures.
    assert.ok(Math.abs(sel.selected[0].meanDelta - (1 + 1 + 0.75) / 3) < 1e-12);
    assert.ok(Math.abs(sel.selected[0].meanCoverage - (1 + 1 + 0.75) / 3) < 1e-12);
    assert.equal(sel.selected[0].passesSelected, 3);
    const result = Stage1ResultSchema.parse(await store.getJson(sel.ref));
    assert.deepEqual(result.selected[0].examples, [
      { trajectoryId: 'toy-orders/cancel_pending/t0', lackingPasses: 3 },
      { trajectoryId: 'toy-orders/change_address/t0', lackingPasses: 3 },
      { trajectoryId: 'toy-orders/cancel_shipped/t0', lackingPasses: 2 },
    ]);
    const comm = result.stats.find((s) => s.name === COMMUNICATE)!;
    assert.equal(comm.meanDelta, null);
    assert.equal(comm.selected, false);
    assert.match(comm.notes.join(), /all NA on successes in 3 of 3 passes/);
    assert.deepEqual(result.counts, { trajectories: 6, successes: 2, failures: 4, errored: 0, labelFailures: 1 });
    assert.match(sel.summary, /Selected 1/);
    assert.match(sel.summary, /✔ verify_preconditions: Δ 0\.92/);
  } finally {
    await server.close();
    await tmp.cleanup();
  }
});

test('a rollout batch whose policy LLM fails is retried and resumes without redoing finished episodes', async () => {
  const tmp = await tempDir('trace-stage1-');
  let down = true;
  const server = await startScriptedLlm((req) => {
    if (down && req.messages[1].content?.includes('O-1001'))
      return { status: 500, headers: { 'x-should-retry': 'false' } };
    return { content: 'Goodbye.' };
  });
  try {
    const config = testConfig(server.baseURL, tmp.dir);
    const store = openStore(config.store);
    const acts = createStage1Activities();
    const tasks = [
      { taskId: 'order_status', trial: 0 },
      { taskId: 'order_total', trial: 0 },
      { taskId: 'order_status', trial: 1 },
    ];
    await assert.rejects(
      acts.collectRolloutBatch({ config, runId: 'r2', batchIndex: 0, tasks }),
      RolloutInfrastructureError,
    );
    assert.equal(await store.stat('runs/r2/rollouts/batch-0000.jsonl'), undefined);
    const firstTry = server.requests.length;
    down = false;
    const r = await acts.collectRolloutBatch({ config, runId: 'r2', batchIndex: 0, tasks });
    assert.equal(r.count, 3);
    assert.equal(server.requests.length - firstTry, 1, 'only the failed episode is redone');
    // Accepting errored episodes records them instead (as a late attempt would).
    down = true;
    const late = await acts.collectRolloutBatch({
      config,
      runId: 'r2',
      batchIndex: 1,
      tasks: [tasks[1]],
      acceptErroredEpisodes: true,
    });
    const [t] = await loadTrajectories(store, [late.ref]);
    assert.equal(t.termination, 'error');
  } finally {
    await server.close();
    await tmp.cleanup();
  }
});

test('discovery keeps output that breaks only the sentence rule (with a warning) and fails on anything else', async () => {
  const tmp = await tempDir('trace-stage1-');
  let reply = JSON.stringify({
    capabilities: [{ name: 'Check Order State', description: 'Looks at the order status before changing it' }],
  });
  const server = await startScriptedLlm(() => ({ content: reply }));
  try {
    const config = testConfig(server.baseURL, tmp.dir);
    const store = openStore(config.store);
    const traj = (id: string, success: boolean) => ({
      id,
      env: 'toy-orders',
      taskId: id,
      trial: 0,
      model: 'm',
      reward: success ? 1 : 0,
      success,
      termination: 'user_stop',
      steps: 1,
      durationMs: 1,
      messages: [
        { role: 'system', content: 'policy' },
        { role: 'user', content: 'hi' },
        { role: 'assistant', content: 'bye' },
      ],
      rewardInfo: { reward: success ? 1 : 0, components: {}, success },
      usage: { promptTokens: 0, completionTokens: 0, calls: 0 },
    });
    const rollouts = await store.put(
      'runs/w/rollouts/batch-0000.jsonl',
      [traj('a', true), traj('b', false)].map((t) => JSON.stringify(t)).join('\n') + '\n',
    );
    const acts = createStage1Activities();
    const d = await acts.discoverCapabilities({ config, runId: 'w', rolloutRefs: [rollouts] });
    assert.equal(d.capabilities, 1);
    assert.equal(server.requests.length, 3, 'the repairs were tried first');
    const dict = await store.getJson<{ capabilities: { name: string }[]; warnings: string[] }>(d.ref);
    assert.equal(dict.capabilities[0].name, 'check_order_state');
    assert.deepEqual(dict.warnings, [
      "kept the analyst's dictionary although capabilities.0.description: must be 2–3 sentences, got 1",
    ]);

    reply = JSON.stringify({
      capabilities: [{ name: '???', description: 'Looks at the order status before changing it.' }],
    });
    await assert.rejects(
      acts.discoverCapabilities({ config, runId: 'w2', rolloutRefs: [rollouts] }),
      /must be snake_case/,
    );
  } finally {
    await server.close();
    await tmp.cleanup();
  }
});

test('stage 1 activities use the LLM clients their factory is given (deps.createLlm), never their own', async () => {
  const tmp = await tempDir('trace-stage1-');
  const server = await startScriptedLlm((req) =>
    req.response_format?.json_schema?.name === 'capability_dictionary'
      ? { content: JSON.stringify({ capabilities: [{ name: VERIFY, description: DESC[VERIFY] }] }) }
      : { content: 'Goodbye.' },
  );
  try {
    // The config's endpoints refuse connections: only the injected clients reach the scripted server.
    const config = testConfig('http://127.0.0.1:9/v1', tmp.dir, {
      llm: {
        policy: { baseURL: 'http://127.0.0.1:9/v1', model: 'm', timeoutMs: 500 },
        analyst: { baseURL: 'http://127.0.0.1:9/v1', model: 'm', timeoutMs: 500 },
      },
    });
    const roles: string[] = [];
    const acts = createStage1Activities({
      openStore,
      openEnvironment,
      createLlm: (c, role) => {
        roles.push(role);
        return createLlm(
          { ...c, llm: { ...c.llm, [role]: { ...c.llm[role], baseURL: server.baseURL, model: 'scripted-model' } } },
          role,
          { maxRetries: 0 },
        );
      },
    });
    const batch = await acts.collectRolloutBatch({
      config,
      runId: 'inj',
      batchIndex: 0,
      tasks: [{ taskId: 'order_status', trial: 0 }],
    });
    const d = await acts.discoverCapabilities({ config, runId: 'inj', rolloutRefs: [batch.ref] });
    assert.equal(d.capabilities, 1);
    assert.ok(roles.includes('policy') && roles.includes('analyst'), roles.join(', '));
    assert.ok(server.requests.length >= 2, 'the rollout and the discovery went through the injected clients');
  } finally {
    await server.close();
    await tmp.cleanup();
  }
});
