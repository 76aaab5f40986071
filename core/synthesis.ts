import { z } from 'zod';
import { SandboxLimitsSchema } from './sandbox.js';

/**
 * Stage 2 boundary objects (the generator's manifest, a validation verdict, one synthesis
 * attempt, the activity result) and the pure check-threshold logic. No I/O: safe for workflows.
 */
export const SynthesisConfigSchema = z
  .object({
    maxAttempts: z
      .number()
      .int()
      .min(0)
      .default(5)
      .describe(
        'generator attempts per capability, repairs included; 0 = the reference library directly (needs allowReferenceFallback)',
      ),
    allowReferenceFallback: z.boolean().default(false).describe('offer a reference-library env when no attempt passes'),
    runner: z
      .enum(['sandbox', 'in-process'])
      .default('sandbox')
      .describe('in-process is for developing trusted modules only'),
    sandbox: SandboxLimitsSchema.extend({
      budgetMs: SandboxLimitsSchema.shape.budgetMs.default(600_000),
      cpuSeconds: SandboxLimitsSchema.shape.cpuSeconds.default(300),
      allowWeakIsolation: z
        .boolean()
        .default(false)
        .describe(
          'run generated code even where the sandbox has no network and file-system namespaces (no bubblewrap); the verdict warns',
        ),
    })
      .strict()
      .prefault({})
      .describe('limits of each validation sandbox; allowWeakIsolation applies to every sandbox of generated code'),
    typecheck: z.boolean().default(true).describe('check 1 also type-checks the module against the SDK (tsc)'),
    references: z
      .number()
      .int()
      .min(0)
      .max(2)
      .default(2)
      .describe('reference environments shown to the generator as few-shot examples'),
    seeds: z
      .object({
        determinism: z.number().int().positive().default(100),
        solvability: z.number().int().positive().default(50),
        triviality: z
          .number()
          .int()
          .positive()
          .default(16)
          .describe(
            "seeds the trivial policies play, in the trainer's batches (training.groupsPerIteration seeds × rolloutsPerGroup copies)",
          ),
        verifier: z
          .number()
          .int()
          .positive()
          .default(20)
          .describe('seeds whose gold is replayed and perturbed to test the verifier'),
      })
      .strict()
      .prefault({}),
    minDistinct: z.number().min(0).max(1).default(0.95),
    minGoldReward: z.number().min(0).max(1).default(0.99),
    maxTrivialReward: z.number().min(0).max(1).default(0.2),
    minMutationDetection: z
      .number()
      .min(0)
      .max(1)
      .default(0.8)
      .describe(
        'share of seeds on which gold with one tool call dropped, and gold with one argument changed, must each score lower than gold',
      ),
    mutationMargin: z
      .number()
      .min(0)
      .max(1)
      .default(0.1)
      .describe(
        'how far below gold a perturbed gold solution must score to count as lower (a stop 0.01 below gold still pays what it skips)',
      ),
    maxMutationsPerSeed: z
      .number()
      .int()
      .positive()
      .default(24)
      .describe(
        'drop-step and change-argument perturbations of gold played per seed in the verifier check (and as many stops after part of gold, apart)',
      ),
    maxMutationEscapes: z
      .number()
      .int()
      .min(0)
      .default(0)
      .describe(
        'plays, in total over the verifier check, of a perturbation class that scores lower on most seeds but not on this one; and seeds where a stop after part of gold pays as gold does while a later drop does not',
      ),
    calibration: z
      .object({
        low: z.number().min(0).max(1).default(0.2),
        high: z.number().min(0).max(1).default(0.6),
        minInformative: z
          .number()
          .min(0)
          .max(1)
          .default(0.5)
          .describe('share of K-rollout groups with non-constant reward'),
        groups: z
          .number()
          .int()
          .positive()
          .default(4)
          .describe(
            "seeds the base policy plays, in the trainer's batches (4: one batch at the default training.groupsPerIteration)",
          ),
        rolloutsPerGroup: z
          .number()
          .int()
          .min(2)
          .optional()
          .describe(
            'K episodes per seed; default training.rolloutsPerGroup (another K lets a module tell calibration from training)',
          ),
        concurrency: z.number().int().positive().default(4).describe('policy requests in flight within a turn'),
        maxSteps: z
          .number()
          .int()
          .positive()
          .optional()
          .describe("turns per episode; default training.maxTurns, the trainer's"),
      })
      .strict()
      .prefault({}),
  })
  .strict();
export type SynthesisConfig = z.infer<typeof SynthesisConfigSchema>;

export const EnvManifestSchema = z.object({
  name: z.string().regex(/^[a-z0-9]+(-[a-z0-9]+)*$/, 'kebab-case'),
  capability: z.string().regex(/^[a-z][a-z0-9_]*$/, 'snake_case'),
  targetEnv: z.string().min(1),
  transferRationale: z.string().min(20),
  description: z.string().min(10),
  tools: z.array(z.string()).min(1).describe('tool names the env exposes (the target names it keeps)'),
});
export type EnvManifest = z.infer<typeof EnvManifestSchema>;

/** What the generator returns: the module and its manifest. */
export const GeneratedEnvSchema = z.object({ manifest: EnvManifestSchema, source: z.string().min(50) });
export type GeneratedEnv = z.infer<typeof GeneratedEnvSchema>;

export const CHECKS = ['compile', 'determinism', 'solvability', 'non_triviality', 'verifier', 'calibration'] as const;
export const CheckNameSchema = z.enum(CHECKS);
export type CheckName = z.infer<typeof CheckNameSchema>;

export const CheckResultSchema = z.object({
  check: CheckNameSchema,
  passed: z.boolean(),
  reason: z.string().optional(),
  metrics: z.record(z.string(), z.number()).default({}),
  /** Concrete evidence for the generator (failing seeds, observations, error text). */
  examples: z.array(z.string()).default([]),
});
export type CheckResult = z.infer<typeof CheckResultSchema>;

export const ValidationVerdictSchema = z.object({
  passed: z.boolean(),
  failedCheck: CheckNameSchema.optional(),
  reason: z.string().optional(),
  checks: z.array(CheckResultSchema),
  durationMs: z.number().nonnegative(),
  /** Loud notes about how validation ran (e.g. generated code ran without full sandbox isolation). */
  warnings: z.array(z.string()).optional(),
});
export type ValidationVerdict = z.infer<typeof ValidationVerdictSchema>;

export const SynthesisAttemptSchema = z.object({
  attempt: z.number().int().positive(),
  manifest: EnvManifestSchema.optional(),
  sourceRef: z.unknown().optional(),
  rolloutsRef: z.unknown().optional(),
  verdict: ValidationVerdictSchema,
  /** Set when the generator itself failed (no module to validate). */
  generatorError: z.string().optional(),
});
export type SynthesisAttempt = z.infer<typeof SynthesisAttemptSchema>;

/** Combines check results (in order, stopping at the first failure) into a verdict. */
export function verdictOf(checks: CheckResult[], durationMs: number, warnings: string[] = []): ValidationVerdict {
  const failed = checks.find((g) => !g.passed);
  return {
    passed: !failed,
    ...(failed ? { failedCheck: failed.check, reason: `${failed.check}: ${failed.reason}` } : {}),
    checks,
    durationMs,
    ...(warnings.length ? { warnings } : {}),
  };
}

export function judgeDeterminism(
  r: { seeds: number; mismatched: number[]; distinct: number },
  c: SynthesisConfig,
): CheckResult {
  const distinctShare = r.distinct / r.seeds;
  const metrics = { seeds: r.seeds, mismatched: r.mismatched.length, distinctShare };
  if (r.mismatched.length) {
    return {
      check: 'determinism',
      passed: false,
      metrics,
      reason: `the same seed gave different instances (seeds ${r.mismatched.slice(0, 5).join(', ')}); draw every random choice from the rng passed to generate and never use Math.random or Date`,
      examples: [],
    };
  }
  if (distinctShare < c.minDistinct) {
    return {
      check: 'determinism',
      passed: false,
      metrics,
      reason: `only ${r.distinct} of ${r.seeds} seeds gave distinct instances (need ≥ ${Math.ceil(c.minDistinct * r.seeds)}); vary the instance with the seed`,
      examples: [],
    };
  }
  return { check: 'determinism', passed: true, metrics, examples: [] };
}

export function judgeSolvability(
  rewards: { seed: number; reward: number; note?: string }[],
  c: SynthesisConfig,
): CheckResult {
  const mean = meanOf(rewards.map((r) => r.reward));
  const bad = rewards.filter((r) => r.reward < c.minGoldReward);
  const metrics = { seeds: rewards.length, meanGoldReward: mean, failingSeeds: bad.length };
  if (mean >= c.minGoldReward) return { check: 'solvability', passed: true, metrics, examples: [] };
  return {
    check: 'solvability',
    passed: false,
    metrics,
    reason: `the gold solution scores ${mean.toFixed(3)} on average over ${rewards.length} seeds (need ≥ ${c.minGoldReward}); ${bad.length} seeds fall short`,
    examples: bad.slice(0, 3).map((r) => `seed ${r.seed}: reward ${r.reward}${r.note ? ` — ${r.note}` : ''}`),
  };
}

export function judgeNonTriviality(means: Record<string, number>, c: SynthesisConfig): CheckResult {
  const high = Object.entries(means).filter(([, m]) => m > c.maxTrivialReward);
  const metrics = Object.fromEntries(Object.entries(means).map(([k, v]) => [`${k}Mean`, v]));
  if (!high.length) return { check: 'non_triviality', passed: true, metrics, examples: [] };
  return {
    check: 'non_triviality',
    passed: false,
    metrics,
    reason: `trivial policies score too high (${high.map(([k, m]) => `${k} ${m.toFixed(3)}`).join(', ')}; need ≤ ${c.maxTrivialReward}); give no credit for a state or answer the agent reaches without exercising the capability`,
    examples: [],
  };
}

/** Ways of perturbing a gold solution the verifier check tries, on every seed. */
export const MUTATIONS = ['stopEarly', 'dropStep', 'changeArgument', 'skipMessages'] as const;
export type Mutation = (typeof MUTATIONS)[number];
/**
 * The perturbations that must score lower. Skipping the messages is only reported: a verifier may
 * rightly reward DB state alone (tool-calling precision, multi-step completion), so a courtesy
 * message nobody checks is no sign of gaming. So is stopping early: gold's last calls may only
 * read; a stop is judged against the drops instead (`paidStops`).
 */
export const GATING_MUTATIONS: readonly Mutation[] = ['dropStep', 'changeArgument'];

export interface VerifierStats {
  seeds: number;
  /** Seeds whose gold solution, replayed identically, scored differently. */
  replayMismatched: number[];
  /** Per perturbation: seeds where it applies (the gold has such a step) and where it scored lower than gold. */
  mutations: Record<Mutation, { applicable: number; lower: number }>;
  /**
   * Per perturbation class (the same step dropped or the same argument changed, e.g.
   * `drop list_orders#0`): plays over all seeds and how many scored lower than gold.
   */
  classes: Record<string, { played: number; lower: number }>;
  /**
   * Seeds where gold stopped without a word after one of its calls was paid for the calls it skips
   * (`paidStopOf`): the verifier pays the stop, not the work (reruns 25–27).
   */
  paidStops: string[];
  /**
   * The rewards of gold without its messages, on seeds where gold speaks: the least of them is what
   * training pays an episode that speaks less than gold at most (`silentEndingCap`).
   */
  silentEndings: number[];
  /** Of those, how many scored below gold: where none did, the env does not require gold's words. */
  silentEndingsBelowGold: number;
  /**
   * The rewards of gold's perturbations that lack one of its calls (a stop, a drop, a changed
   * argument): the least of them is what training pays an episode that lacks one at most
   * (`missingCallCap`).
   */
  missingCalls: number[];
  /**
   * The most any seed's gold speaks, as an index of envs' SPEECH (0 silent, 1 only before its last
   * call, 2 after it): training holds every episode to that (`goldSpeech`), whatever a seed's view
   * says; the least let one silent gold among 20 open every seed to the view (rerun 33).
   */
  goldSpeech: number;
}

/**
 * Classes the verifier treats as required: lower than gold on most of their plays (and on at
 * least two). An honest verifier is a function of the trajectory, so such a class is lower on
 * every play; each play where it is not is an escape.
 */
export function requiredClasses(classes: VerifierStats['classes']): string[] {
  return Object.entries(classes)
    .filter(([, k]) => k.lower >= 2 && k.lower / k.played > 0.5)
    .map(([key]) => key);
}

const MUTATION_TEXT: Record<Mutation, string> = {
  stopEarly: "stopping without a word after part of gold's tool calls",
  dropStep: 'dropping one tool call',
  changeArgument: 'changing one tool-call argument',
  skipMessages: 'skipping the messages to the user',
};

export function judgeVerifier(r: VerifierStats, c: SynthesisConfig): CheckResult {
  const metrics: Record<string, number> = { seeds: r.seeds, replayMismatches: r.replayMismatched.length };
  const weak: string[] = [];
  for (const m of MUTATIONS) {
    const { applicable, lower } = r.mutations[m];
    if (!applicable) continue;
    metrics[`${m}LowerShare`] = lower / applicable;
    metrics[`${m}Seeds`] = applicable;
    if (GATING_MUTATIONS.includes(m) && lower / applicable < c.minMutationDetection)
      weak.push(
        `${MUTATION_TEXT[m]} scored lower than gold on only ${lower} of ${applicable} seeds (need ≥ ${c.minMutationDetection * 100}%)`,
      );
  }
  const required = requiredClasses(r.classes);
  const plays = required.reduce((t, k) => t + r.classes[k].played, 0);
  const escapes = required.reduce((t, k) => t + r.classes[k].played - r.classes[k].lower, 0);
  metrics.requiredClasses = required.length;
  metrics.requiredMutationPlays = plays;
  metrics.mutationEscapes = escapes;
  metrics.paidStops = r.paidStops.length;
  // The least, not the most: a module paying gold without words high on some seeds (rerun 30) or
  // requiring words on a few only sets no higher cap for the rest; paying less is the safe direction.
  if (r.silentEndings.length) {
    metrics.silentEndingCap = Math.min(...r.silentEndings);
    metrics.silentEndingsBelowGold = r.silentEndingsBelowGold;
  }
  if (r.missingCalls.length) metrics.missingCallCap = Math.min(...r.missingCalls);
  metrics.goldSpeech = r.goldSpeech;
  if (escapes > c.maxMutationEscapes)
    weak.push(
      `${escapes} of ${plays} plays of perturbations it otherwise scores lower (${required.filter((k) => r.classes[k].lower < r.classes[k].played).join(', ')}) scored as high as gold (allowed: ${c.maxMutationEscapes}); a required step or argument must lower the reward on every seed, so the reward looks noisy or count-based`,
    );
  // An honest verifier that pays a stop after call k needs none of the later calls, so no drop of one lowers it.
  if (r.paidStops.length > c.maxMutationEscapes)
    weak.push(
      `${MUTATION_TEXT.stopEarly} was paid for what it skips on ${r.paidStops.length} seeds: it scored as high as gold where a play making more of gold's calls scored lower, or above gold without its messages by more than ${c.mutationMargin} (allowed: ${c.maxMutationEscapes})`,
    );
  if (r.replayMismatched.length) {
    return {
      check: 'verifier',
      passed: false,
      metrics,
      reason: `the same trajectory got different rewards when replayed (seeds ${r.replayMismatched.slice(0, 5).join(', ')}); evaluate() must depend only on the instance and the trajectory (no Math.random, Date or call counts)`,
      examples: [],
    };
  }
  if (weak.length) {
    return {
      check: 'verifier',
      passed: false,
      metrics,
      reason: `perturbed gold solutions score as high as gold: ${weak.join('; ')}; reward the steps, arguments and communicated values the capability requires`,
      examples: [],
    };
  }
  return { check: 'verifier', passed: true, metrics, examples: [] };
}

export interface CalibrationStats {
  meanReward: number;
  successRate: number;
  informativeShare: number;
}

/** Mean reward, success rate and the share of groups whose rewards are not all equal. */
export function calibrationStats(groups: readonly { reward: number; success: boolean }[][]): CalibrationStats {
  const all = groups.flat();
  const informative = groups.filter((g) => g.some((x) => x.reward !== g[0].reward)).length;
  return {
    meanReward: meanOf(all.map((x) => x.reward)),
    successRate: meanOf(all.map((x) => (x.success ? 1 : 0))),
    informativeShare: groups.length ? informative / groups.length : 0,
  };
}

export function judgeCalibration(s: CalibrationStats, c: SynthesisConfig): CheckResult {
  const { low, high, minInformative } = c.calibration;
  const metrics = { ...s };
  const problems: string[] = [];
  if (s.meanReward < low || s.meanReward > high)
    problems.push(`mean reward ${s.meanReward.toFixed(3)} outside [${low}, ${high}]`);
  if (s.successRate < low || s.successRate > high)
    problems.push(`success rate ${s.successRate.toFixed(3)} outside [${low}, ${high}]`);
  if (s.informativeShare < minInformative)
    problems.push(
      `only ${(s.informativeShare * 100).toFixed(0)}% of rollout groups have non-constant reward (need ≥ ${minInformative * 100}%)`,
    );
  if (!problems.length) return { check: 'calibration', passed: true, metrics, examples: [] };
  const hint =
    s.meanReward > high
      ? 'make the task harder'
      : s.meanReward < low
        ? 'make the task easier or give partial credit'
        : 'add variety so rollouts of one seed differ';
  return {
    check: 'calibration',
    passed: false,
    metrics,
    reason: `with the base policy: ${problems.join('; ')}; ${hint}`,
    examples: [],
  };
}

function meanOf(xs: readonly number[]): number {
  return xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0;
}
