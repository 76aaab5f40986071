import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createEvaluationActivities } from '../activities/evaluation.js';
import { createReportActivities } from '../activities/report.js';
import { runKeys } from '../store/keys.js';
import type { PassLabels, Stage1Result } from '../core/capability.js';
import { capabilityStats } from '../core/capability-stats.js';
import { parseConfig, type Config } from '../core/config.js';
import { ReportSchema } from '../core/report.js';
import type { Trajectory } from '../core/trajectory.js';
import type { ArtifactStore } from '../store/artifact-store.js';
import { openStore } from '../store/index.js';
import { startScriptedLlm } from './helpers/scripted-llm.js';
import { toyPolicy } from './helpers/toy-policy.js';

const traj = (id: string, success: boolean): Trajectory => ({
  id,
  env: 'toy-orders',
  taskId: id,
  trial: 0,
  model: 'm',
  messages: [],
  reward: success ? 1 : 0,
  rewardInfo: { reward: success ? 1 : 0, components: {}, success },
  success,
  termination: 'user_stop',
  usage: { calls: 3, promptTokens: 300, completionTokens: 30 },
  steps: 2,
  durationMs: 5,
});

/** Stage-1 artifacts as the stage-1 activities store them, with statistics from the real code. */
async function seedStage1(store: ArtifactStore, runId: string, config: Config) {
  const ts = [traj('a', true), traj('b', true), traj('c', false), traj('d', false)];
  const rollouts = await store.put(
    `runs/${runId}/rollouts/batch-0000.jsonl`,
    ts.map((t) => JSON.stringify(t)).join('\n') + '\n',
  );
  const capabilities = [
    {
      name: 'structured_data_reasoning',
      description: 'Sums and compares values across several records before answering the user.',
    },
    { name: 'verify_identity', description: 'Confirms who the user is before reading or changing their records.' },
  ];
  const passes: PassLabels[] = [0, 1].map((pass) => ({
    pass,
    items: ts.map((t) => ({
      trajectoryId: t.id,
      labels: { structured_data_reasoning: t.success ? 'PRESENT' : 'LACKING', verify_identity: 'PRESENT' },
    })),
    failedItems: [],
    usage: { calls: 4, promptTokens: 1000, completionTokens: 100 },
  }));
  const passRefs = await Promise.all(
    passes.map((p) => store.put(`runs/${runId}/capabilities/labels/pass-0${p.pass}.json`, JSON.stringify(p))),
  );
  const dictionary = { capabilities, basedOn: { successes: ['a'], failures: ['c'] }, model: 'analyst' };
  const dictionaryRef = await store.put(`runs/${runId}/capabilities/dictionary.json`, JSON.stringify(dictionary));
  const thresholds = { delta: config.analysis.delta, coverage: config.analysis.coverage, minPassesSelected: 2 };
  const stats = capabilityStats(
    capabilities,
    ts.map((t) => ({ trajectoryId: t.id, success: t.success })),
    passes,
    thresholds,
  );
  const selected = stats
    .filter((s) => s.selected)
    .map((s) => ({
      name: s.name,
      description: capabilities.find((c) => c.name === s.name)!.description,
      meanDelta: s.meanDelta!,
      meanCoverage: s.meanCoverage!,
      passesSelected: s.passesSelected,
      examples: [],
    }));
  const result: Stage1Result = {
    runId,
    env: 'toy-orders',
    thresholds: { ...thresholds, passes: 2 },
    counts: { trajectories: 4, successes: 2, failures: 2, errored: 0, labelFailures: 0 },
    dictionary,
    rolloutRefs: [rollouts],
    dictionaryRef,
    passRefs,
    stats,
    selected,
    summary: 'stage 1',
  };
  const selection = await store.put(`runs/${runId}/capabilities/stage1.json`, JSON.stringify(result));
  return { rollouts, passRefs, selection, selected: selected.map((s) => s.name) };
}

test('buildReport gathers stage 1, children, gate and evaluation into JSON + HTML + a terminal summary', async () => {
  const dir = await mkdtemp(path.join(tmpdir(), 'trace-report-act-'));
  const llm = await startScriptedLlm(toyPolicy);
  try {
    const config = parseConfig({
      name: 'report-test',
      env: { name: 'toy-orders' },
      store: { kind: 'local', dir: path.join(dir, 'artifacts') },
      llm: { policy: { baseURL: llm.baseURL, model: 'scripted-model' } },
      evaluation: { promptOnly: true },
    });
    const store = await openStore(config.store);
    const runId = 'run-report-1';
    const s1 = await seedStage1(store, runId, config);
    assert.deepEqual(s1.selected, ['structured_data_reasoning']);
    const evaluation = await createEvaluationActivities().evaluateRun({ runId, config });
    assert.deepEqual(
      evaluation.variants.map((v) => [v.name, v.passRate]),
      [
        ['base', 0],
        ['prompt_only', 0.5],
      ],
    );

    const adapter = await store.put(
      `runs/${runId}/adapters/structured_data_reasoning/final/adapter_model.safetensors`,
      'weights',
    );
    const result = {
      runId,
      status: 'completed',
      summary: 'stage 1: 1 capability selected; 1 adapter(s) trained',
      env: 'toy-orders',
      rollouts: { refs: [s1.rollouts], trajectories: 4, successes: 2 },
      analysis: { selection: s1.selection, labels: s1.passRefs, selected: s1.selected },
      capabilities: [
        {
          name: 'structured_data_reasoning',
          status: 'trained',
          detail: 'trained 3 iterations',
          environment: adapter,
          validation: { attempts: 2 },
          adapter,
          training: {
            history: [
              { iteration: 1, mean_reward: 0.2, informative_share: 0.5 },
              { iteration: 2, meanReward: 0.35 },
              { iteration: 3, mean_reward: 0.5 },
            ],
            device: 'cpu',
            durationSeconds: 42,
          },
        },
        // As activities/training.ts trainAdapter returns it: mean reward per iteration as numbers.
        {
          name: 'verify_identity',
          status: 'trained',
          detail: 'adapter trained',
          adapter,
          training: { curve: [0.1, 0.3], informativeShare: [1, 0.5] },
        },
      ],
      gate: {
        routing: { structured_data_reasoning: 1 },
        examples: { policy: 3, gold: 8 },
        device: 'cpu',
        durationSeconds: 8,
        peakRssMb: 1536,
      },
      evaluation,
      notConfigured: [],
    };
    const acts = createReportActivities({ openStore, now: () => new Date('2026-11-29T21:00:00Z') });
    const out = await acts.buildReport({ config, runId, result });
    const report = ReportSchema.parse(await store.getJson(out.jsonRef));
    assert.equal(out.jsonRef.uri, store.uri(runKeys.reportJson(runId)));
    const prompt = report.variants.find((v) => v.name === 'prompt_only')!;
    assert.equal(prompt.passRate.estimate, 0.5);
    assert.equal(prompt.deltaVsBase!.estimate, 0.5);
    assert.equal(report.evaluation!.split, 'test');
    const cap = report.capabilities.find((c) => c.name === 'structured_data_reasoning')!;
    assert.equal(cap.selected, true);
    assert.equal(cap.meanDelta, 1);
    assert.deepEqual(
      [cap.synthesis.status, cap.synthesis.attempts, cap.training.status, cap.training.curve.length, cap.routingShare],
      ['ok', 2, 'ok', 3, 1],
    );
    assert.deepEqual(cap.training.curve[0], { iteration: 1, meanReward: 0.2, informativeShare: 0.5 });
    assert.deepEqual(report.capabilities.find((c) => c.name === 'verify_identity')!.training.curve, [
      { iteration: 1, meanReward: 0.1, informativeShare: 1 },
      { iteration: 2, meanReward: 0.3, informativeShare: 0.5 },
    ]);
    const roles = Object.fromEntries(report.cost.llm.map((u) => [u.role, u.calls]));
    assert.deepEqual(roles, {
      'policy (rollouts)': 12,
      'analyst (labeling)': 8,
      'policy (evaluation)': prompt.usage.calls + report.variants[0].usage.calls,
    });
    assert.equal(report.cost.cpuSeconds, 42 + 8, 'adapter training and gate fitting');
    assert.ok(
      report.notes.some((n) => /gate was fitted on 3 successful policy trajectories and 8 gold demonstrations/.test(n)),
      report.notes.join(' | '),
    );
    assert.equal(report.cost.evaluationEpisodes, 4);
    assert.match(report.links.run!, /workflows\/run-report-1$/);
    assert.match(report.links.children[0].url, /run-report-1%2Fcapability%2Fstructured_data_reasoning$/);
    assert.match(out.summary, /prompt_only\s+prompt_only\s+2\s+50\.0% \[\d+\.\d, \d+\.\d\]\s+\+50\.0 pp/);
    const html = await store.getText(out.htmlRef);
    assert.match(html, /data-chart="reward-curves"/);
    assert.equal(report.gate!.peakRssMb, 1536);
    assert.match(html, /Peak memory of the gate fit: 1\.50 GiB/);
    // Rebuilding from the same artifacts gives byte-identical output (seeded bootstrap, pinned clock).
    const again = await acts.buildReport({ config, runId, result });
    assert.equal(again.htmlRef.sha256, out.htmlRef.sha256);
    assert.equal(createHash('sha256').update(html).digest('hex'), out.htmlRef.sha256);
  } finally {
    await llm.close();
    await rm(dir, { recursive: true, force: true });
  }
});

test('a stage-1-only run reports honestly what did not run', async () => {
  const dir = await mkdtemp(path.join(tmpdir(), 'trace-report-act-'));
  try {
    const config = parseConfig({
      env: { name: 'toy-orders' },
      store: { kind: 'local', dir: path.join(dir, 'artifacts') },
    });
    const acts = createReportActivities({ openStore, now: () => new Date(0) });
    const out = await acts.buildReport({
      config,
      runId: 'r0',
      result: {
        runId: 'r0',
        summary: 'stage 1: 0 capabilities selected; stages 2–4 not configured',
        capabilities: [],
        notConfigured: ['synthesis', 'training', 'gate', 'evaluation'],
      },
    });
    assert.match(out.summary, /no evaluation in this run/);
    assert.match(out.summary, /stages 2–4 not configured/);
    assert.match(out.summary, /not configured in this deployment: synthesis, training, gate, evaluation/);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
