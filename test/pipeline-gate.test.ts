import { test } from 'node:test';
import assert from 'node:assert/strict';
import { defaultPayloadConverter } from '@temporalio/common';
import { openStore } from '../store/index.js';
import type { FitGateResult } from '../activities/training.js';
import type { EvaluationStageResult } from '../activities/evaluation.js';
import { TASK_QUEUE_CPU, type PipelineResult } from '../workflows/types.js';
import { scriptedRole, servedPolicyRole, stages24Config, stages24Reply } from './helpers/stages24.js';
import { FAST_TIMEOUTS, startHarness, VERIFY } from './helpers/temporal.js';

/**
 * Stages 3–4 and the evaluation through the whole pipeline on a real dev server, with the real
 * trainer on a tiny model (CPU): a policy with no successful trajectory cannot fit a gate, and the
 * run says so and still evaluates (completed_with_failures); with gold demonstrations the gate is
 * fitted and the TRACE agent (base + gate) is evaluated next to the base on the held-out tasks,
 * both served by the trainer's server.
 */
test(
  'the pipeline reports a gate it cannot fit, and with gold demonstrations fits one and evaluates base vs TRACE',
  { timeout: 900_000 },
  async (t) => {
    // The generator never writes a valid module: the reference env is used (allowed by config).
    const { dir, llm, client, model } = await startHarness(t, stages24Reply, {
      prefix: 'trace-pipeline-gate-',
      queues: ['cpu', 'gpu'],
      model: {},
    });
    const role = scriptedRole(llm.baseURL);
    const config = (goldDemonstrations: number) =>
      stages24Config(llm.baseURL, `${dir}/artifacts`, model, {
        name: 'pipeline-gate-test',
        llm: { policy: servedPolicyRole(llm.baseURL), analyst: role, generator: role },
        rollouts: { trialsPerTask: 2, batchSize: 3, maxConcurrentBatches: 2, maxSteps: 2 },
        stages: { synthesis: true, training: true, gate: true, evaluation: true },
        gate: { steps: 3, batchSize: 2, goldDemonstrations },
        evaluation: { maxTasks: 1 },
      });
    // The trainer and the policy server print nothing while they import torch.
    const timeouts = { ...FAST_TIMEOUTS, heartbeatMs: 60_000 };
    const run = async (id: string, goldDemonstrations: number) =>
      (await client.workflow.execute('tracePipeline', {
        taskQueue: TASK_QUEUE_CPU,
        workflowId: id,
        args: [{ config: config(goldDemonstrations), timeouts }],
      })) as PipelineResult;

    // The tiny random policy solves no episode of the capability env: no data for the gate.
    const without = await run('gate-none', 0);
    const cap = without.capabilities.find((c) => c.name === VERIFY);
    assert.equal(cap?.status, 'trained', cap?.detail);
    assert.equal(without.gate, undefined);
    assert.match(without.gateError ?? '', /no successful trajectories/);
    assert.equal(without.status, 'completed_with_failures');
    assert.match(without.summary, /gate failed: .*no successful trajectories/);
    const baseOnly = without.evaluation as EvaluationStageResult;
    assert.deepEqual(
      baseOnly.variants.map((v) => v.kind),
      ['base'],
      'the evaluation still runs, without a TRACE agent',
    );

    const withGold = await run('gate-gold', 3);
    assert.equal(withGold.status, 'completed', withGold.summary);
    const gate = withGold.gate as FitGateResult;
    assert.deepEqual(gate.adapters, [VERIFY]);
    assert.equal(gate.examples.gold, 3);
    assert.deepEqual(Object.keys(gate.routing), [VERIFY]);
    const evaluation = withGold.evaluation as EvaluationStageResult;
    assert.deepEqual(
      evaluation.variants.map((v) => [v.name, v.kind, v.n]),
      [
        ['base', 'base', 1],
        ['trace', 'trace', 1],
      ],
    );
    assert.match(evaluation.notes.join(' '), /one backend for every variant/);

    // The report compares the two and says where the gate's data came from.
    const store = openStore(config(3).store);
    const report = await store.getJson<{ variants: { name: string; deltaVsBase?: unknown }[]; notes: string[] }>(
      'runs/gate-gold/report/report.json',
    );
    assert.deepEqual(
      report.variants.map((v) => v.name),
      ['base', 'trace'],
    );
    assert.ok(report.variants[1].deltaVsBase, 'TRACE is compared with the base');
    assert.ok(
      report.notes.some((n) => /3 gold demonstrations/.test(n)),
      report.notes.join(' | '),
    );

    // The Temporal UI's view: one-line summaries on the activities, current details on the run.
    const summaries = async (workflowId: string) =>
      ((await client.workflow.getHandle(workflowId).fetchHistory()).events ?? []).flatMap((e) =>
        e.activityTaskScheduledEventAttributes && e.userMetadata?.summary
          ? [defaultPayloadConverter.fromPayload<string>(e.userMetadata.summary)]
          : [],
      );
    assert.deepEqual(await summaries(`gate-gold/capability/${VERIFY}`), [
      `synthesize ${VERIFY} env (≤ 1 attempt(s))`,
      `validate ${VERIFY} env (checks 1–6)`,
      `GRPO ${VERIFY}: 1 iterations × 1 groups × 2 rollouts`,
    ]);
    assert.ok((await summaries('gate-gold')).includes(`fit the gate over 1 adapter(s): ${VERIFY} (3 steps)`));
    assert.deepEqual(await summaries('gate-gold/evaluation'), [
      'serve and evaluate base, TRACE (base + gate) on 1 held-out task(s)',
    ]);
    const meta = await client.workflow
      .getHandle('gate-gold')
      .query<{ currentDetails?: string }>('__temporal_workflow_metadata');
    assert.equal(meta.currentDetails, `**done**: ${withGold.summary}`);
  },
);
