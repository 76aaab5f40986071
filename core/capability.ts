import { z } from 'zod';
import { ArtifactRefSchema } from './artifact-ref.js';
import { UsageSchema } from './trajectory.js';

/** Stage 1 boundary objects: the capability dictionary, per-pass labels and the selection result. */

export const CAPABILITY_NAME = /^[a-z][a-z0-9]*(_[a-z0-9]+)*$/;

export const CapabilitySchema = z.object({
  name: z.string().regex(CAPABILITY_NAME, 'must be snake_case (e.g. verify_preconditions)').max(64),
  description: z
    .string()
    .min(20, 'must be 2–3 sentences that tell LACKING from PRESENT')
    .max(1000, 'must be 2–3 sentences, not an essay'),
});
export type Capability = z.infer<typeof CapabilitySchema>;

/** A capability stages 2–4 work on, and whether it came from the config rather than stage 1. */
export type CapabilityToTrain = Capability & { requestedByConfig: boolean };

/**
 * Stage 1's selection, then the config's requested capabilities it did not already select: a
 * requested capability never counts as selected, and one stage 1 also selected is trained once.
 */
export function capabilitiesToTrain(
  selected: readonly Capability[],
  requested: readonly Capability[],
): CapabilityToTrain[] {
  const names = new Set(selected.map((c) => c.name));
  const extra = requested.filter((c) => !names.has(c.name) && names.add(c.name));
  return [
    ...selected.map((c) => ({ ...c, requestedByConfig: false })),
    ...extra.map((c) => ({ ...c, requestedByConfig: true })),
  ];
}

/** 'Verify Preconditions' → 'verify_preconditions': a spelling fix, not a judgement, so no re-ask for it. */
export function snakeCase(name: unknown): unknown {
  if (typeof name !== 'string') return name;
  return name
    .trim()
    .replace(/([a-z0-9])([A-Z])/g, '$1_$2')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '_')
    .replace(/^_+|_+$/g, '');
}

export function sentenceCount(text: string): number {
  return text
    .trim()
    .split(/(?<=[.!?])\s+/)
    .filter((s) => /\w/.test(s)).length;
}

/**
 * What the analyst must return from discovery (before dedupe and the cap): 2–3 sentence
 * descriptions, and names that are general skills, so a name may not contain one of the
 * environment's tool names (e.g. `cancel_order_correctly` is a domain rule, not a capability).
 */
export function discoveryOutputSchema(toolNames: readonly string[], opts: { sentences?: boolean } = {}) {
  const checkSentences = opts.sentences ?? true;
  const tools = [...toolNames].filter((t) => t.length >= 4).sort();
  const named = z.object({
    name: z.preprocess(snakeCase, CapabilitySchema.shape.name),
    description: CapabilitySchema.shape.description,
  });
  const capability = named.superRefine((c, ctx) => {
    const n = sentenceCount(c.description);
    if (checkSentences && (n < 2 || n > 3))
      ctx.addIssue({ code: 'custom', path: ['description'], message: `must be 2–3 sentences, got ${n}` });
    const tool = tools.find((t) => c.name.includes(t));
    if (tool)
      ctx.addIssue({
        code: 'custom',
        path: ['name'],
        message: `names the tool '${tool}'; name the general skill instead`,
      });
  });
  return z.object({ capabilities: z.array(capability).min(1) });
}
export type DiscoveryOutput = z.infer<ReturnType<typeof discoveryOutputSchema>>;

export const CapabilityDictionarySchema = z.object({
  capabilities: z.array(CapabilitySchema),
  /** Trajectories the analyst saw (ids), so a reader knows what the dictionary was built from. */
  basedOn: z.object({ successes: z.array(z.string()), failures: z.array(z.string()) }),
  model: z.string(),
  /** Rules the analyst's output was accepted without meeting (shown in the report). */
  warnings: z.array(z.string()).optional(),
});
export type CapabilityDictionary = z.infer<typeof CapabilityDictionarySchema>;

export const LabelSchema = z.enum(['NA', 'PRESENT', 'LACKING']);
export type Label = z.infer<typeof LabelSchema>;

/**
 * The schema one labeling call must satisfy for a given dictionary: every capability exactly once,
 * no unknown names. Built per dictionary so the JSON schema sent to the LLM names the keys.
 */
export function labelOutputSchema(capabilities: readonly Capability[]) {
  const shape: Record<string, typeof LabelSchema> = {};
  for (const c of capabilities) shape[c.name] = LabelSchema;
  return z.object({ labels: z.strictObject(shape) });
}

export const TrajectoryLabelsSchema = z.object({
  trajectoryId: z.string(),
  labels: z.record(z.string(), LabelSchema),
});
export type TrajectoryLabels = z.infer<typeof TrajectoryLabelsSchema>;

export const ItemFailureSchema = z.object({ trajectoryId: z.string(), error: z.string() });
export type ItemFailure = z.infer<typeof ItemFailureSchema>;

export const PassLabelsSchema = z.object({
  pass: z.number().int().nonnegative(),
  items: z.array(TrajectoryLabelsSchema),
  failedItems: z.array(ItemFailureSchema),
  usage: UsageSchema,
});
export type PassLabels = z.infer<typeof PassLabelsSchema>;

/** Outcome of one trajectory as the statistics see it (y ∈ {0,1}). */
export const OutcomeSchema = z.object({ trajectoryId: z.string(), success: z.boolean() });
export type Outcome = z.infer<typeof OutcomeSchema>;

const nullableRate = z.number().min(0).max(1).nullable();

export const PassStatSchema = z.object({
  pass: z.number().int().nonnegative(),
  /** ER⁺ = #LACKING∧y=1 / #(label≠NA)∧y=1; null when the denominator is 0. */
  erPlus: nullableRate,
  /** ER⁻ = #LACKING∧y=0 / #(label≠NA)∧y=0; null when the denominator is 0. */
  erMinus: nullableRate,
  /** Δ = ER⁻ − ER⁺; null when either rate is undefined. */
  delta: z.number().min(-1).max(1).nullable(),
  /** Cov = #LACKING∧y=0 / #(y=0); null when there are no failures. */
  coverage: nullableRate,
  selected: z.boolean(),
  /** Why a value is null (no successes, no failures, all NA), when one is. */
  reason: z.string().optional(),
  counts: z.object({
    lackingSuccess: z.number().int(),
    applicableSuccess: z.number().int(),
    lackingFailure: z.number().int(),
    applicableFailure: z.number().int(),
    failures: z.number().int(),
    successes: z.number().int(),
  }),
});
export type PassStat = z.infer<typeof PassStatSchema>;

export const CapabilityStatsSchema = z.object({
  name: z.string(),
  passes: z.array(PassStatSchema),
  passesSelected: z.number().int().nonnegative(),
  /** Mean and population std over the passes where the value is defined; null when none is. */
  meanDelta: z.number().nullable(),
  stdDelta: z.number().nullable(),
  meanCoverage: z.number().nullable(),
  stdCoverage: z.number().nullable(),
  selected: z.boolean(),
  notes: z.array(z.string()),
});
export type CapabilityStats = z.infer<typeof CapabilityStatsSchema>;

export const SelectedCapabilitySchema = z.object({
  name: z.string(),
  description: z.string(),
  meanDelta: z.number(),
  meanCoverage: z.number(),
  passesSelected: z.number().int(),
  /** Failed trajectories most often labeled LACKING across passes (ties by id). */
  examples: z.array(z.object({ trajectoryId: z.string(), lackingPasses: z.number().int() })),
});
export type SelectedCapability = z.infer<typeof SelectedCapabilitySchema>;

export const Stage1ResultSchema = z.object({
  runId: z.string(),
  env: z.string(),
  thresholds: z.object({
    delta: z.number(),
    coverage: z.number(),
    passes: z.number().int(),
    minPassesSelected: z.number().int(),
  }),
  counts: z.object({
    trajectories: z.number().int(),
    successes: z.number().int(),
    failures: z.number().int(),
    /** Episodes ended by infrastructure errors: excluded from the statistics. */
    errored: z.number().int(),
    labelFailures: z.number().int(),
  }),
  dictionary: CapabilityDictionarySchema,
  rolloutRefs: z.array(ArtifactRefSchema),
  dictionaryRef: ArtifactRefSchema,
  passRefs: z.array(ArtifactRefSchema),
  stats: z.array(CapabilityStatsSchema),
  selected: z.array(SelectedCapabilitySchema),
  summary: z.string(),
});
export type Stage1Result = z.infer<typeof Stage1ResultSchema>;
