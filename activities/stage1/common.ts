import { createHash } from 'node:crypto';
import type { ArtifactRef } from '../../core/artifact-ref.js';
import type { Config } from '../../core/config.js';
import { TrajectorySchema, type Trajectory } from '../../core/trajectory.js';
import type { Environment } from '../../envs/environment.js';
import type { OpenDeps } from '../../envs/registry.js';
import type { LlmFactory } from '../../llm/client.js';
import { activityContext } from '../../infra/activity-context.js';
import type { ArtifactStore } from '../../store/artifact-store.js';

/** What every stage-1 step gets injected: the run's store, the target env and the LLM clients. */
export interface Stage1Deps {
  openStore(config: Config['store']): ArtifactStore | Promise<ArtifactStore>;
  openEnvironment(envConfig: Config['env'], deps: OpenDeps): Promise<Environment>;
  createLlm: LlmFactory;
}

/** The activity's cancellation signal (cancellation arrives through heartbeats), when in one. */
export function cancellation(): AbortSignal | undefined {
  return activityContext()?.cancellationSignal;
}

/** A key part per trajectory id (ids may hold slashes). */
export const itemKey = (id: string) => createHash('sha256').update(id).digest('hex').slice(0, 24);

export async function loadTrajectories(store: ArtifactStore, refs: readonly ArtifactRef[]): Promise<Trajectory[]> {
  const out: Trajectory[] = [];
  for (const ref of refs) {
    const lines = (await store.getText(ref)).split('\n').filter((l) => l.trim());
    lines.forEach((line, i) => {
      const r = TrajectorySchema.safeParse(JSON.parse(line));
      if (!r.success)
        throw new Error(`${ref.uri}: line ${i + 1}: ${r.error.issues[0].path.join('.')}: ${r.error.issues[0].message}`);
      out.push(r.data);
    });
  }
  return out;
}

/** Trajectories ended by infrastructure errors say nothing about the policy: left out of analysis. */
export const analysable = (t: Trajectory) => t.termination !== 'error';

export const byId = (a: Trajectory, b: Trajectory) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
