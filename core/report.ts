import { z } from 'zod';
import { EvaluationSummarySchema, IntervalSchema, passRateDelta, type EvaluationSummary } from './evaluation.js';
import { PromotionDecisionSchema } from './promotion.js';
import { UsageSchema } from './trajectory.js';

/**
 * The run report: the answer to "is the trained agent better on the target, by how much, and why".
 * One zod model, rendered as JSON, self-contained HTML and a terminal summary.
 */
const PassRowSchema = z.object({
  tasks: z.number().int().nonnegative(),
  episodes: z.number().int().nonnegative(),
  successes: z.number().int().nonnegative(),
  passRate: IntervalSchema,
  /** variant − base on the same tasks; null for the base itself or when no base was evaluated. */
  deltaVsBase: IntervalSchema.nullable(),
  /** Mean episode reward with its interval (ToolSandbox: mean similarity); null for summaries without it. */
  meanReward: IntervalSchema.nullable().default(null),
});

export const VariantRowSchema = PassRowSchema.extend({
  name: z.string(),
  kind: z.enum(['base', 'trace', 'adapter', 'prompt_only']),
  model: z.string().optional(),
  capability: z.string().optional(),
  passHatK: z.array(z.object({ k: z.number().int().positive(), value: z.number() })),
  perDomain: z.array(PassRowSchema.extend({ domain: z.string() })),
  /** Per task category (ToolSandbox's categories; a task counts in each of its own); deltaVsBase stays null. */
  perCategory: z.array(PassRowSchema.extend({ category: z.string() })).default([]),
  usage: UsageSchema,
  summaryUri: z.string().optional(),
});
export type VariantRow = z.infer<typeof VariantRowSchema>;

export const CurvePointSchema = z.object({
  iteration: z.number().int().nonnegative(),
  meanReward: z.number(),
  informativeShare: z.number().min(0).max(1).optional(),
});
export type CurvePoint = z.infer<typeof CurvePointSchema>;

export const CapabilityRowSchema = z.object({
  name: z.string(),
  description: z.string(),
  meanDelta: z.number().nullable(),
  stdDelta: z.number().nullable(),
  meanCoverage: z.number().nullable(),
  stdCoverage: z.number().nullable(),
  passesSelected: z.number().int().nonnegative(),
  passes: z.number().int().nonnegative(),
  selected: z.boolean(),
  synthesis: z
    .object({
      status: z.enum(['ok', 'failed', 'skipped', 'not_run']),
      attempts: z.number().int().nonnegative(),
      message: z.string().optional(),
    })
    .prefault({ status: 'not_run', attempts: 0 }),
  training: z
    .object({
      status: z.enum(['ok', 'failed', 'skipped', 'not_run']),
      curve: z.array(CurvePointSchema).default([]),
      /** Mean reward on seeds never trained on (iteration 0 = before training). */
      heldout: z.array(CurvePointSchema).default([]),
      message: z.string().optional(),
      adapterUri: z.string().optional(),
    })
    .prefault({ status: 'not_run' }),
  /** Share of tokens the gate routes (top-1) to this capability's adapter. */
  routingShare: z.number().min(0).max(1).nullable().default(null),
});
export type CapabilityRow = z.infer<typeof CapabilityRowSchema>;
export type CapabilityRowInput = z.input<typeof CapabilityRowSchema>;

export const CostSchema = z.object({
  llm: z.array(UsageSchema.extend({ role: z.string() })).default([]),
  rollouts: z.number().int().nonnegative().default(0),
  evaluationEpisodes: z.number().int().nonnegative().default(0),
  gpuSeconds: z.number().nonnegative().default(0),
  cpuSeconds: z.number().nonnegative().default(0),
});
export type Cost = z.infer<typeof CostSchema>;

export const LinkSchema = z.object({ label: z.string(), url: z.string() });

export const ReportSchema = z.object({
  schemaVersion: z.literal(1),
  runId: z.string(),
  name: z.string(),
  env: z.string(),
  generatedAt: z.string(),
  /** Honest state of the run: which stages produced results and what is missing or failed. */
  notes: z.array(z.string()),
  evaluation: z
    .object({
      split: z.string(),
      trials: z.number().int().positive(),
      temperature: z.number(),
    })
    .nullable(),
  variants: z.array(VariantRowSchema),
  analysis: z
    .object({
      trajectories: z.number().int().nonnegative(),
      successes: z.number().int().nonnegative(),
      passes: z.number().int().nonnegative(),
      minPassesSelected: z.number().int().nonnegative(),
      deltaThreshold: z.number(),
      coverageThreshold: z.number(),
    })
    .nullable(),
  capabilities: z.array(CapabilityRowSchema),
  gate: z
    .object({
      routing: z.array(z.object({ capability: z.string(), share: z.number().min(0).max(1) })),
      note: z.string().optional(),
      /** Peak resident memory of the gate fit (MiB). */
      peakRssMb: z.number().optional(),
    })
    .nullable(),
  cost: CostSchema,
  links: z.object({ ui: z.string().nullable(), run: z.string().nullable(), children: z.array(LinkSchema) }),
  promotion: PromotionDecisionSchema.nullable(),
});
export type Report = z.infer<typeof ReportSchema>;

export const ReportInputsSchema = z.object({
  runId: z.string(),
  name: z.string(),
  env: z.string(),
  generatedAt: z.string(),
  notes: z.array(z.string()).default([]),
  evaluations: z.array(EvaluationSummarySchema.extend({ summaryUri: z.string().optional() })).default([]),
  analysis: ReportSchema.shape.analysis.default(null),
  capabilities: z.array(CapabilityRowSchema).default([]),
  gate: ReportSchema.shape.gate.default(null),
  cost: CostSchema.prefault({}),
  links: ReportSchema.shape.links.prefault({ ui: null, run: null, children: [] }),
  promotion: PromotionDecisionSchema.nullable().default(null),
});
export type ReportInputs = z.input<typeof ReportInputsSchema>;

function variantRow(
  summary: EvaluationSummary & { summaryUri?: string },
  base: EvaluationSummary | undefined,
): VariantRow {
  const isBase = base !== undefined && summary.variant.name === base.variant.name;
  const delta = (domain?: string) => (base && !isBase ? passRateDelta(summary.perTask, base.perTask, domain) : null);
  return {
    name: summary.variant.name,
    kind: summary.variant.kind,
    model: summary.variant.model,
    capability: summary.variant.capability,
    tasks: summary.overall.tasks,
    episodes: summary.overall.episodes,
    successes: summary.overall.successes,
    passRate: summary.overall.passRate,
    deltaVsBase: delta(),
    meanReward: summary.overall.meanRewardInterval ?? null,
    passHatK: summary.overall.passHatK,
    perDomain: summary.perDomain.map((d) => ({
      domain: d.domain,
      tasks: d.tasks,
      episodes: d.episodes,
      successes: d.successes,
      passRate: d.passRate,
      deltaVsBase: delta(d.domain),
      meanReward: d.meanRewardInterval ?? null,
    })),
    perCategory: summary.perCategory.map((c) => ({
      category: c.category,
      tasks: c.tasks,
      episodes: c.episodes,
      successes: c.successes,
      passRate: c.passRate,
      deltaVsBase: null,
      meanReward: c.meanRewardInterval ?? null,
    })),
    usage: summary.usage,
    summaryUri: summary.summaryUri,
  };
}

/** Builds the report model; deltas are paired against the variant of kind 'base'. */
export function assembleReport(raw: ReportInputs): Report {
  const inputs = ReportInputsSchema.parse(raw);
  const base = inputs.evaluations.find((e) => e.variant.kind === 'base');
  const notes = [...inputs.notes];
  if (inputs.evaluations.length > 0 && !base) notes.push('no base variant was evaluated: deltas are not available');
  const first = inputs.evaluations[0];
  const mismatch = inputs.evaluations.find(
    (e) => e.split !== first.split || e.trials !== first.trials || e.temperature !== first.temperature,
  );
  if (mismatch)
    notes.push(
      `variant ${mismatch.variant.name} was evaluated with different split/trials/temperature than ${first.variant.name}`,
    );
  const routing = new Map(inputs.gate?.routing.map((r) => [r.capability, r.share]) ?? []);
  return ReportSchema.parse({
    schemaVersion: 1,
    runId: inputs.runId,
    name: inputs.name,
    env: inputs.env,
    generatedAt: inputs.generatedAt,
    notes,
    evaluation: first ? { split: first.split, trials: first.trials, temperature: first.temperature } : null,
    variants: inputs.evaluations.map((e) => variantRow(e, base)),
    analysis: inputs.analysis,
    capabilities: inputs.capabilities.map((c) => ({
      ...c,
      routingShare: c.routingShare ?? routing.get(c.name) ?? null,
    })),
    gate: inputs.gate,
    cost: inputs.cost,
    links: inputs.links,
    promotion: inputs.promotion,
  });
}

export const pct = (x: number | null | undefined, digits = 1) =>
  x === null || x === undefined ? '—' : `${(x * 100).toFixed(digits)}%`;
export const signedPp = (x: number | null | undefined) =>
  x === null || x === undefined ? '—' : `${x >= 0 ? '+' : '−'}${Math.abs(x * 100).toFixed(1)} pp`;

/** "42.0% [30.1, 54.9]" — the interval in percent, or just the estimate when it has none. */
export function formatInterval(i: z.infer<typeof IntervalSchema>, signed = false): string {
  const point = signed ? signedPp(i.estimate) : pct(i.estimate);
  if (i.low === null || i.high === null) return point;
  const f = (x: number) => (x * 100).toFixed(1);
  return `${point} [${f(i.low)}, ${f(i.high)}]`;
}

/** Targets scored by a similarity in [0, 1] whose success is "perfect" (ToolSandbox and its categories). */
export const isSimilarityEnv = (env: string): boolean => env === 'toolsandbox' || env.startsWith('toolsandbox-');

/** "0.560 [0.490, 0.630]" — a mean on [0, 1] as a plain number. */
export function formatMean(i: z.infer<typeof IntervalSchema>): string {
  if (i.estimate === null) return '—';
  return i.low === null || i.high === null
    ? i.estimate.toFixed(3)
    : `${i.estimate.toFixed(3)} [${i.low.toFixed(3)}, ${i.high.toFixed(3)}]`;
}

/** The terminal summary `trace report` prints: plain text, one table, the notes. */
export function formatSummary(report: Report): string {
  const lines: string[] = [`TRACE report — run ${report.runId} (${report.name}) on ${report.env}`];
  if (report.evaluation) {
    const e = report.evaluation;
    lines.push(`held-out split '${e.split}', ${e.trials} trial(s) per task at temperature ${e.temperature}; 95% CIs`);
    if (isSimilarityEnv(report.env)) {
      // ToolSandbox reports as the paper's Table 3: mean similarity, and the perfect (= 1.0) rate, which is the pass rate.
      const rows = report.variants.map((v) => [
        v.name,
        v.kind,
        String(v.tasks),
        v.meanReward ? formatMean(v.meanReward) : '—',
        formatInterval(v.passRate),
        `${v.successes}/${v.episodes}`,
        v.deltaVsBase ? formatInterval(v.deltaVsBase, true) : '—',
      ]);
      lines.push(
        ...table(['variant', 'kind', 'tasks', 'mean similarity', 'perfect rate', 'perfect', 'Δ perfect vs base'], rows),
      );
      lines.push(...categoryTable(report.variants));
    } else {
      const rows = report.variants.map((v) => [
        v.name,
        v.kind,
        String(v.tasks),
        formatInterval(v.passRate),
        v.deltaVsBase ? formatInterval(v.deltaVsBase, true) : '—',
      ]);
      lines.push(...table(['variant', 'kind', 'tasks', 'pass rate', 'Δ vs base'], rows));
    }
  } else {
    lines.push('no evaluation in this run');
  }
  const selected = report.capabilities.filter((c) => c.selected);
  if (report.capabilities.length > 0) {
    lines.push(`capabilities: ${selected.length} selected of ${report.capabilities.length} discovered`);
    for (const c of selected) {
      const last = c.training.curve.at(-1);
      lines.push(
        `  ${c.name}: Δ ${c.meanDelta?.toFixed(2) ?? '—'}, Cov ${c.meanCoverage?.toFixed(2) ?? '—'}, ${c.passesSelected}/${c.passes} passes; env ${c.synthesis.status}; adapter ${c.training.status}${last ? ` (reward ${last.meanReward.toFixed(2)} @ iter ${last.iteration})` : ''}`,
      );
    }
  }
  if (report.promotion)
    lines.push(`promotion: ${report.promotion.promote ? 'PROMOTED' : 'not promoted'} — ${report.promotion.reason}`);
  for (const n of report.notes) lines.push(`note: ${n}`);
  if (report.links.run) lines.push(`Temporal UI: ${report.links.run}`);
  return lines.join('\n');
}

/**
 * ToolSandbox's per-category breakdown (the paper's Table 3 columns per scenario category): one row
 * per category, per variant its mean similarity and perfect count of the category's episodes.
 */
export function categoryBreakdown(
  variants: readonly VariantRow[],
): { category: string; cells: { meanSimilarity: string; perfect: string }[] }[] {
  const categories = [...new Set(variants.flatMap((v) => v.perCategory.map((c) => c.category)))].sort();
  return categories.map((category) => ({
    category,
    cells: variants.map((v) => {
      const c = v.perCategory.find((x) => x.category === category);
      return c
        ? { meanSimilarity: c.meanReward ? formatMean(c.meanReward) : '—', perfect: `${c.successes}/${c.episodes}` }
        : { meanSimilarity: '—', perfect: '—' };
    }),
  }));
}

function categoryTable(variants: readonly VariantRow[]): string[] {
  const rows = categoryBreakdown(variants);
  if (rows.length === 0) return [];
  const header = ['category', ...variants.flatMap((v) => [`${v.name} mean similarity`, `${v.name} perfect`])];
  return [
    'per category:',
    ...table(
      header,
      rows.map((r) => [r.category, ...r.cells.flatMap((c) => [c.meanSimilarity, c.perfect])]),
    ),
  ];
}

function table(header: string[], rows: string[][]): string[] {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const fmt = (r: string[]) =>
    r
      .map((c, i) => c.padEnd(widths[i]))
      .join('  ')
      .trimEnd();
  return [fmt(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(fmt)];
}
