import { z } from 'zod';
import { TerminationSchema, UsageSchema } from './trajectory.js';
import {
  bootstrapMeanInterval,
  newcombeDifference,
  passHatKForTask,
  tInterval,
  wilsonInterval,
  type Interval,
} from './stats.js';

/**
 * Evaluation of agent variants on the target's held-out tasks: the per-episode record each
 * evaluation activity stores, and the pure aggregation into pass rates with intervals.
 */
export const VariantKindSchema = z.enum(['base', 'trace', 'adapter', 'prompt_only']);
export type VariantKind = z.infer<typeof VariantKindSchema>;

export const VariantSpecSchema = z.object({
  name: z
    .string()
    .regex(/^[A-Za-z0-9_.:-]+$/, 'variant name: letters, digits, _ . : - only (it is part of a store key)'),
  kind: VariantKindSchema,
  /** OpenAI-compatible endpoint serving this variant; default: the policy role's endpoint. */
  baseURL: z.string().url().optional(),
  /** Model id at that endpoint (e.g. the adapter's served name); default: the policy role's model. */
  model: z.string().optional(),
  /** Appended to the environment's system prompt (the prompt-only baseline). */
  systemPromptSuffix: z.string().optional(),
  /** For kind 'adapter': the capability whose adapter this is. */
  capability: z.string().optional(),
  /** Without a baseURL: evaluateRun serves base + this gate (or this PEFT adapter directory) itself. */
  gateUri: z.string().optional(),
  adapterUri: z.string().optional(),
});
export type VariantSpec = z.infer<typeof VariantSpecSchema>;

export const EvalEpisodeSchema = z.object({
  variant: z.string(),
  domain: z.string(),
  taskId: z.string(),
  trial: z.number().int().nonnegative(),
  success: z.boolean(),
  reward: z.number(),
  termination: TerminationSchema,
  steps: z.number().int().nonnegative(),
  usage: UsageSchema,
  durationMs: z.number().nonnegative(),
  model: z.string(),
  temperature: z.number(),
  /** Full trajectory in the artifact store (URI), for reading why a task failed. */
  trajectoryUri: z.string().optional(),
  /**
   * The task's categories when the env names them in its reward details (ToolSandbox: single /
   * multiple tool call, state dependency, …; a task may have several), for the per-category breakdown.
   */
  categories: z.array(z.string()).optional(),
});
export type EvalEpisode = z.infer<typeof EvalEpisodeSchema>;

export const IntervalSchema = z.object({
  estimate: z.number().nullable(),
  low: z.number().nullable(),
  high: z.number().nullable(),
  method: z.enum(['wilson', 't', 'bootstrap', 'newcombe', 'none']),
  n: z.number().int().nonnegative(),
});

const PassStatsSchema = z.object({
  tasks: z.number().int().nonnegative(),
  episodes: z.number().int().nonnegative(),
  successes: z.number().int().nonnegative(),
  meanReward: z.number().nullable(),
  /**
   * Mean episode reward with a 95% t interval over episodes (ToolSandbox's mean similarity); optional
   * so summaries stored before it was added still parse.
   */
  meanRewardInterval: IntervalSchema.optional(),
  /** Wilson over tasks when greedy (1 trial); t over per-trial pass rates when trials ≥ 2. */
  passRate: IntervalSchema,
  /** τ² pass^k for k = 1..trials (only tasks with all trials count). */
  passHatK: z.array(z.object({ k: z.number().int().positive(), value: z.number() })),
});
export type PassStats = z.infer<typeof PassStatsSchema>;

export const TaskOutcomeSchema = z.object({
  domain: z.string(),
  taskId: z.string(),
  trials: z.number().int().nonnegative(),
  successes: z.number().int().nonnegative(),
});
export type TaskOutcome = z.infer<typeof TaskOutcomeSchema>;

export const EvaluationSummarySchema = z.object({
  variant: VariantSpecSchema,
  split: z.string(),
  trials: z.number().int().positive(),
  temperature: z.number(),
  overall: PassStatsSchema,
  perDomain: z.array(PassStatsSchema.extend({ domain: z.string() })),
  /**
   * The same per task category (episodes whose env named categories; one episode counts in each of
   * its categories); empty when no episode had any. ToolSandbox: mean similarity and perfect count.
   */
  perCategory: z.array(PassStatsSchema.extend({ category: z.string() })).default([]),
  /** Per-task outcomes, so deltas between variants can be paired on the same tasks. */
  perTask: z.array(TaskOutcomeSchema),
  terminations: z.record(z.string(), z.number().int().nonnegative()),
  usage: UsageSchema,
});
export type EvaluationSummary = z.infer<typeof EvaluationSummarySchema>;

function taskOutcomes(episodes: readonly EvalEpisode[]): TaskOutcome[] {
  const byTask = new Map<string, TaskOutcome>();
  for (const e of episodes) {
    const key = `${e.domain}\u0000${e.taskId}`;
    const t = byTask.get(key) ?? { domain: e.domain, taskId: e.taskId, trials: 0, successes: 0 };
    t.trials += 1;
    if (e.success) t.successes += 1;
    byTask.set(key, t);
  }
  return [...byTask.values()].sort((a, b) =>
    a.domain === b.domain ? compareIds(a.taskId, b.taskId) : a.domain < b.domain ? -1 : 1,
  );
}

/** Numeric-aware id order ('2' before '10'), stable across runs. */
export function compareIds(a: string, b: string): number {
  return a.localeCompare(b, 'en', { numeric: true });
}

function passStats(episodes: readonly EvalEpisode[], trials: number): PassStats {
  const outcomes = taskOutcomes(episodes);
  const successes = episodes.filter((e) => e.success).length;
  let passRate: Interval;
  if (trials <= 1) {
    passRate = wilsonInterval(successes, episodes.length);
  } else {
    const perTrial: number[] = [];
    for (let t = 0; t < trials; t++) {
      const ofTrial = episodes.filter((e) => e.trial === t);
      if (ofTrial.length > 0) perTrial.push(ofTrial.filter((e) => e.success).length / ofTrial.length);
    }
    passRate = tInterval(perTrial);
    // The point estimate is over all episodes, so it agrees with successes / episodes.
    if (episodes.length > 0) passRate = { ...passRate, estimate: successes / episodes.length };
  }
  const complete = outcomes.filter((o) => o.trials === trials);
  const passHatK = complete.length
    ? Array.from({ length: trials }, (_, i) => i + 1).map((k) => ({
        k,
        value: complete.reduce((s, o) => s + passHatKForTask(o.successes, trials, k), 0) / complete.length,
      }))
    : [];
  return {
    tasks: outcomes.length,
    episodes: episodes.length,
    successes,
    meanReward: episodes.length ? episodes.reduce((s, e) => s + e.reward, 0) / episodes.length : null,
    meanRewardInterval: tInterval(episodes.map((e) => e.reward)),
    passRate,
    passHatK,
  };
}

export function summarizeEvaluation(
  variant: VariantSpec,
  split: string,
  trials: number,
  temperature: number,
  episodes: readonly EvalEpisode[],
): EvaluationSummary {
  const domains = [...new Set(episodes.map((e) => e.domain))].sort();
  const terminations: Record<string, number> = {};
  for (const e of episodes) terminations[e.termination] = (terminations[e.termination] ?? 0) + 1;
  return {
    variant,
    split,
    trials,
    temperature,
    overall: passStats(episodes, trials),
    perDomain: domains.map((domain) => ({
      domain,
      ...passStats(
        episodes.filter((e) => e.domain === domain),
        trials,
      ),
    })),
    perCategory: [...new Set(episodes.flatMap((e) => e.categories ?? []))].sort().map((category) => ({
      category,
      ...passStats(
        episodes.filter((e) => e.categories?.includes(category)),
        trials,
      ),
    })),
    perTask: taskOutcomes(episodes),
    terminations,
    usage: {
      calls: episodes.reduce((s, e) => s + e.usage.calls, 0),
      promptTokens: episodes.reduce((s, e) => s + e.usage.promptTokens, 0),
      completionTokens: episodes.reduce((s, e) => s + e.usage.completionTokens, 0),
    },
  };
}

/**
 * Difference in pass rate (variant − reference). Paired over the tasks both evaluated (bootstrap
 * over tasks of per-task success-rate differences, seeded); Newcombe's unpaired interval when they
 * share no task.
 */
export function passRateDelta(
  variant: readonly TaskOutcome[],
  reference: readonly TaskOutcome[],
  domain?: string,
  seed = 1,
): Interval {
  const pick = (xs: readonly TaskOutcome[]) =>
    xs.filter((o) => o.trials > 0 && (domain === undefined || o.domain === domain));
  const v = pick(variant);
  const r = new Map(pick(reference).map((o) => [`${o.domain}\u0000${o.taskId}`, o]));
  const diffs: number[] = [];
  for (const o of v) {
    const ref = r.get(`${o.domain}\u0000${o.taskId}`);
    if (ref) diffs.push(o.successes / o.trials - ref.successes / ref.trials);
  }
  if (diffs.length > 0) return bootstrapMeanInterval(diffs, { seed });
  const sum = (xs: TaskOutcome[], f: (o: TaskOutcome) => number) => xs.reduce((s, o) => s + f(o), 0);
  const refs = [...r.values()];
  return newcombeDifference(
    sum(v, (o) => o.successes),
    sum(v, (o) => o.trials),
    sum(refs, (o) => o.successes),
    sum(refs, (o) => o.trials),
  );
}

/**
 * The prompt-only baseline's addition to the system prompt: the selected capabilities, described
 * as in the dictionary, so the report can show whether training beats simply telling the agent.
 */
export function promptOnlySuffix(capabilities: readonly { name: string; description: string }[]): string {
  const items = capabilities.map((c) => `- ${c.name.replace(/_/g, ' ')}: ${c.description.trim()}`).join('\n');
  return `\n\n<capabilities>\nAgents like you often fail these tasks for lack of the capabilities below. Apply each of them carefully:\n${items}\n</capabilities>`;
}

/** A store-safe, unique key part for a task id (τ² ids may hold spaces, slashes or brackets). */
export function taskKey(taskId: string): string {
  const safe = taskId.replace(/[^A-Za-z0-9_.-]/g, '_').slice(0, 80);
  if (safe === taskId) return safe;
  let h = 2166136261;
  for (const ch of taskId) h = Math.imul(h ^ ch.codePointAt(0)!, 16777619) >>> 0;
  return `${safe}~${h.toString(16).padStart(8, '0')}`;
}

/** Seeded generator envs are evaluated on seeds disjoint from the rollout seeds (0..n−1). */
export const EVALUATION_SEED_OFFSET = 1_000_000;
