import { isCancellation, proxyActivities } from '@temporalio/workflow';
import type { FitGateResult } from '../../activities/training.js';
import type { GpuActivities } from '../contracts.js';
import { gpuActivity } from '../options.js';
import { failureMessage } from '../pool.js';
import type { CapabilityResult } from '../types.js';
import type { Run } from './run.js';

export interface Composed {
  gate?: FitGateResult;
  /** Why the gate could not be fitted; the run still evaluates and reports. */
  gateError?: string;
}

/**
 * Stage 4: compose the trained LoRA adapters under one MoE gate (fitted on the GPU queue) that
 * routes each token among them. Nothing to compose without adapters; a gate that cannot be fitted
 * (e.g. no successful trajectories) is reported, the adapters stay stored and the evaluation runs.
 */
export async function composeAdapters(run: Run, capabilities: CapabilityResult[]): Promise<Composed> {
  const { runId, config, timeouts } = run;
  const adapters = capabilities.flatMap((c) => (c.adapter ? [{ capability: c.name, adapter: c.adapter }] : []));
  if (!config.stages.gate || adapters.length === 0) return {};
  run.enter('stage4:gate');
  const summary = `fit the gate over ${adapters.length} adapter(s): ${adapters.map((a) => a.capability).join(', ')} (${config.gate.steps} steps)`;
  try {
    return {
      gate: await proxyActivities<GpuActivities>({ ...gpuActivity(timeouts), summary }).fitGate({
        runId,
        config,
        adapters,
      }),
    };
  } catch (err) {
    if (isCancellation(err)) throw err;
    return { gateError: failureMessage(err) };
  }
}
