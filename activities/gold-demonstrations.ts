import { TrajectorySchema, type Trajectory } from '../core/trajectory.js';
import type { Environment } from '../envs/environment.js';
import { inspectInstance } from '../envs/sdk/index.js';
import { goldPolicy, playPolicy } from './synthesis/validate.js';

/**
 * Gold demonstrations for the gate: each seed's reference solution replayed through the capability
 * environment (the same env the adapter trained on) and scored by its own verifier. Only replays the
 * verifier accepts are kept. They stand in for the policy's successful trajectories when a small
 * policy has none (gate.goldDemonstrations > 0); every line says `source: "gold"` so the gate's
 * manifest and the report count them apart from the policy's own successes.
 */
export interface GoldDemonstrations {
  trajectories: (Trajectory & { source: 'gold' })[];
  /** Seeds whose gold replay the verifier did not accept, with the reason. */
  rejected: { seed: number; reason: string }[];
}

export async function goldDemonstrations(
  env: Environment,
  seeds: readonly number[],
  model: string,
): Promise<GoldDemonstrations> {
  const out: GoldDemonstrations = { trajectories: [], rejected: [] };
  const systemPrompt = env.systemPrompt();
  for (const seed of seeds) {
    const started = Date.now();
    const view = await inspectInstance(env, seed);
    const played = await playPolicy(env, seed, goldPolicy(view.gold));
    if (!played.success) {
      out.rejected.push({
        seed,
        reason: played.errors[0] ?? `reward ${played.reward}, termination ${played.termination}`,
      });
      continue;
    }
    const steps = played.messages.filter((m) => m.role === 'assistant').length;
    const trajectory = TrajectorySchema.parse({
      id: `gold-${seed}`,
      env: env.info.name,
      taskId: `seed-${seed}`,
      seed,
      model,
      messages: [{ role: 'system', content: systemPrompt }, ...played.messages],
      reward: played.reward,
      rewardInfo: { reward: played.reward, components: {}, success: true },
      success: true,
      termination: played.termination,
      usage: { promptTokens: 0, completionTokens: 0, calls: 0 },
      steps,
      durationMs: Date.now() - started,
    });
    out.trajectories.push({ ...trajectory, source: 'gold' });
  }
  return out;
}
