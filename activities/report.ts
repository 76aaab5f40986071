import { Context } from '@temporalio/activity';
import { z } from 'zod';
import { PassLabelsSchema, Stage1ResultSchema, type Stage1Result } from '../core/capability.js';
import type { Config } from '../core/config.js';
import { EvaluationSummarySchema } from '../core/evaluation.js';
import { PromotionDecisionSchema } from '../core/promotion.js';
import { assembleReport, formatSummary, type CapabilityRowInput, type ReportInputs } from '../core/report.js';
import { renderReportHtml } from '../core/report-html.js';
import { temporalSettings, workflowUiLink } from '../infra/temporal.js';
import { type ArtifactStore } from '../store/artifact-store.js';
import { ArtifactRefSchema, type ArtifactRef } from '../core/artifact-ref.js';
import { openStore } from '../store/index.js';
import { runKeys } from '../store/keys.js';

/**
 * The run report activity: gathers what the pipeline stored (stage 1 statistics, capability
 * children, gate, evaluation summaries, usage) into the Report model and writes it as JSON and as
 * a self-contained HTML page, returning a terminal summary.
 */

export interface ReportDeps {
  openStore(config: Config['store']): ArtifactStore | Promise<ArtifactStore>;
  /** Clock for `generatedAt` (injected so tests and rebuilds can pin it). */
  now(): Date;
}

const defaultDeps: ReportDeps = {
  openStore,
  now: () => new Date(),
};

/**
 * What the pipeline knows when it reports (a subset of its PipelineResult). Parts written by other
 * stages are read leniently: a missing or unfamiliar part becomes a note, never a failed report.
 */
const RunResultSchema = z.object({
  runId: z.string(),
  status: z.string().optional(),
  summary: z.string().optional(),
  env: z.string().optional(),
  rollouts: z
    .object({
      refs: z.array(ArtifactRefSchema).default([]),
      trajectories: z.number().default(0),
      successes: z.number().default(0),
    })
    .partial()
    .optional(),
  analysis: z
    .object({
      selection: ArtifactRefSchema.optional(),
      labels: z.array(ArtifactRefSchema).default([]),
      selected: z.array(z.string()).default([]),
    })
    .partial()
    .optional(),
  gateError: z.string().optional(),
  capabilities: z
    .array(
      z.object({
        name: z.string(),
        status: z.string(),
        detail: z.string().optional(),
        requestedByConfig: z.boolean().optional(),
        environment: ArtifactRefSchema.optional(),
        validation: z.unknown().optional(),
        adapter: ArtifactRefSchema.optional(),
        training: z.unknown().optional(),
        reusedFrom: z.object({ environment: z.string().optional(), adapter: z.string().optional() }).optional(),
      }),
    )
    .default([]),
  gate: z.unknown().optional(),
  evaluation: z.unknown().optional(),
  notConfigured: z.array(z.string()).default([]),
  promotion: PromotionDecisionSchema.optional(),
});
export type RunResult = z.input<typeof RunResultSchema>;

const EvaluationResultSchema = z.object({
  split: z.string(),
  tasks: z.number(),
  variants: z.array(z.object({ name: z.string(), ref: ArtifactRefSchema })),
  notes: z.array(z.string()).default([]),
});

/**
 * A training curve point as the GPU worker reports it: the trainer's progress lines are snake_case
 * (iteration, mean_reward, informative_share); camelCase is accepted too.
 */
const CurvePointInputSchema = z
  .object({
    iteration: z.number().int(),
    meanReward: z.number().optional(),
    mean_reward: z.number().optional(),
    informativeShare: z.number().min(0).max(1).optional(),
    informative_share: z.number().min(0).max(1).optional(),
  })
  .transform((p) => ({
    iteration: p.iteration,
    meanReward: p.meanReward ?? p.mean_reward,
    informativeShare: p.informativeShare ?? p.informative_share,
  }));
const CurveSchema = z.array(CurvePointInputSchema).transform((ps) =>
  ps.flatMap((p) =>
    p.meanReward === undefined
      ? []
      : [
          {
            iteration: p.iteration,
            meanReward: p.meanReward,
            ...(p.informativeShare !== undefined ? { informativeShare: p.informativeShare } : {}),
          },
        ],
  ),
);
const TrainingSchema = z.object({
  /** trainAdapter reports the curve as mean reward per iteration (numbers), with informativeShare alongside. */
  curve: z.union([CurveSchema, z.array(z.number())]).optional(),
  informativeShare: z.array(z.number().min(0).max(1)).optional(),
  heldoutCurve: z.array(z.object({ iteration: z.number().int().nonnegative(), meanReward: z.number() })).optional(),
  metrics: CurveSchema.optional(),
  history: CurveSchema.optional(),
  gpuSeconds: z.number().optional(),
  cpuSeconds: z.number().optional(),
  device: z.string().optional(),
  durationSeconds: z.number().optional(),
});
const ValidationSchema = z.object({
  attempts: z.number().int().nonnegative().optional(),
  status: z.string().optional(),
  reference: z.string().optional(),
  lastFailure: z.string().optional(),
});
const GateSchema = z.object({
  routing: z
    .union([z.array(z.object({ capability: z.string(), share: z.number() })), z.record(z.string(), z.number())])
    .optional(),
  examples: z.object({ policy: z.number(), gold: z.number() }).optional(),
  peakRssMb: z.number().optional(),
});

function activityWorkflowId(fallback: string): string {
  try {
    return Context.current().info.workflowExecution?.workflowId ?? fallback;
  } catch {
    return fallback;
  }
}

function synthesisOf(c: z.infer<typeof RunResultSchema>['capabilities'][number]): CapabilityRowInput['synthesis'] {
  const v = ValidationSchema.safeParse(c.validation).data;
  const attempts = v?.attempts ?? (c.environment ? 1 : 0);
  // The generator's attempts all failed and the reference-library env was used instead: say so.
  const fallback =
    v?.status !== 'reference_fallback'
      ? {}
      : attempts === 0
        ? { message: `reference env ${v.reference} used directly (synthesis.maxAttempts: 0, no generator attempt)` }
        : {
            message: `reference env ${v.reference} used after ${attempts} failed attempt(s): ${v.lastFailure ?? 'no reason recorded'}`,
          };
  if (c.reusedFrom?.environment)
    return { status: 'ok', attempts: 0, message: `environment reused from run ${c.reusedFrom.environment}` };
  if (c.status === 'not_configured') return { status: 'not_run', attempts: 0 };
  if (c.environment || c.status === 'trained' || c.status === 'training')
    return { status: 'ok', attempts, ...fallback };
  if (c.status === 'failed' && /synthes|validat/i.test(c.detail ?? ''))
    return { status: 'failed', attempts, message: c.detail };
  return { status: 'not_run', attempts };
}

function curvePoints(
  t: z.infer<typeof TrainingSchema> | undefined,
): { iteration: number; meanReward: number; informativeShare?: number }[] {
  const c = t?.curve;
  if (c && c.length > 0 && typeof c[0] === 'number') {
    return (c as number[]).map((meanReward, i) => ({
      iteration: i + 1,
      meanReward,
      ...(t?.informativeShare?.[i] !== undefined ? { informativeShare: t.informativeShare[i] } : {}),
    }));
  }
  return (c as { iteration: number; meanReward: number }[] | undefined) ?? t?.metrics ?? t?.history ?? [];
}

function trainingOf(
  c: z.infer<typeof RunResultSchema>['capabilities'][number],
): NonNullable<CapabilityRowInput['training']> {
  const t = TrainingSchema.safeParse(c.training ?? {}).data;
  const curve = curvePoints(t);
  const heldout = t?.heldoutCurve ?? [];
  if (c.adapter)
    return {
      status: 'ok',
      curve,
      heldout,
      adapterUri: c.adapter.uri,
      ...(c.reusedFrom?.adapter ? { message: `adapter continued from run ${c.reusedFrom.adapter}` } : {}),
    };
  if (c.status === 'failed' && /train/i.test(c.detail ?? ''))
    return { status: 'failed', curve, heldout, message: c.detail };
  return { status: 'not_run', curve, heldout };
}

export function createReportActivities(deps: ReportDeps = defaultDeps) {
  async function gather(
    store: ArtifactStore,
    config: Config,
    run: z.infer<typeof RunResultSchema>,
    pipelineWorkflowId?: string,
  ): Promise<ReportInputs> {
    const notes: string[] = [];
    if (run.summary) notes.push(run.summary);
    if (run.gateError) notes.push(`the gate could not be fitted: ${run.gateError}`);
    if (run.notConfigured.length) notes.push(`not configured in this deployment: ${run.notConfigured.join(', ')}`);

    let stage1: Stage1Result | undefined;
    if (run.analysis?.selection) {
      const parsed = Stage1ResultSchema.safeParse(await store.getJson(run.analysis.selection));
      if (parsed.success) stage1 = parsed.data;
      else
        notes.push(
          `capability analysis at ${run.analysis.selection.uri} could not be read: ${parsed.error.issues[0].message}`,
        );
    }

    const byName = new Map(run.capabilities.map((c) => [c.name, c]));
    const describe = new Map(stage1?.dictionary.capabilities.map((c) => [c.name, c.description]) ?? []);
    const capabilities: CapabilityRowInput[] = (stage1?.stats ?? []).map((s) => {
      const child = byName.get(s.name);
      return {
        name: s.name,
        description: describe.get(s.name) ?? '',
        meanDelta: s.meanDelta,
        stdDelta: s.stdDelta,
        meanCoverage: s.meanCoverage,
        stdCoverage: s.stdCoverage,
        passesSelected: s.passesSelected,
        passes: stage1!.thresholds.passes,
        selected: s.selected,
        ...(child ? { synthesis: synthesisOf(child), training: trainingOf(child) } : {}),
      };
    });
    // Capabilities the config requested: no stage-1 statistics of their own, never marked selected.
    const requestedCaps = run.capabilities.filter(
      (c) => c.requestedByConfig && !capabilities.some((r) => r.name === c.name),
    );
    const requestedDescription = new Map(
      (config.analysis?.requestedCapabilities ?? []).map((c) => [c.name, c.description]),
    );
    for (const c of requestedCaps) {
      capabilities.push({
        name: c.name,
        description: `[requested by config, not selected by stage 1] ${requestedDescription.get(c.name) ?? ''}`.trim(),
        meanDelta: null,
        stdDelta: null,
        meanCoverage: null,
        stdCoverage: null,
        passesSelected: 0,
        passes: stage1?.thresholds.passes ?? 0,
        selected: false,
        synthesis: synthesisOf(c),
        training: trainingOf(c),
      });
      notes.push(
        `capability ${c.name} was trained because analysis.requestedCapabilities names it; stage 1 did not select it`,
      );
    }

    const evaluations: NonNullable<ReportInputs['evaluations']> = [];
    const evalResult = run.evaluation === undefined ? undefined : EvaluationResultSchema.safeParse(run.evaluation);
    if (evalResult?.success) {
      notes.push(...evalResult.data.notes);
      for (const v of evalResult.data.variants) {
        const s = EvaluationSummarySchema.safeParse(await store.getJson(v.ref));
        if (s.success) evaluations.push({ ...s.data, summaryUri: v.ref.uri });
        else notes.push(`evaluation summary of ${v.name} could not be read: ${s.error.issues[0].message}`);
      }
    } else if (evalResult) {
      notes.push('the evaluation result has an unfamiliar shape and is not shown');
    }

    const gateInfo = GateSchema.safeParse(run.gate ?? {}).data;
    const gateParsed = gateInfo?.routing;
    const routing = Array.isArray(gateParsed)
      ? gateParsed
      : Object.entries(gateParsed ?? {}).map(([capability, share]) => ({ capability, share }));
    if (run.gate !== undefined && routing.length === 0) notes.push('the gate did not report routing shares');
    // Gold demonstrations are a departure from the paper (policy successes only): always said.
    if (gateInfo?.examples?.gold) {
      notes.push(
        `the gate was fitted on ${gateInfo.examples.policy} successful policy trajectories and ${gateInfo.examples.gold} gold demonstrations (gate.goldDemonstrations: reference solutions replayed through each capability env)`,
      );
    } else if (gateInfo?.examples) {
      notes.push(
        `the gate was fitted on ${gateInfo.examples.policy} successful policy trajectories only (gold-free, as in the paper)`,
      );
    }
    const constrained = config.training.constrainedDecoding;
    if (constrained !== false && run.capabilities.some((c) => c.adapter)) {
      notes.push(
        `GRPO sampled under the JSON action grammar (training.constrainedDecoding: ${constrained}${constrained === 'auto' ? ', on for a model whose chat template has no tool format' : ''}); served evaluation decodes the same way`,
      );
    }

    // Cost: policy tokens of rollouts and evaluation, analyst tokens of the labeling passes.
    let rolloutUsage = { calls: 0, promptTokens: 0, completionTokens: 0 };
    for (const ref of run.rollouts?.refs ?? []) {
      for (const line of (await store.getText(ref)).split('\n')) {
        if (!line.trim()) continue;
        const u = (JSON.parse(line) as { usage?: typeof rolloutUsage }).usage;
        if (u)
          rolloutUsage = {
            calls: rolloutUsage.calls + u.calls,
            promptTokens: rolloutUsage.promptTokens + u.promptTokens,
            completionTokens: rolloutUsage.completionTokens + u.completionTokens,
          };
      }
    }
    let analystUsage = { calls: 0, promptTokens: 0, completionTokens: 0 };
    for (const ref of run.analysis?.labels ?? []) {
      const p = PassLabelsSchema.safeParse(await store.getJson(ref));
      if (p.success)
        analystUsage = {
          calls: analystUsage.calls + p.data.usage.calls,
          promptTokens: analystUsage.promptTokens + p.data.usage.promptTokens,
          completionTokens: analystUsage.completionTokens + p.data.usage.completionTokens,
        };
    }
    const evalUsage = evaluations.reduce(
      (u, e) => ({
        calls: u.calls + e.usage.calls,
        promptTokens: u.promptTokens + e.usage.promptTokens,
        completionTokens: u.completionTokens + e.usage.completionTokens,
      }),
      { calls: 0, promptTokens: 0, completionTokens: 0 },
    );
    // Adapter training and gate fitting both count as training seconds.
    const trainings = [...run.capabilities.map((c) => c.training), run.gate].map(
      (t) => TrainingSchema.safeParse(t ?? {}).data ?? {},
    );
    const seconds = (kind: 'gpu' | 'cpu') =>
      trainings.reduce(
        (s, t) =>
          s +
          (kind === 'gpu'
            ? (t.gpuSeconds ?? (t.device?.startsWith('cuda') ? (t.durationSeconds ?? 0) : 0))
            : (t.cpuSeconds ?? (t.device === 'cpu' ? (t.durationSeconds ?? 0) : 0))),
        0,
      );

    const settings = temporalSettings();
    const workflowId = pipelineWorkflowId ?? activityWorkflowId(run.runId);
    return {
      runId: run.runId,
      name: config.name,
      env: config.env.name,
      generatedAt: deps.now().toISOString(),
      notes,
      evaluations,
      analysis: stage1
        ? {
            trajectories: stage1.counts.trajectories,
            successes: stage1.counts.successes,
            passes: stage1.thresholds.passes,
            minPassesSelected: stage1.thresholds.minPassesSelected,
            deltaThreshold: stage1.thresholds.delta,
            coverageThreshold: stage1.thresholds.coverage,
          }
        : null,
      capabilities,
      gate:
        run.gate !== undefined
          ? { routing, ...(gateInfo?.peakRssMb !== undefined ? { peakRssMb: gateInfo.peakRssMb } : {}) }
          : null,
      cost: {
        llm: [
          { role: 'policy (rollouts)', ...rolloutUsage },
          { role: 'analyst (labeling)', ...analystUsage },
          { role: 'policy (evaluation)', ...evalUsage },
        ].filter((u) => u.calls > 0),
        rollouts: run.rollouts?.trajectories ?? 0,
        evaluationEpisodes: evaluations.reduce((n, e) => n + e.overall.episodes, 0),
        gpuSeconds: seconds('gpu'),
        cpuSeconds: seconds('cpu'),
      },
      links: {
        ui: settings.uiBase,
        run: workflowUiLink(settings, workflowId),
        children: run.capabilities.map((c) => ({
          label: `capability ${c.name} (${c.status})`,
          url: workflowUiLink(settings, `${workflowId}/capability/${c.name}`),
        })),
      },
      promotion: run.promotion ?? null,
    };
  }

  /**
   * Builds and stores the report; `summary` is what `trace report` prints. `pipelineWorkflowId`
   * names the pipeline workflow for UI links when the caller is not that workflow (default: the
   * calling workflow, else the run id).
   */
  async function buildReport(input: {
    config: Config;
    runId: string;
    result: RunResult;
    pipelineWorkflowId?: string;
  }): Promise<{ jsonRef: ArtifactRef; htmlRef: ArtifactRef; summary: string }> {
    const run = RunResultSchema.parse({ ...input.result, runId: input.runId });
    const store = await deps.openStore(input.config.store);
    const report = assembleReport(await gather(store, input.config, run, input.pipelineWorkflowId));
    const jsonRef = await store.put(runKeys.reportJson(input.runId), JSON.stringify(report, null, 2));
    const htmlRef = await store.put(runKeys.reportHtml(input.runId), renderReportHtml(report));
    return { jsonRef, htmlRef, summary: formatSummary(report) };
  }

  /** The pipeline's report stage (workflows/pipeline.ts calls it by this name): returns the JSON ref. */
  async function writeReport(input: { runId: string; config: Config; result: RunResult }): Promise<ArtifactRef> {
    return (await buildReport(input)).jsonRef;
  }

  return { buildReport, writeReport };
}

const defaults = createReportActivities();
export const { buildReport, writeReport } = defaults;
