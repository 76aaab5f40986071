import { z } from 'zod';
import { IntervalSchema } from './evaluation.js';

/**
 * Promotion of a newly trained agent over the current best, and the lineage that records which run
 * produced which agent. Pure: the retraining workflow calls it with numbers from one evaluation.
 */
export const PromotionPolicySchema = z.object({
  /** The candidate must beat the current agent's pass rate by at least this much (absolute). */
  margin: z.number().min(0).max(1).default(0.02),
  /** Also require the lower bound of the paired delta's 95% interval to be above 0. */
  requireSignificant: z.boolean().default(false),
});
export type PromotionPolicy = z.infer<typeof PromotionPolicySchema>;

/** What an agent is, enough to serve it again: base model, plus adapters and gate when trained. */
export const AgentSpecSchema = z.object({
  id: z.string().min(1),
  kind: z.enum(['base', 'trace', 'adapter', 'prompt_only']),
  model: z.string().optional(),
  baseURL: z.string().optional(),
  /** Adapters by capability (artifact URIs of their final checkpoints). */
  adapters: z.array(z.object({ capability: z.string(), uri: z.string() })).default([]),
  gateUri: z.string().optional(),
  systemPromptSuffix: z.string().optional(),
});
export type AgentSpec = z.infer<typeof AgentSpecSchema>;

export const CandidateResultSchema = z.object({
  agent: AgentSpecSchema,
  passRate: z.number().min(0).max(1),
  tasks: z.number().int().nonnegative(),
});
export type CandidateResult = z.infer<typeof CandidateResultSchema>;

export const PromotionDecisionSchema = z.object({
  promote: z.boolean(),
  delta: z.number().nullable(),
  reason: z.string(),
});
export type PromotionDecision = z.infer<typeof PromotionDecisionSchema>;

/**
 * Promote iff the candidate beats the current agent by the margin, both measured on the same
 * held-out tasks in the same run. `deltaInterval` is the paired interval of candidate − current.
 */
export function decidePromotion(
  candidate: CandidateResult,
  current: CandidateResult,
  policy: PromotionPolicy,
  deltaInterval?: z.infer<typeof IntervalSchema>,
): PromotionDecision {
  if (candidate.tasks === 0) return { promote: false, delta: null, reason: 'candidate was evaluated on no tasks' };
  if (current.tasks === 0) return { promote: false, delta: null, reason: 'current agent was evaluated on no tasks' };
  const delta = candidate.passRate - current.passRate;
  const pct = (x: number) => `${(x * 100).toFixed(1)} pp`;
  // Tolerance only absorbs float error in the subtraction, so "exactly the margin" counts as beating it.
  if (delta <= 0 || delta + 1e-12 < policy.margin) {
    return { promote: false, delta, reason: `delta ${pct(delta)} below margin ${pct(policy.margin)}` };
  }
  if (policy.requireSignificant) {
    const low = deltaInterval?.low;
    if (low === null || low === undefined)
      return { promote: false, delta, reason: 'significance required but the delta has no interval' };
    if (low <= 0)
      return { promote: false, delta, reason: `delta ${pct(delta)} not significant (95% CI low ${pct(low)})` };
  }
  return { promote: true, delta, reason: `delta ${pct(delta)} ≥ margin ${pct(policy.margin)}` };
}

export const LineageRecordSchema = z.object({
  runId: z.string(),
  agent: AgentSpecSchema,
  /** The agent that was current when this run started (what it was compared against). */
  parentAgentId: z.string().nullable(),
  /** The candidate's pass rate on held-out tasks; null when it could not be evaluated. */
  passRate: z.number().min(0).max(1).nullable(),
  parentPassRate: z.number().min(0).max(1).nullable(),
  promoted: z.boolean(),
  reason: z.string(),
  /** ISO time, passed in by the caller (workflow time), never read from a clock here. */
  at: z.string(),
});
export type LineageRecord = z.infer<typeof LineageRecordSchema>;

export const LineageSchema = z.object({
  current: AgentSpecSchema.nullable(),
  records: z.array(LineageRecordSchema),
});
export type Lineage = z.infer<typeof LineageSchema>;

export const emptyLineage = (): Lineage => ({ current: null, records: [] });

/** Appends a run's outcome; the current agent changes only when the record says promoted. */
export function recordOutcome(lineage: Lineage, record: LineageRecord): Lineage {
  if (lineage.records.some((r) => r.runId === record.runId)) {
    // A retried activity re-recording the same run must not duplicate it.
    return lineage;
  }
  return {
    current: record.promoted ? record.agent : lineage.current,
    records: [...lineage.records, record],
  };
}

/** The chain of promoted agents, oldest first: which run produced each agent that became current. */
export function promotedChain(lineage: Lineage): LineageRecord[] {
  return lineage.records.filter((r) => r.promoted);
}
