import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Stage1ResultSchema } from '../core/capability.js';
import { openStore } from '../store/index.js';
import { TASK_QUEUE_CPU, type PipelineInput, type PipelineProgress, type PipelineResult } from '../workflows/types.js';
import type { ChatRequest } from './helpers/scripted-llm.js';
import { FAST_TIMEOUTS, VERIFY, pipelineConfig, pipelineReply, startHarness } from './helpers/temporal.js';

/**
 * tracePipeline end to end on a real Temporal dev server with an in-process worker and the real
 * stage-1 activities; the scripted LLM plays policy and analyst over HTTP.
 */
test('tracePipeline: stage 1 + base evaluation, progress query, search attributes, memo, report; stages 2–4 honestly not configured; a requested capability runs but is never counted as selected', async (t) => {
  const { dir, llm, client } = await startHarness(t, pipelineReply, { prefix: 'trace-wf-' });

  // One requested capability stage 1 also selects (trained once) and one it does not.
  const requested = {
    name: 'tool_calling_precision',
    description: 'Calls the right tool with exactly the arguments the task needs.',
  };
  // Stages 2–4 switched off by config (pipelineConfig's default): each child says so.
  const config = pipelineConfig(llm.baseURL, `${dir}/artifacts`, {
    analysis: {
      passes: 3,
      minPassesSelected: 2,
      requestedCapabilities: [{ name: VERIFY, description: requested.description }, requested],
    },
  });
  const input: PipelineInput = { runId: 'wf-run-1', config, timeouts: FAST_TIMEOUTS };
  const handle = await client.workflow.start('tracePipeline', {
    taskQueue: TASK_QUEUE_CPU,
    workflowId: 'wf-run-1',
    args: [input],
  });
  const result = (await handle.result()) as PipelineResult;

  // 6 train tasks × 2 trials; 2 of the 6 tasks succeed under the scripted policy.
  assert.equal(result.rollouts.trajectories, 12);
  assert.equal(result.rollouts.successes, 4);
  assert.equal(result.rollouts.refs.length, 4, 'batches of 3');
  assert.deepEqual(result.analysis.selected, [VERIFY]);
  assert.equal(result.analysis.labels.length, 3);
  assert.equal(result.analysis.failedLabels, 0);
  assert.equal(result.status, 'completed');

  // One child per selected capability, then one per requested capability stage 1 did not select,
  // each ending honestly: its stages are switched off.
  assert.deepEqual(
    result.capabilities.map((c) => [c.name, c.status, c.requestedByConfig ?? false]),
    [
      [VERIFY, 'not_configured', false],
      [requested.name, 'not_configured', true],
    ],
  );
  assert.match(result.capabilities[0].detail, /stages 2–4 not configured/);
  assert.deepEqual(result.notConfigured, ['synthesis', 'training', 'gate']);
  assert.match(
    result.summary,
    /stage 1: 1 capability selected; requested by config: tool_calling_precision; stages 2–4 not configured/,
  );
  for (const name of [VERIFY, requested.name]) {
    const child = await client.workflow.getHandle(`wf-run-1/capability/${name}`).describe();
    assert.equal(child.status.name, 'COMPLETED');
  }

  // The base agent was evaluated on the held-out split.
  const evaluation = result.evaluation as {
    split: string;
    tasks: number;
    variants: { kind: string; passRate: number | null }[];
  };
  assert.equal(evaluation.split, 'test');
  assert.equal(evaluation.variants[0].kind, 'base');

  // Artifacts: the stage-1 result parses and names the same selection; the report is readable.
  const store = openStore(config.store);
  const stage1 = Stage1ResultSchema.parse(await store.getJson(result.analysis.selection!));
  assert.deepEqual(
    stage1.selected.map((s) => s.name),
    [VERIFY],
  );
  assert.equal(stage1.counts.trajectories, 12);
  const report = await store.getJson<{
    runId: string;
    capabilities: { name: string; selected: boolean; description: string }[];
  }>(result.report);
  assert.equal(report.runId, 'wf-run-1');
  const row = report.capabilities.find((c) => c.name === requested.name);
  assert.equal(row?.selected, false);
  assert.match(row?.description ?? '', /^\[requested by config, not selected by stage 1\]/);

  // Query, search attributes and memo as the UI and `trace status` see them.
  const progress = await handle.query<PipelineProgress>('progress');
  assert.equal(progress.stage, 'done');
  assert.deepEqual(
    {
      done: progress.rollouts.batchesDone,
      total: progress.rollouts.batchesTotal,
      passes: progress.labeling.passesDone,
    },
    { done: 4, total: 4, passes: 3 },
  );
  assert.deepEqual(
    progress.capabilities.map((c) => [c.name, c.status, c.requestedByConfig ?? false]),
    [
      [VERIFY, 'not_configured', false],
      [requested.name, 'not_configured', true],
    ],
  );
  const d = await handle.describe();
  const sa = d.searchAttributes as Record<string, unknown[]>;
  assert.deepEqual(sa.TraceStage, ['done']);
  assert.deepEqual(sa.TraceEnv, ['toy-orders']);
  assert.deepEqual(sa.TraceCapabilities, [VERIFY]);
  assert.ok(Math.abs((sa.TracePassRate[0] as number) - 4 / 12) < 1e-9);
  assert.equal(typeof sa.TraceBasePassRate?.[0], 'number');
  const memo = d.memo as { config: { env: string; passes: number } };
  assert.deepEqual({ env: memo.config.env, passes: memo.config.passes }, { env: 'toy-orders', passes: 3 });

  // A visibility query filters on the custom attributes (what `trace list -q` uses).
  const found: string[] = [];
  for (let i = 0; i < 20 && found.length === 0; i++) {
    for await (const w of client.workflow.list({ query: `TraceCapabilities = '${VERIFY}' AND TraceStage = 'done'` }))
      found.push(w.workflowId);
    if (found.length === 0) await new Promise((r) => setTimeout(r, 250));
  }
  assert.deepEqual(found, ['wf-run-1']);
});

test('tracePipeline: an analyst that never produces a valid dictionary ends stage 1, not the run; evaluation and report still happen', async (t) => {
  const badDictionary = (req: ChatRequest) =>
    req.response_format?.json_schema?.name === 'capability_dictionary'
      ? { content: '{"capabilities": "none"}' }
      : pipelineReply(req);
  const { dir, llm, client } = await startHarness(t, badDictionary, { prefix: 'trace-wf-analyst-' });
  const config = pipelineConfig(llm.baseURL, `${dir}/artifacts`, {
    rollouts: { trialsPerTask: 1, batchSize: 3, maxConcurrentBatches: 2, maxSteps: 6 },
  });
  const input: PipelineInput = { runId: 'wf-analyst', config, timeouts: { ...FAST_TIMEOUTS, maximumAttempts: 2 } };
  const handle = await client.workflow.start('tracePipeline', {
    taskQueue: TASK_QUEUE_CPU,
    workflowId: 'wf-analyst',
    args: [input],
  });
  const result = (await handle.result()) as PipelineResult;
  assert.equal(result.status, 'completed_with_failures');
  assert.match(result.analysis.error ?? '', /capability_dictionary: invalid LLM output/);
  assert.match(result.summary, /^stage 1 failed: /);
  assert.deepEqual(result.capabilities, []);
  assert.equal(result.rollouts.trajectories, 6);
  assert.ok(result.evaluation, 'the base agent was still evaluated');
  assert.equal((await openStore(config.store).getJson<{ runId: string }>(result.report)).runId, 'wf-analyst');
});
