import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { loadTrajectories } from '../activities/stage1.js';
import { PassLabelsSchema } from '../core/capability.js';
import { openStore } from '../store/index.js';
import { TASK_QUEUE_CPU, type PipelineInput, type PipelineResult } from '../workflows/types.js';
import type { ChatRequest, ScriptedReply } from './helpers/scripted-llm.js';
import { FAST_TIMEOUTS, VERIFY, itemOf, pipelineConfig, pipelineReply, startHarness } from './helpers/temporal.js';

/**
 * The LLM endpoint misbehaves: 500s, 429 with Retry-After, a hung request (client timeout), an
 * outage longer than the client's own retries (the activity fails and Temporal retries it), and
 * malformed JSON (repaired by a re-ask, or recorded as that item's failure). The run finishes and
 * the report counts what could not be labeled.
 */
const ORDER_TOTAL = 'how much did I pay in total';
const CANCEL_SHIPPED = 'cancel order O-1003';
const ORDER_STATUS = 'status of my order O-1007';
const CHANGE_ADDRESS = 'change the shipping address';
const OUTAGE_REQUESTS = 6; // > 1 + the client's 4 retries: the first activity attempt must fail

test('reliability: LLM 500s, 429 + Retry-After, timeouts and malformed JSON; the run finishes with items retried or reported', async (t) => {
  const seen = new Map<string, number>();
  const times = new Map<string, number[]>();
  const script = (req: ChatRequest): ScriptedReply => {
    const it = itemOf(req);
    const n = seen.get(it.key) ?? 0;
    seen.set(it.key, n + 1);
    times.set(it.key, [...(times.get(it.key) ?? []), Date.now()]);
    const is = (s: string) => it.kind === 'policy' && it.key.includes(s);
    if (is(ORDER_TOTAL) && n === 0) return { status: 500 };
    if (is(CANCEL_SHIPPED) && n === 0) return { status: 429, headers: { 'retry-after': '1' } };
    if (is(ORDER_STATUS) && n === 0) return { hang: true };
    if (is(CHANGE_ADDRESS) && n < OUTAGE_REQUESTS) return { status: 503 };
    if (it.kind === 'discovery' && n === 0) return { content: '{"capabilities": [' };
    if (it.key === 'pass0:toy-orders/cancel_pending/t0') return { content: 'These labels are fine, I think.' };
    if (it.key === 'pass1:toy-orders/order_total/t0' && n === 0)
      return { content: '{"labels": {"verify_preconditions": "LACK' };
    return pipelineReply(req);
  };
  const { dir, llm, client } = await startHarness(t, script, { prefix: 'trace-faults-' });

  const config = pipelineConfig(llm.baseURL, path.join(dir, 'artifacts'), {
    rollouts: { trialsPerTask: 1, batchSize: 3, maxConcurrentBatches: 2, maxSteps: 6 },
    stages: { synthesis: false, training: false, gate: false, evaluation: false },
  });
  const input: PipelineInput = { runId: 'faults-run', config, timeouts: FAST_TIMEOUTS };
  const handle = await client.workflow.start('tracePipeline', {
    taskQueue: TASK_QUEUE_CPU,
    workflowId: 'faults-run',
    args: [input],
  });
  const result = (await handle.result()) as PipelineResult;

  // Every episode completed despite the faults; none ended as an infrastructure error.
  assert.equal(result.rollouts.trajectories, 6);
  assert.equal(result.rollouts.failedBatches, 0);
  const store = openStore(config.store);
  const trajectories = await loadTrajectories(store, result.rollouts.refs);
  assert.deepEqual(
    trajectories.filter((x) => x.termination === 'error').map((x) => x.id),
    [],
  );
  const first = (s: string) => [...seen].find(([k]) => k.includes(s))!;
  assert.ok(first(ORDER_TOTAL)[1] >= 2, '500 retried');
  assert.ok(first(ORDER_STATUS)[1] >= 2, 'hung request timed out and retried');
  const t429 = [...times].find(([k]) => k.includes(CANCEL_SHIPPED))![1];
  assert.ok(t429[1] - t429[0] >= 900, `429 Retry-After: 1 honoured (gap ${t429[1] - t429[0]} ms)`);
  assert.ok(
    first(CHANGE_ADDRESS)[1] > OUTAGE_REQUESTS,
    'the outage outlasted the client retries and the activity was retried',
  );
  const history = await handle.fetchHistory();
  const retried = history.events!.some((e) => (e.activityTaskStartedEventAttributes?.attempt ?? 1) > 1);
  assert.ok(retried, 'Temporal retried the batch whose outage outlasted the client');

  // Discovery was repaired; one label stayed invalid and is reported, not fatal.
  assert.equal(seen.get('discovery'), 2);
  assert.deepEqual(result.analysis.selected, [VERIFY]);
  assert.equal(result.analysis.failedLabels, 1);
  const pass0 = PassLabelsSchema.parse(await store.getJson(result.analysis.labels[0]));
  assert.deepEqual(
    pass0.failedItems.map((f) => f.trajectoryId),
    ['toy-orders/cancel_pending/t0'],
  );
  const pass1 = PassLabelsSchema.parse(await store.getJson(result.analysis.labels[1]));
  assert.equal(pass1.failedItems.length, 0, 'the malformed reply in pass 1 was repaired');
  assert.equal(result.status, 'completed');
});
