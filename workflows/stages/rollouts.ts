import { ApplicationFailure, proxyActivities } from '@temporalio/workflow';
import type { ArtifactRef } from '../../core/artifact-ref.js';
import type { CpuActivities } from '../contracts.js';
import { rolloutActivity, shortActivity } from '../options.js';
import { chunk, failureMessage, settlePool } from '../pool.js';
import type { ImportedRollouts, PipelineResult } from '../types.js';
import type { Run } from './run.js';

export type Rollouts = PipelineResult['rollouts'];

/**
 * The agent's rollouts on the target env, stage 1's input: every (task, trial) pair, in batches, at
 * most rollouts.maxConcurrentBatches in flight; a failed batch is counted and the others continue.
 * A run started from imported rollouts (`trace import-tau2`) takes those instead.
 */
export async function collectRollouts(run: Run, imported?: ImportedRollouts): Promise<Rollouts> {
  run.enter('rollouts');
  const { refs, failedBatches } = imported ? fromImport(run, imported) : await collect(run);
  run.rolloutsDone();
  const { trajectories, successes } = run.progress.rollouts;
  return { refs, trajectories, successes, passRate: trajectories ? successes / trajectories : null, failedBatches };
}

function fromImport(run: Run, imported: ImportedRollouts): { refs: ArtifactRef[]; failedBatches: number } {
  run.rolloutsImported({ trajectories: imported.trajectories, successes: imported.successes });
  return { refs: imported.refs, failedBatches: 0 };
}

async function collect(run: Run): Promise<{ refs: ArtifactRef[]; failedBatches: number }> {
  const { runId, config, timeouts } = run;
  const items = await proxyActivities<CpuActivities>(shortActivity(timeouts)).listRolloutTasks({ config });
  const batches = chunk(items, config.rollouts.batchSize);
  run.rolloutBatchesPlanned(batches.length);
  const acts = proxyActivities<CpuActivities>(rolloutActivity(config, timeouts));
  const settled = await settlePool(batches, config.rollouts.maxConcurrentBatches, (tasks, batchIndex) =>
    run.rolloutBatch(() => acts.collectRolloutBatch({ runId, config, batchIndex, tasks })),
  );
  const refs = settled.flatMap((r) => (r.status === 'fulfilled' ? [r.value.ref] : []));
  const failed = settled.flatMap((r) => (r.status === 'rejected' ? [r.reason] : []));
  if (refs.length === 0) {
    const why = failed.length ? failureMessage(failed[0]) : 'no tasks';
    throw ApplicationFailure.nonRetryable(`no rollouts collected (${batches.length} batches): ${why}`, 'NoRollouts');
  }
  return { refs, failedBatches: failed.length };
}
