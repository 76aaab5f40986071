import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ScheduleOverlapPolicy } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import { openStore } from '../store/index.js';
import type { ArtifactRef } from '../core/artifact-ref.js';
import type { RetrainResult } from '../workflows/retrain.js';
import { TASK_QUEUE_CPU, type CapabilityResult, type PipelineResult } from '../workflows/types.js';
import { isGenerator, stages24Config, stages24Reply } from './helpers/stages24.js';
import { FAST_TIMEOUTS, startHarness, triggerSchedule, VERIFY } from './helpers/temporal.js';

/**
 * Scheduled retraining starts from the previous run's artifacts, on a real Temporal dev server with
 * the real stage 2–3 activities: a Schedule triggered twice; the second run's capability child
 * validates the first run's environment under its own config instead of synthesizing one, and its
 * trainAdapter continues the first run's adapter (the real trainer, a tiny model on CPU). A third
 * round with a changed LoRA config falls back to a fresh adapter.
 */
test(
  "a retraining schedule reuses the previous run's environment and continues its adapter",
  { timeout: 600_000 },
  async (t) => {
    // The generator never writes a valid module, so the first run falls back to the reference env.
    const { dir, llm, client, model } = await startHarness(t, stages24Reply, {
      prefix: 'trace-retrain-reuse-',
      queues: ['cpu', 'gpu'],
      model: {},
    });
    const config = stages24Config(llm.baseURL, `${dir}/artifacts`, model, {
      name: 'retrain-reuse-test',
      stages: { synthesis: true, training: true, gate: false, evaluation: false },
    });
    // The trainer process starts in seconds but prints nothing while it imports torch.
    const timeouts = { ...FAST_TIMEOUTS, heartbeatMs: 60_000 };

    const schedule = await client.schedule.create({
      scheduleId: 'retrain-reuse-sched',
      spec: { intervals: [{ every: '1d' }] },
      action: {
        type: 'startWorkflow',
        workflowType: 'traceRetrain',
        taskQueue: TASK_QUEUE_CPU,
        workflowId: 'retrain',
        args: [{ config, timeouts }],
      },
      policies: { overlap: ScheduleOverlapPolicy.SKIP },
      state: { paused: true },
    });
    async function triggerAndWait(n: number) {
      return finished(await triggerSchedule(schedule, n), n);
    }
    async function finished(
      id: string,
      n: number,
    ): Promise<{
      id: string;
      result: RetrainResult;
      capability: CapabilityResult;
      activities: { type: string; input: unknown }[];
    }> {
      const result = (await client.workflow.getHandle(id).result()) as RetrainResult;
      const pipeline = (await client.workflow.getHandle(result.pipelineWorkflowId).result()) as PipelineResult;
      const capability = pipeline.capabilities.find((c) => c.name === VERIFY);
      assert.ok(capability, `run ${n} trained ${VERIFY}: ${pipeline.summary}`);
      // What the capability child asked its workers to do, with the inputs, from its Temporal history.
      const history = await client.workflow
        .getHandle(`${result.pipelineWorkflowId}/capability/${VERIFY}`)
        .fetchHistory();
      const activities = (history.events ?? []).flatMap((e) => {
        const a = e.activityTaskScheduledEventAttributes;
        return a
          ? [{ type: a.activityType?.name ?? '?', input: defaultPayloadConverter.fromPayload(a.input!.payloads![0]) }]
          : [];
      });
      return { id, result, capability, activities };
    }

    const first = await triggerAndWait(1);
    assert.equal(first.capability.status, 'trained', first.capability.detail);
    assert.match(first.capability.detail, /^adapter trained \(reference env precondition_verification\)$/);
    assert.deepEqual(
      first.activities.map((a) => a.type),
      ['synthesizeEnvironment', 'validateEnvironment', 'trainAdapter'],
    );
    assert.equal((first.activities[2].input as { initAdapter?: unknown }).initAdapter, undefined);
    assert.deepEqual(first.result.reusable, { environments: [], adapters: [] });
    const generatorCalls = llm.requests.filter(isGenerator).length;
    assert.ok(generatorCalls > 0, 'the first run asked the generator');
    const firstAdapter = first.capability.adapter as ArtifactRef;
    assert.ok(firstAdapter.uri.includes(`runs/${first.id}/adapters/${VERIFY}/`), firstAdapter.uri);

    const second = await triggerAndWait(2);
    assert.equal(second.result.startedFrom, first.id);
    assert.equal(second.capability.status, 'trained', second.capability.detail);
    // No synthesis: the first run's environment was validated under this run's config, then trained on.
    assert.deepEqual(
      second.activities.map((a) => a.type),
      ['validateEnvironment', 'trainAdapter'],
    );
    assert.equal(llm.requests.filter(isGenerator).length, generatorCalls, 'the second run did not ask the generator');
    assert.deepEqual(
      (second.activities[0].input as { environment: ArtifactRef }).environment,
      first.capability.environment,
    );
    const trainInput = second.activities[1].input as {
      environment: ArtifactRef;
      initAdapter?: ArtifactRef;
      runId: string;
    };
    assert.deepEqual(trainInput.initAdapter, firstAdapter);
    assert.deepEqual(trainInput.environment, first.capability.environment);
    assert.equal(
      second.capability.detail,
      `adapter continued from run ${first.id} (environment reused from run ${first.id})`,
    );
    assert.deepEqual(second.capability.reusedFrom, { environment: first.id, adapter: first.id });
    const training = second.capability.training as { continuedFrom?: ArtifactRef; iterations: number };
    assert.deepEqual(training.continuedFrom, firstAdapter);
    assert.equal(training.iterations, 1, "this run's own iteration budget");
    assert.ok((second.capability.adapter as ArtifactRef).uri.includes(`runs/${second.id}/adapters/${VERIFY}/`));
    assert.deepEqual(second.result.reusable, { environments: [VERIFY], adapters: [VERIFY] });

    // The run's report says what was taken over.
    const store = openStore(config.store);
    const report = await store.getJson<{
      capabilities: { name: string; synthesis: { message?: string }; training: { message?: string } }[];
    }>(`runs/${second.id}/report/report.json`);
    const row = report.capabilities.find((c) => c.name === VERIFY);
    assert.equal(row?.synthesis.message, `environment reused from run ${first.id}`);
    assert.equal(row?.training.message, `adapter continued from run ${first.id}`);

    // A later round whose LoRA config changed: the trainer refuses the previous adapter (rank 4 vs 8),
    // so the round trains a fresh one on the reused environment and says why.
    const changed = { ...config, training: { ...config.training, lora: { ...config.training.lora, r: 8 } } };
    const thirdId = 'retrain-changed-lora';
    await client.workflow.start('traceRetrain', {
      taskQueue: TASK_QUEUE_CPU,
      workflowId: thirdId,
      args: [{ config: changed, timeouts }],
    });
    const third = await finished(thirdId, 3);
    assert.equal(third.result.startedFrom, second.id);
    assert.equal(third.capability.status, 'trained', third.capability.detail);
    assert.deepEqual(
      third.activities.map((a) => [a.type, (a.input as { initAdapter?: ArtifactRef }).initAdapter]),
      [
        ['validateEnvironment', undefined],
        ['trainAdapter', second.capability.adapter],
        ['trainAdapter', undefined],
      ],
    );
    assert.match(
      third.capability.detail,
      new RegExp(
        `^adapter trained \\(environment reused from run ${second.id}\\); the adapter of run ${second.id} could not be continued: init_adapter_uri: .* has r=4, the configured lora\\.r is 8$`,
      ),
    );
    assert.deepEqual(third.result.reusable, { environments: [VERIFY], adapters: [] });
  },
);
