import { startChild, workflowInfo } from '@temporalio/workflow';
import { capabilitiesToTrain } from '../../core/capability.js';
import { reusePlan, type RunArtifacts } from '../../core/schedule.js';
import { capabilityWorkflow } from '../capability.js';
import { failureMessage } from '../pool.js';
import type { CapabilityInput, CapabilityResult } from '../types.js';
import type { Identified } from './identify-capabilities.js';
import type { Run } from './run.js';

/**
 * Stages 2–3: one capabilityWorkflow child per capability stage 1 kept, and per capability the
 * config requests on top (synthesize its environment → validate it → GRPO-train its LoRA adapter).
 * A failed child is reported; the others continue. In scheduled retraining each capability takes
 * over what the previous run has of it (environment, adapter); new ones start fresh.
 */
export async function trainCapabilities(
  run: Run,
  { analysis, selected }: Identified,
  previous?: RunArtifacts,
): Promise<CapabilityResult[]> {
  const { runId, config, timeouts } = run;
  run.enter('stages2-3:capabilities');
  const parentId = workflowInfo().workflowId;
  const toTrain = capabilitiesToTrain(selected, config.analysis.requestedCapabilities);
  const workflowId = (name: string) => `${parentId}/capability/${name}`;
  run.capabilitiesPlanned(
    toTrain.map((c) => ({
      name: c.name,
      workflowId: workflowId(c.name),
      ...(c.requestedByConfig ? { requestedByConfig: true } : {}),
    })),
  );
  const reuse = previous
    ? reusePlan(
        previous,
        toTrain.map((c) => c.name),
      )
    : [];
  const settled = await Promise.allSettled(
    toTrain.map(async ({ name, description }, i) => {
      const args: CapabilityInput = {
        runId,
        config,
        capability: { name, description },
        analysis: analysis.selection,
        timeouts,
        ...takenOver(previous, reuse[i]),
      };
      const handle = await startChild(capabilityWorkflow, { workflowId: workflowId(name), args: [args] });
      run.capabilityStarted(i);
      const result = await handle.result();
      run.capabilitySettled(i, result);
      return result;
    }),
  );
  return settled.map((r, i) => {
    const { name, requestedByConfig } = toTrain[i];
    const requested = requestedByConfig ? { requestedByConfig: true } : {};
    if (r.status === 'fulfilled') return { ...r.value, ...requested };
    const failed: CapabilityResult = { name, status: 'failed', detail: failureMessage(r.reason) };
    run.capabilitySettled(i, failed);
    return { ...failed, ...requested };
  });
}

/** The child's inputs from the previous run: its environment to validate again, its adapter to continue. */
function takenOver(
  previous: RunArtifacts | undefined,
  reuse: ReturnType<typeof reusePlan>[number] | undefined,
): Partial<CapabilityInput> {
  if (!previous || !reuse || (!reuse.environment && !reuse.adapter)) return {};
  return {
    previousRunId: previous.runId,
    ...(reuse.environment ? { previousEnvironment: reuse.environment } : {}),
    ...(reuse.adapter ? { previousAdapter: reuse.adapter } : {}),
  };
}
