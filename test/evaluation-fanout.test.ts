import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EvaluationSummarySchema } from '../core/evaluation.js';
import { openStore } from '../store/index.js';
import type { EvaluationStageResult } from '../activities/evaluation.js';
import { TASK_QUEUE_CPU } from '../workflows/types.js';
import { FAST_TIMEOUTS, pipelineConfig, pipelineReply, startHarness } from './helpers/temporal.js';
import { traceAgentReply } from './helpers/toy-policy.js';

/**
 * The evaluation stage as a fan-out on a real Temporal dev server: one activity per (variant,
 * batch of held-out tasks), served by two workers, then one summary per variant.
 */
test('evaluationWorkflow fans out (variant × batch) activities over workers and summarizes each variant', async (t) => {
  const { dir, llm, agents, client } = await startHarness(t, pipelineReply, {
    prefix: 'trace-evalfan-',
    workers: 2,
    agents: { 'trace-agent': traceAgentReply },
  });
  const traceAgent = agents['trace-agent'];
  const config = pipelineConfig(llm.baseURL, `${dir}/artifacts`, {
    evaluation: {
      maxTasks: 2,
      trials: 2,
      temperature: 1,
      batchSize: 1,
      variants: [{ name: 'trace', kind: 'trace', baseURL: traceAgent.baseURL, model: 'trace-agent' }],
    },
  });
  const handle = await client.workflow.start('evaluationWorkflow', {
    taskQueue: TASK_QUEUE_CPU,
    workflowId: 'evalfan',
    args: [{ runId: 'evalfan', config, timeouts: FAST_TIMEOUTS }],
  });
  const result = (await handle.result()) as EvaluationStageResult;
  assert.equal(result.split, 'test');
  assert.equal(result.tasks, 2);
  assert.deepEqual(
    result.variants.map((v) => [v.name, v.kind, v.n, v.passRate]),
    [
      ['base', 'base', 4, 0],
      ['trace', 'trace', 4, 0.5],
    ],
  );
  assert.deepEqual(result.notes, []);

  // 2 variants × 2 batches of one task, then one summary per variant.
  const history = await handle.fetchHistory();
  const scheduled = (history.events ?? []).flatMap(
    (e) => e.activityTaskScheduledEventAttributes?.activityType?.name ?? [],
  );
  assert.deepEqual(scheduled.filter((n) => n === 'evaluateVariant').length, 6);
  assert.deepEqual(
    scheduled.filter((n) => n !== 'evaluateVariant'),
    ['planEvaluation'],
  );

  const store = openStore(config.store);
  const trace = EvaluationSummarySchema.parse(await store.getJson(result.variants[1].ref));
  assert.equal(trace.overall.passRate.method, 't');
  assert.deepEqual(
    trace.perTask.map((p) => [p.taskId, p.trials, p.successes]),
    [
      ['cancel_pending_2', 2, 0],
      ['pending_total', 2, 2],
    ],
  );
  assert.deepEqual(
    trace.overall.passHatK.map((p) => p.value),
    [0.5, 0.5],
  );
});
