import { openEnvironment } from '../envs/registry.js';
import { keepingAlive } from '../infra/activity-context.js';
import { createLlm } from '../llm/client.js';
import { openStore } from '../store/index.js';
import type { Stage1Deps } from './stage1/common.js';
import { createDiscoveryActivities } from './stage1/discovery.js';
import { createLabelingActivities } from './stage1/labeling.js';
import { createRolloutActivities } from './stage1/rollouts.js';
import { createSelectionActivities } from './stage1/selection.js';

export { loadTrajectories, type Stage1Deps } from './stage1/common.js';
export { canonicalDictionary, pickForDiscovery } from './stage1/discovery.js';
export { RolloutInfrastructureError, type RolloutTask } from './stage1/rollouts.js';
export { stage1Summary } from './stage1/selection.js';

/**
 * Stage 1 activities, one module per step (stage1/rollouts, discovery, labeling, selection): plain
 * async functions with small JSON inputs and outputs; bulk data lives in the artifact store under
 * runs/<runId>/. Each is idempotent (a finished artifact is returned as is) and resumable (finished
 * items are persisted one key each, so a killed worker redoes none). The long ones heartbeat on a
 * timer for their whole run.
 */
export function createStage1Activities(deps: Stage1Deps = { openStore, openEnvironment, createLlm }) {
  const { listRolloutTasks, collectRolloutBatch } = createRolloutActivities(deps);
  const { discoverCapabilities } = createDiscoveryActivities(deps);
  const { labelPass } = createLabelingActivities(deps);
  const { selectCapabilities } = createSelectionActivities(deps);
  return {
    listRolloutTasks,
    collectRolloutBatch: keepingAlive(collectRolloutBatch),
    discoverCapabilities: keepingAlive(discoverCapabilities),
    labelPass: keepingAlive(labelPass),
    selectCapabilities,
  };
}

const defaults = createStage1Activities();
export const { listRolloutTasks, collectRolloutBatch, discoverCapabilities, labelPass, selectCapabilities } = defaults;
