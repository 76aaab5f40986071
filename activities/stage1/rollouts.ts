import type { ArtifactRef } from '../../core/artifact-ref.js';
import type { Config } from '../../core/config.js';
import { TrajectorySchema, type Trajectory, type Usage } from '../../core/trajectory.js';
import { runEpisodes, type TaskSpec } from '../../agent/rollout.js';
import { activityContext, heartbeat } from '../../infra/activity-context.js';
import { addUsage, envLlm, ZERO_USAGE } from '../../llm/client.js';
import { runKeys } from '../../store/keys.js';
import { cancellation, loadTrajectories, type Stage1Deps } from './common.js';

/** Rollouts, stage 1's input: the (task, trial) pairs of the train split, then one batch of episodes per activity. */

/**
 * From this activity attempt on, episodes that ended in infrastructure errors are accepted into the
 * batch (recorded, left out of analysis) instead of failing it for another retry.
 */
const ACCEPT_ERRORED_FROM_ATTEMPT = 3;
/** Seeds rolled out on an env without fixed tasks when env.maxTasks is not set. */
const DEFAULT_SEEDED_TASKS = 8;

export class RolloutInfrastructureError extends Error {
  override name = 'RolloutInfrastructureError';
}

export interface RolloutTask {
  taskId?: string;
  seed?: number;
  trial: number;
}

function toJsonl(items: unknown[]): string {
  return items.map((x) => JSON.stringify(x)).join('\n') + (items.length ? '\n' : '');
}

function summarize(ts: readonly Trajectory[]) {
  return {
    count: ts.length,
    successes: ts.filter((t) => t.success).length,
    usage: ts.reduce((u, t) => addUsage(u, t.usage), ZERO_USAGE),
  };
}

export function createRolloutActivities(deps: Stage1Deps) {
  async function listRolloutTasks(input: { config: Config }): Promise<RolloutTask[]> {
    const { config } = input;
    const env = await deps.openEnvironment(config.env, { config, llm: envLlm(config, deps.createLlm) });
    try {
      const all = await env.listTasks();
      const trials = config.rollouts.trialsPerTask;
      if (all.length === 0) {
        // A seeded generator env: tasks are seeds 0..maxTasks-1.
        const n = config.env.maxTasks ?? DEFAULT_SEEDED_TASKS;
        return Array.from({ length: n }, (_, s) =>
          Array.from({ length: trials }, (_, trial) => ({ seed: s, trial })),
        ).flat();
      }
      const hasSplits = all.some((t) => t.split !== undefined);
      const train = hasSplits ? all.filter((t) => t.split === config.env.trainSplit) : all;
      if (train.length === 0)
        throw new Error(`env.trainSplit: no tasks in split '${config.env.trainSplit}' of ${config.env.name}`);
      const chosen = train.slice(0, config.env.maxTasks ?? train.length);
      return chosen.flatMap((t) => Array.from({ length: trials }, (_, trial) => ({ taskId: t.id, trial })));
    } finally {
      await env.close?.();
    }
  }

  async function collectRolloutBatch(input: {
    config: Config;
    runId: string;
    batchIndex: number;
    tasks: RolloutTask[];
    /** Record episodes that ended in infrastructure errors instead of failing the batch (default: from attempt 3 on). */
    acceptErroredEpisodes?: boolean;
  }): Promise<{ ref: ArtifactRef; count: number; successes: number; usage: Usage }> {
    const { config, runId, batchIndex, tasks } = input;
    const store = await deps.openStore(config.store);
    const key = runKeys.rolloutBatch(runId, batchIndex);
    const existing = await store.stat(key);
    if (existing) return { ref: existing, ...summarize(await loadTrajectories(store, [existing])) };

    // Finished episodes are persisted one key each; an episode that ended in an infrastructure error
    // is not, so the next attempt redoes exactly those.
    const done = new Map<number, Trajectory>();
    for (const k of await store.list(runKeys.rolloutBatchParts(runId, batchIndex))) {
      const index = Number(/(\d+)\.json$/.exec(k)?.[1]);
      done.set(index, TrajectorySchema.parse(await store.getJson(k)));
    }
    const acceptErrored =
      input.acceptErroredEpisodes ?? (activityContext()?.info.attempt ?? 1) >= ACCEPT_ERRORED_FROM_ATTEMPT;
    const pending = tasks.map((t, i) => ({ t, i })).filter(({ i }) => !done.has(i));
    const errored = new Map<number, Trajectory>();
    heartbeat({ done: done.size, total: tasks.length });
    if (pending.length) {
      const env = await deps.openEnvironment(config.env, { config, llm: envLlm(config, deps.createLlm) });
      try {
        const llm = deps.createLlm(config, 'policy');
        await runEpisodes({
          env,
          llm,
          tasks: pending.map(({ t }): TaskSpec => t),
          concurrency: config.llm.policy.concurrency,
          maxSteps: config.rollouts.maxSteps,
          maxErrors: config.rollouts.maxErrors,
          timeoutMs: config.rollouts.episodeTimeoutMs,
          temperature: config.rollouts.temperature,
          signal: cancellation(),
          onEpisode: async (traj, j) => {
            const index = pending[j].i;
            if (traj.termination === 'error' && !acceptErrored) {
              errored.set(index, traj);
              return;
            }
            await store.put(runKeys.rolloutBatchPart(runId, batchIndex, index), JSON.stringify(traj));
            done.set(index, traj);
            heartbeat({ done: done.size, total: tasks.length });
          },
        });
      } finally {
        await env.close?.();
      }
    }
    if (errored.size) {
      const first = [...errored.values()][0];
      throw new RolloutInfrastructureError(
        `batch ${batchIndex}: ${errored.size} of ${tasks.length} episodes ended in infrastructure errors (first: ${first.id}: ${String(first.rewardInfo.details?.runnerNote ?? 'unknown')}); finished episodes are kept for the retry`,
      );
    }
    const all = tasks.map((_, i) => done.get(i)!);
    const ref = await store.put(key, toJsonl(all));
    return { ref, ...summarize(all) };
  }

  return { listRolloutTasks, collectRolloutBatch };
}
