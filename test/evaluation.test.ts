import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createEvaluationActivities } from '../activities/evaluation.js';
import { parseConfig } from '../core/config.js';
import { EvaluationSummarySchema, promptOnlySuffix } from '../core/evaluation.js';
import { openStore } from '../store/index.js';
import { startScriptedLlm } from './helpers/scripted-llm.js';
import { openingOf, pendingTotalTask, toyPolicy, toyTasks } from './helpers/toy-policy.js';

async function setup() {
  const dir = await mkdtemp(path.join(tmpdir(), 'trace-eval-'));
  return {
    dir,
    config: (baseURL: string, extra: Record<string, unknown> = {}) =>
      parseConfig({
        env: { name: 'toy-orders' },
        store: { kind: 'local', dir: path.join(dir, 'artifacts') },
        llm: { policy: { baseURL, model: 'scripted-model', concurrency: 2 } },
        ...extra,
      }),
  };
}

test('held-out tasks only: the test split, never a training task', async () => {
  const { dir, config } = await setup();
  const llm = await startScriptedLlm(toyPolicy);
  try {
    const acts = createEvaluationActivities();
    const c = config(llm.baseURL);
    const listed = await acts.listEvaluationTasks({ config: c });
    assert.equal(listed.split, 'test');
    assert.deepEqual(
      listed.tasks.map((t) => t.taskId),
      toyTasks
        .filter((t) => t.split === 'test')
        .map((t) => t.id)
        .sort(),
    );
    await assert.rejects(
      acts.evaluateVariant({
        config: c,
        runId: 'r',
        variant: { name: 'base', kind: 'base' },
        tasks: [{ taskId: 'order_total' }],
      }),
      (e: Error) => e.name === 'InvalidInput' && /order_total is not in the test split/.test(e.message),
    );
    assert.equal(llm.requests.length, 0, 'nothing ran on a training task');
    await assert.rejects(
      acts.listEvaluationTasks({ config: parseConfig({ ...c, env: { name: 'toy-orders', testSplit: 'train' } }) }),
      /equals env.trainSplit/,
    );
  } finally {
    await llm.close();
    await rm(dir, { recursive: true, force: true });
  }
});

test('base vs prompt-only on held-out tasks: greedy, honest pass rates with intervals', async () => {
  const { dir, config } = await setup();
  const llm = await startScriptedLlm(toyPolicy);
  try {
    const acts = createEvaluationActivities();
    const c = config(llm.baseURL);
    const { tasks: held } = await acts.listEvaluationTasks({ config: c });
    const base = await acts.evaluateVariant({
      config: c,
      runId: 'r1',
      variant: { name: 'base', kind: 'base' },
      tasks: held,
    });
    const suffix = promptOnlySuffix([
      { name: 'structured_data_reasoning', description: 'Sums values across records before answering.' },
    ]);
    const prompt = await acts.evaluateVariant({
      config: c,
      runId: 'r1',
      variant: { name: 'prompt_only', kind: 'prompt_only', systemPromptSuffix: suffix },
      tasks: held,
    });
    assert.deepEqual([base.passRate, base.n], [0, 2]);
    assert.deepEqual([prompt.passRate, prompt.n], [0.5, 2]);
    assert.ok(
      llm.requests.every((r) => r.temperature === 0),
      'greedy by default',
    );
    const store = await openStore(c.store);
    const summary = EvaluationSummarySchema.parse(await store.getJson(prompt.ref));
    assert.equal(summary.overall.passRate.method, 'wilson');
    assert.ok(summary.overall.passRate.low! > 0 && summary.overall.passRate.high! < 1);
    assert.deepEqual(
      summary.perTask.map((t) => [t.taskId, t.successes]),
      [
        ['cancel_pending_2', 0],
        ['pending_total', 1],
      ],
    );
  } finally {
    await llm.close();
    await rm(dir, { recursive: true, force: true });
  }
});

test('a crash mid-evaluation redoes nothing that finished', async () => {
  const { dir, config } = await setup();
  let failPendingTotal = true;
  // HTTP 400 is not retried by the client: the episode ends with an infrastructure error.
  const llm = await startScriptedLlm((req) =>
    failPendingTotal && openingOf(req) === pendingTotalTask.opening ? { status: 400 } : toyPolicy(req),
  );
  try {
    const acts = createEvaluationActivities();
    const c = config(llm.baseURL, { evaluation: { trials: 2, temperature: 1 } });
    const { tasks: held } = await acts.listEvaluationTasks({ config: c });
    const variant = { name: 'base', kind: 'base' as const };
    await assert.rejects(
      acts.evaluateVariant({ config: c, runId: 'r2', variant, tasks: held }),
      /2 evaluation episode\(s\) of base ended by infrastructure errors/,
    );
    const firstRun = llm.requests.length;
    const finishedCalls = llm.requests.filter((r) => openingOf(r) !== pendingTotalTask.opening).length;
    assert.ok(finishedCalls >= 2, 'both trials of the other task ran');
    failPendingTotal = false;
    const r = await acts.evaluateVariant({ config: c, runId: 'r2', variant, tasks: held });
    const retried = llm.requests.slice(firstRun);
    assert.ok(retried.length > 0);
    assert.ok(
      retried.every((q) => openingOf(q) === pendingTotalTask.opening),
      'only the unfinished task ran again',
    );
    assert.equal(r.n, 4);
    assert.ok(retried.every((q) => q.temperature === 1));
    const again = llm.requests.length;
    await acts.evaluateVariant({ config: c, runId: 'r2', variant, tasks: held });
    assert.equal(llm.requests.length, again, 'a finished variant makes no LLM call');
  } finally {
    await llm.close();
    await rm(dir, { recursive: true, force: true });
  }
});

test('a configured base variant replaces the default one, and the prompt-only baseline runs on its endpoint', async () => {
  const { dir, config } = await setup();
  const policyLlm = await startScriptedLlm(toyPolicy);
  const sameBackend = await startScriptedLlm(toyPolicy, 'served-base');
  try {
    const acts = createEvaluationActivities();
    const c = config(policyLlm.baseURL, {
      evaluation: {
        promptOnly: true,
        variants: [{ name: 'base_served', kind: 'base', baseURL: sameBackend.baseURL, model: 'served-base' }],
      },
    });
    const store = await openStore(c.store);
    const selected = [
      {
        name: 'structured_data_reasoning',
        description: 'Sums values across records before answering.',
        meanDelta: 0.5,
        meanCoverage: 0.5,
        passesSelected: 3,
        examples: [],
      },
    ];
    await store.put('runs/r3/capabilities/stage1.json', JSON.stringify(stage1Fixture(selected)));
    const r = await acts.evaluateRun({ runId: 'r3', config: c });
    assert.deepEqual(
      r.variants.map((v) => [v.name, v.kind, v.passRate]),
      [
        ['base_served', 'base', 0],
        ['prompt_only', 'prompt_only', 0.5],
      ],
    );
    assert.equal(policyLlm.requests.length, 0, 'nothing went to the default policy endpoint');
    assert.ok(sameBackend.requests.length > 0 && sameBackend.requests.every((q) => q.model === 'served-base'));
    // Nothing selected, a capability requested by config: the prompt-only baseline describes it.
    const requested = config(policyLlm.baseURL, {
      evaluation: { promptOnly: true },
      analysis: {
        requestedCapabilities: [
          {
            name: 'exact_id_copying',
            description: 'Copies the code the user gives verbatim. LACKING: an invented code. PRESENT: the exact code.',
          },
        ],
      },
    });
    await store.put('runs/r5/capabilities/stage1.json', JSON.stringify(stage1Fixture([])));
    const plan = await acts.planEvaluation({ runId: 'r5', config: requested, capabilities: [] });
    const prompt = plan.variants.find((v) => v.kind === 'prompt_only');
    assert.match(prompt?.systemPromptSuffix ?? '', /- exact id copying: Copies the code the user gives verbatim/);
    assert.ok(
      plan.notes.some((n) => /describes the capabilities requested by config: exact_id_copying/.test(n)),
      plan.notes.join(' | '),
    );
    await assert.rejects(
      acts.evaluateRun({
        runId: 'r4',
        config: config(policyLlm.baseURL, {
          evaluation: {
            variants: [
              { name: 'a', kind: 'base' },
              { name: 'b', kind: 'base' },
            ],
          },
        }),
      }),
      /more than one base variant/,
    );
  } finally {
    await policyLlm.close();
    await sameBackend.close();
    await rm(dir, { recursive: true, force: true });
  }
});

function stage1Fixture(selected: unknown[]) {
  return {
    runId: 'r3',
    env: 'toy-orders',
    thresholds: { delta: 0.2, coverage: 0.1, passes: 3, minPassesSelected: 2 },
    counts: { trajectories: 0, successes: 0, failures: 0, errored: 0, labelFailures: 0 },
    dictionary: { capabilities: [], basedOn: { successes: [], failures: [] }, model: 'm' },
    rolloutRefs: [],
    dictionaryRef: { uri: 'file:///x', sha256: '0'.repeat(64), bytes: 0 },
    passRefs: [],
    stats: [],
    selected,
    summary: '',
  };
}

test('evaluation.concurrency episodes of a variant are in flight at once, above the policy role concurrency', async () => {
  const { dir, config } = await setup();
  // The first requests are held until four are in flight (the served trainer batches what
  // arrives together); a client bounded by llm.policy.concurrency (2) would never get there.
  let inFlight = 0;
  let most = 0;
  const waiting: (() => void)[] = [];
  const llm = await startScriptedLlm(async (req, index) => {
    most = Math.max(most, ++inFlight);
    if (inFlight >= 4) waiting.splice(0).forEach((go) => go());
    else if (index < 4) await new Promise<void>((go) => (waiting.push(go), setTimeout(go, 30_000).unref()));
    inFlight--;
    return toyPolicy(req);
  });
  try {
    const acts = createEvaluationActivities();
    const c = config(llm.baseURL, { evaluation: { trials: 2, temperature: 1, concurrency: 4 } });
    const { tasks: held } = await acts.listEvaluationTasks({ config: c });
    const r = await acts.evaluateVariant({
      config: c,
      runId: 'rc',
      variant: { name: 'base', kind: 'base' },
      tasks: held,
    });
    assert.equal(r.n, 4);
    assert.equal(most, 4);
  } finally {
    await llm.close();
    await rm(dir, { recursive: true, force: true });
  }
});
