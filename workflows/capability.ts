import {
  ActivityFailure,
  ApplicationFailure,
  defineQuery,
  isCancellation,
  proxyActivities,
  setHandler,
} from '@temporalio/workflow';
import type { ArtifactRef } from '../core/artifact-ref.js';
import type { CpuActivities, GpuActivities } from './contracts.js';
import type { CapabilityInput, CapabilityResult, CapabilityStatus, CapabilityValidation } from './types.js';
import { gpuActivity, longActivity } from './options.js';
import { failureMessage } from './pool.js';

/**
 * Stages 2–3 for one kept capability: synthesize its environment → validate it (stage 2) → train its
 * LoRA adapter with GRPO (stage 3). A stage switched off by config.stages ends the child with
 * 'not_configured', saying which. In scheduled retraining the previous run's environment is reused
 * (validated under this run's config; synthesized anew if it fails) and its adapter is continued
 * (this run's iterations start from its weights).
 */

export const capabilityStatusQuery = defineQuery<CapabilityStatus>('status');

export async function capabilityWorkflow(input: CapabilityInput): Promise<CapabilityResult> {
  const { runId, config, capability } = input;
  let status: CapabilityStatus = 'pending';
  setHandler(capabilityStatusQuery, () => status);
  const done = (s: CapabilityStatus, detail: string, extra: Partial<CapabilityResult> = {}): CapabilityResult => {
    status = s;
    return { name: capability.name, status: s, detail, ...extra };
  };

  if (!config.stages.synthesis) return done('not_configured', 'stages 2–4 not configured (stages.synthesis: false)');

  // Each call carries a one-line summary the Temporal UI shows next to the activity.
  const cpuOptions = longActivity(config, 'generator', input.timeouts);
  const cpu = (summary: string) => proxyActivities<CpuActivities>({ ...cpuOptions, summary });
  const from = input.previousRunId ?? '(unnamed)';
  const reusedFrom: NonNullable<CapabilityResult['reusedFrom']> = {};
  let environment: ArtifactRef | undefined;
  let validation: CapabilityValidation | undefined;
  let how: string;
  // The previous run's environment, checked again: this run's config (calibration band, seeds) may differ.
  let notReused = '';
  if (input.previousEnvironment) {
    status = 'validating';
    try {
      const v = await cpu(
        `validate ${capability.name} env of run ${from} under this config (checks 1–6)`,
      ).validateEnvironment({
        runId,
        config,
        capability,
        environment: input.previousEnvironment,
      });
      if (v.ok) {
        environment = input.previousEnvironment;
        validation = { reusedFrom: from, ...v };
      } else notReused = `; the environment of run ${from} failed validation: ${v.reason ?? 'no reason given'}`;
    } catch (err) {
      if (isCancellation(err)) throw err;
      notReused = `; the environment of run ${from} could not be validated: ${failureMessage(err)}`;
    }
  }

  if (environment) {
    reusedFrom.environment = from;
    how = `environment reused from run ${from}`;
  } else {
    status = 'synthesizing';
    const synthesized = await cpu(
      `synthesize ${capability.name} env (≤ ${config.synthesis.maxAttempts} attempt(s))`,
    ).synthesizeEnvironment({
      runId,
      config,
      capability,
      analysis: input.analysis,
    });
    environment = synthesized.ref;
    if (synthesized.status === 'synthesis_failed' || !environment) {
      return done(
        'failed',
        `synthesis failed after ${synthesized.attempts} attempt(s): ${synthesized.lastFailure ?? 'no accepted environment'}${notReused}`,
        {
          validation: synthesized,
        },
      );
    }
    how = `${synthesized.status === 'reference_fallback' ? `reference env ${synthesized.reference}` : `synthesized in ${synthesized.attempts} attempt(s)`}${notReused}`;
    status = 'validating';
    const v = await cpu(`validate ${capability.name} env (checks 1–6)`).validateEnvironment({
      runId,
      config,
      capability,
      environment,
    });
    validation = { ...synthesized, ...v };
    if (!v.ok)
      return done('failed', `environment failed validation: ${v.reason ?? 'no reason given'}`, {
        environment,
        validation,
      });
  }
  const reused = () => (Object.keys(reusedFrom).length ? { reusedFrom } : {});

  if (!config.stages.training) {
    return done('not_configured', `environment ready (${how}); stages 3–4 not configured (stages.training: false)`, {
      environment,
      validation,
      ...reused(),
    });
  }
  status = 'training';
  const env = environment;
  const t = config.training;
  const train = (initAdapter?: ArtifactRef) => {
    const summary = `GRPO ${capability.name}: ${t.iterations} iterations × ${t.groupsPerIteration} groups × ${t.rolloutsPerGroup} rollouts${initAdapter ? `, continuing run ${from}'s adapter` : ''}`;
    return proxyActivities<GpuActivities>({ ...gpuActivity(input.timeouts), summary }).trainAdapter({
      runId,
      config,
      capability,
      environment: env,
      ...(initAdapter ? { initAdapter } : {}),
    });
  };
  let training: Awaited<ReturnType<typeof train>>;
  let notContinued = '';
  if (input.previousAdapter) {
    try {
      training = await train(input.previousAdapter);
      reusedFrom.adapter = from;
    } catch (err) {
      // The trainer refuses an adapter this run's LoRA config cannot continue (rank, scale,
      // layers changed) or cannot find: this run trains a fresh one and says why.
      if (!refusedInitAdapter(err)) throw err;
      notContinued = `; the adapter of run ${from} could not be continued: ${failureMessage(err)}`;
      training = await train();
    }
  } else {
    training = await train();
  }
  const what = reusedFrom.adapter ? `adapter continued from run ${from}` : 'adapter trained';
  return done('trained', `${what} (${how})${notContinued}`, {
    environment,
    validation,
    adapter: training.adapter,
    training,
    ...reused(),
  });
}

/** The trainer's non-retryable `init_adapter_uri: …` ConfigError (see trainer/trace_trainer/grpo.py). */
function refusedInitAdapter(err: unknown): boolean {
  const cause = err instanceof ActivityFailure ? err.cause : undefined;
  return (
    cause instanceof ApplicationFailure && cause.type === 'ConfigError' && cause.message.startsWith('init_adapter_uri:')
  );
}
