import type { Config } from '../core/config.js';
import type { ArtifactStore } from '../store/artifact-store.js';
import type { ArtifactRef } from '../core/artifact-ref.js';
import type { PipelineResult, StagePlan } from '../workflows/types.js';

/**
 * Activities of the platform itself: the stage plan (which activities exist) and the fallback run
 * report used until activities/report.ts provides the full one.
 */
type StoreConfig = Config['store'];

/** store/index.ts is written by another stage; imported lazily so workers start without it. */
export async function openRunStore(store: StoreConfig): Promise<ArtifactStore> {
  const modulePath = '../store/index.js';
  const mod = (await import(modulePath)) as { openStore(c: StoreConfig): ArtifactStore };
  return mod.openStore(store);
}

export function platformActivities(activityNames: () => string[]) {
  return {
    async pipelinePlan(): Promise<StagePlan> {
      return { activities: activityNames() };
    },
    async writeRunReport(input: { config: Config; result: Omit<PipelineResult, 'report'> }): Promise<ArtifactRef> {
      const store = await openRunStore(input.config.store);
      const body = JSON.stringify({ kind: 'trace-run-report', version: 1, config: input.config, ...input.result }, null, 2);
      return store.put(`runs/${input.result.runId}/report.json`, body);
    },
  };
}
