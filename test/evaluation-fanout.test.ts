import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Client, Connection } from '@temporalio/client';
import { EvaluationSummarySchema } from '../core/evaluation.js';
import { openStore } from '../store/index.js';
import { startWorkers } from '../workers/run.js';
import type { EvaluationStageResult } from '../activities/evaluation.js';
import { TASK_QUEUE_CPU } from '../workflows/types.js';
import { startScriptedLlm } from './helpers/scripted-llm.js';
import { FAST_TIMEOUTS, pipelineConfig, pipelineReply, startTestTemporal, tempDir } from './helpers/temporal.js';
import { pendingTotalTask } from './helpers/toy-policy.js';

/**
 * The evaluation stage as a fan-out on a real Temporal dev server: one activity per (variant,
 * batch of held-out tasks), served by two workers, then one summary per variant.
 */
test('evaluationWorkflow fans out (variant × batch) activities over workers and summarizes each variant', async (t) => {
  const tmp = await tempDir('trace-evalfan-');
  const llm = await startScriptedLlm(pipelineReply);
  const traceAgent = await startScriptedLlm((req) => {
    const opening = req.messages.find((m) => m.role === 'user')?.content ?? '';
    return opening === pendingTotalTask.opening ? { content: `Your pending orders total ${pendingTotalTask.communicate[0]}.` } : { content: 'Done.' };
  }, 'trace-agent');
  const temporal = await startTestTemporal({ dbFile: `${tmp.dir}/temporal.db` });
  const a = await startWorkers({ queues: ['cpu'], settings: temporal.settings, shutdownGraceMs: 2000 });
  const b = await startWorkers({ queues: ['cpu'], settings: temporal.settings, shutdownGraceMs: 2000 });
  const connection = await Connection.connect({ address: temporal.address });
  t.after(async () => {
    await connection.close();
    await a.shutdown();
    await b.shutdown();
    await temporal.stop();
    await llm.close();
    await traceAgent.close();
    await tmp.cleanup();
  });
  const client = new Client({ connection });
  const config = pipelineConfig(llm.baseURL, `${tmp.dir}/artifacts`, {
    evaluation: { maxTasks: 2, trials: 2, temperature: 1, batchSize: 1, variants: [{ name: 'trace', kind: 'trace', baseURL: traceAgent.baseURL, model: 'trace-agent' }] },
  });
  const handle = await client.workflow.start('evaluationWorkflow', {
    taskQueue: TASK_QUEUE_CPU,
    workflowId: 'evalfan',
    args: [{ runId: 'evalfan', config, timeouts: FAST_TIMEOUTS }],
  });
  const result = (await handle.result()) as EvaluationStageResult;
  assert.equal(result.split, 'test');
  assert.equal(result.tasks, 2);
  assert.deepEqual(result.variants.map((v) => [v.name, v.kind, v.n, v.passRate]), [['base', 'base', 4, 0], ['trace', 'trace', 4, 0.5]]);
  assert.deepEqual(result.notes, []);

  // 2 variants × 2 batches of one task, then one summary per variant.
  const history = await handle.fetchHistory();
  const scheduled = (history.events ?? []).flatMap((e) => e.activityTaskScheduledEventAttributes?.activityType?.name ?? []);
  assert.deepEqual(scheduled.filter((n) => n === 'evaluateVariant').length, 6);
  assert.deepEqual(scheduled.filter((n) => n !== 'evaluateVariant'), ['planEvaluation']);

  const store = openStore(config.store);
  const trace = EvaluationSummarySchema.parse(await store.getJson(result.variants[1].ref));
  assert.equal(trace.overall.passRate.method, 't');
  assert.deepEqual(trace.perTask.map((p) => [p.taskId, p.trials, p.successes]), [['cancel_pending_2', 2, 0], ['pending_total', 2, 2]]);
  assert.deepEqual(trace.overall.passHatK.map((p) => p.value), [0.5, 0.5]);
});
