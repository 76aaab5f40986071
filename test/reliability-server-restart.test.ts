import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { TASK_QUEUE_CPU, type PipelineInput, type PipelineResult } from '../workflows/types.js';
import {
  FAST_TIMEOUTS,
  VERIFY,
  pipelineConfig,
  sleep,
  slowPipelineReply,
  startHarness,
  startsPerItem,
} from './helpers/temporal.js';

/**
 * The Temporal dev server stopped and restarted on the same SQLite file in the middle of a run:
 * the same workflow execution continues (same run id, history kept) and completes.
 */

test('reliability: Temporal dev server restarted on the same SQLite file mid-run; the run continues', async (t) => {
  const h = await startHarness(
    t,
    slowPipelineReply(() => 200),
    { prefix: 'trace-restart-', workers: 0 },
  );
  const { llm, client } = h;
  await h.spawnWorker();

  const config = pipelineConfig(llm.baseURL, path.join(h.dir, 'artifacts'), {
    rollouts: { trialsPerTask: 1, batchSize: 2, maxConcurrentBatches: 1, maxSteps: 6 },
    stages: { synthesis: false, training: false, gate: false, evaluation: false },
  });
  const input: PipelineInput = { runId: 'restart-run', config, timeouts: FAST_TIMEOUTS };
  const started = await client.workflow.start('tracePipeline', {
    taskQueue: TASK_QUEUE_CPU,
    workflowId: 'restart-run',
    args: [input],
  });
  const firstRunId = started.firstExecutionRunId;

  while (startsPerItem(llm.requests, 'policy').size < 2) await sleep(50);
  const pidBefore = h.temporal.pid;
  await h.temporal.stop();
  const requestsWhileDown = llm.requests.length;
  await sleep(2000);
  const temporal = await h.restartTemporal();
  assert.notEqual(temporal.pid, pidBefore, 'a new server process');

  // The harness's client reconnects to the restarted server at the same address.
  const handle = client.workflow.getHandle('restart-run');
  const result = (await handle.result()) as PipelineResult;
  assert.equal(result.rollouts.trajectories, 6);
  assert.deepEqual(result.analysis.selected, [VERIFY]);
  const d = await handle.describe();
  assert.equal(d.runId, firstRunId, 'the same execution continued, not a new one');
  assert.equal(d.status.name, 'COMPLETED');
  const history = await handle.fetchHistory();
  const kinds = new Set(
    history.events!.map((e) => e.activityTaskScheduledEventAttributes?.activityType?.name).filter(Boolean),
  );
  for (const a of [
    'listRolloutTasks',
    'collectRolloutBatch',
    'discoverCapabilities',
    'labelPass',
    'selectCapabilities',
  ]) {
    assert.ok(kinds.has(a), `history has ${a}`);
  }
  assert.ok(llm.requests.length > requestsWhileDown, 'work continued after the restart');
});
