import { z } from 'zod';
import { ArtifactRefSchema } from './artifact-ref.js';
import type { AgentSpec, CandidateResult, Lineage } from './promotion.js';

/**
 * Scheduled retraining on fresh rollouts: what a new run takes over from earlier runs, and which
 * evaluated variants are compared for promotion. Pure, so the retraining workflow can use it.
 */

/** Artifacts of one finished run that a later run can start from. */
export const RunArtifactsSchema = z.object({
  runId: z.string(),
  dictionary: ArtifactRefSchema.optional(),
  capabilities: z
    .array(
      z.object({
        name: z.string(),
        environment: ArtifactRefSchema.optional(),
        adapter: ArtifactRefSchema.optional(),
      }),
    )
    .default([]),
});
export type RunArtifacts = z.infer<typeof RunArtifactsSchema>;

/** What a retraining run is handed: the latest run's artifacts and the agent currently promoted. */
export const PreviousRunSchema = z.object({
  artifacts: RunArtifactsSchema,
  current: z.custom<AgentSpec>().nullable(),
  currentPassRate: z.number().nullable(),
});
export type PreviousRun = z.infer<typeof PreviousRunSchema>;

/** The artifacts a finished pipeline run left, read from its result (unknown parts ignored). */
export function runArtifacts(result: {
  runId: string;
  analysis?: { dictionary?: z.infer<typeof ArtifactRefSchema> };
  capabilities?: readonly {
    name: string;
    environment?: z.infer<typeof ArtifactRefSchema>;
    adapter?: z.infer<typeof ArtifactRefSchema>;
  }[];
}): RunArtifacts {
  return {
    runId: result.runId,
    ...(result.analysis?.dictionary ? { dictionary: result.analysis.dictionary } : {}),
    capabilities: (result.capabilities ?? []).map((c) => ({
      name: c.name,
      ...(c.environment ? { environment: c.environment } : {}),
      ...(c.adapter ? { adapter: c.adapter } : {}),
    })),
  };
}

/**
 * Per capability selected in the new run: reuse the previous environment when it exists, continue
 * the previous adapter from its checkpoint when it exists, otherwise start fresh (a new capability).
 */
export function reusePlan(previous: RunArtifacts | undefined, selected: readonly string[]) {
  const byName = new Map(previous?.capabilities.map((c) => [c.name, c]) ?? []);
  return selected.map((name) => {
    const p = byName.get(name);
    return {
      name,
      environment: p?.environment,
      adapter: p?.adapter,
      isNew: !p,
    };
  });
}

/** The run-to-run state of a schedule: the lineage plus the latest run's artifacts. */
export function previousRun(lineage: Lineage, latest: RunArtifacts | undefined): PreviousRun | undefined {
  if (!latest) return undefined;
  const currentRecord = [...lineage.records].reverse().find((r) => r.promoted);
  return { artifacts: latest, current: lineage.current, currentPassRate: currentRecord?.passRate ?? null };
}

export interface EvaluatedVariant {
  name: string;
  kind: 'base' | 'trace' | 'adapter' | 'prompt_only';
  passRate: number | null;
  n: number;
}

/**
 * Which two evaluated variants a promotion compares: the TRACE agent this run trained (candidate)
 * against the current agent measured in the same run (the variant named 'current', or the base when
 * no trained agent has been promoted yet). Null, with the reason, when either was not evaluated.
 */
export function promotionPair(
  variants: readonly EvaluatedVariant[],
  current: AgentSpec | null,
  candidateAgent: AgentSpec,
): { candidate: CandidateResult; current: CandidateResult } | { reason: string } {
  const rate = (v: EvaluatedVariant | undefined) => (v && v.passRate !== null && v.n > 0 ? v.passRate : null);
  const trace = variants.find((v) => v.kind === 'trace' && v.name !== 'current');
  if (rate(trace) === null) return { reason: 'no TRACE agent was evaluated in this run' };
  const currentIsBase = !current || current.kind === 'base';
  const reference = currentIsBase
    ? variants.find((v) => v.kind === 'base')
    : variants.find((v) => v.name === 'current');
  if (rate(reference) === null)
    return { reason: `the current agent (${current?.id ?? 'base'}) was not evaluated in this run` };
  return {
    candidate: { agent: candidateAgent, passRate: rate(trace)!, tasks: trace!.n },
    current: {
      agent: current ?? { id: 'base', kind: 'base', adapters: [] },
      passRate: rate(reference)!,
      tasks: reference!.n,
    },
  };
}
