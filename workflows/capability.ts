import { proxyActivities, setHandler, defineQuery } from '@temporalio/workflow';
import type * as synthesis from '../activities/synthesis/index.js';
import type * as training from '../activities/training.js';
import type { CapabilityInput, CapabilityResult, CapabilityStatus } from './types.js';
import { gpuActivity, longActivity } from './options.js';

/**
 * One kept capability: synthesize its environment → validate it → train its LoRA adapter. Each
 * stage runs only when the workers implement it; otherwise the child ends honestly with
 * 'not_configured' and says which stage is missing.
 */
/** Stage 2 as activities/synthesis implements it (types only). */
export type CapabilityActivities = typeof synthesis;
/** Stage 3 as activities/training.ts implements it (types only; served on trace-gpu). */
export type TrainingActivities = Pick<typeof training, 'trainAdapter'>;

export const capabilityStatusQuery = defineQuery<CapabilityStatus>('status');

export async function capabilityWorkflow(input: CapabilityInput): Promise<CapabilityResult> {
  const { runId, config, capability, plan } = input;
  const has = (name: string) => plan.activities.includes(name);
  let status: CapabilityStatus = 'pending';
  setHandler(capabilityStatusQuery, () => status);
  const done = (s: CapabilityStatus, detail: string, extra: Partial<CapabilityResult> = {}): CapabilityResult => {
    status = s;
    return { name: capability.name, status: s, detail, ...extra };
  };

  if (!config.stages.synthesis) return done('not_configured', 'synthesis disabled by config (stages.synthesis: false)');
  if (!has('synthesizeEnvironment')) return done('not_configured', 'stages 2–4 not configured: no synthesizeEnvironment activity');

  const cpu = proxyActivities<CapabilityActivities>(longActivity(config, 'generator', input.timeouts));
  status = 'synthesizing';
  const synthesized = await cpu.synthesizeEnvironment({ runId, config, capability, analysis: input.analysis });
  const environment = synthesized.ref;
  if (synthesized.status === 'synthesis_failed' || !environment) {
    return done('failed', `synthesis failed after ${synthesized.attempts} attempt(s): ${synthesized.lastFailure ?? 'no accepted environment'}`, {
      validation: synthesized,
    });
  }
  const how = synthesized.status === 'reference_fallback' ? `reference env ${synthesized.reference}` : `synthesized in ${synthesized.attempts} attempt(s)`;

  let validation: unknown = synthesized;
  if (has('validateEnvironment')) {
    status = 'validating';
    const v = await cpu.validateEnvironment({ runId, config, capability, environment });
    validation = { ...synthesized, ...v };
    if (!v.ok) return done('failed', `environment failed validation: ${v.reason ?? 'no reason given'}`, { environment, validation });
  }

  if (!config.stages.training) {
    return done('not_configured', `environment ready (${how}); training disabled by config (stages.training: false)`, { environment, validation });
  }
  if (!has('trainAdapter')) {
    return done('not_configured', `environment ready (${how}); stages 3–4 not configured: no trainAdapter activity`, {
      environment,
      validation,
    });
  }
  const gpu = proxyActivities<TrainingActivities>(gpuActivity(input.timeouts));
  status = 'training';
  const training = await gpu.trainAdapter({ runId, config, capability, environment });
  return done('trained', `adapter trained (${how})`, { environment, validation, adapter: training.adapter, training });
}
