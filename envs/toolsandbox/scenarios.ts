import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { NAMESPACES, SandboxContext, type Row } from './context.js';
import type { EvaluationSpec } from './evaluator.js';

/**
 * ToolSandbox's scenarios as data (data/toolsandbox/scenarios.json; see SOURCE.md there): the 129
 * base scenarios with their starting world state, opening messages (system prompts, the
 * user-simulator prompt and few-shot example, the first user turn), milestones and minefields,
 * and for each the 7 augmented variants upstream derives (distraction tools, scrambling).
 */

const Namespace = z.enum(NAMESPACES);
const RowSchema = z.record(z.string(), z.unknown());
/** Python's float("inf") is written as the string "Infinity" (JSON has no infinity). */
const Atol = z.record(
  z.string(),
  z.union([z.number(), z.literal('Infinity')]).transform((v) => (v === 'Infinity' ? Infinity : v)),
);

const ColumnMeasure = z.object({
  name: z.enum([
    'column_exact_match_similarity',
    'column_close_similarity',
    'column_one_similarity',
    'column_contains_similarity',
    'column_tool_trace_exact_match_similarity',
    'column_rouge_l_similarity',
  ]),
  atol_dict: Atol.optional(),
});

const SnapshotMeasure = z.union([
  z.object({
    name: z.enum([
      'snapshot_similarity',
      'addition_similarity',
      'removal_similarity',
      'update_similarity',
      'guardrail_similarity',
    ]),
  }),
  z.object({
    name: z.literal('tool_trace_dependant_similarity'),
    fill_to: z.enum(['tool_trace', 'content']),
    extractor: z.string(),
  }),
]);

const Constraint = z.object({
  database_namespace: Namespace,
  snapshot_constraint: SnapshotMeasure,
  reference_milestone_node_index: z.number().int().nullable(),
  target_dataframe: z.array(RowSchema).nullable(),
  target_schema: z.record(z.string(), z.string()).optional(),
  column_similarity_measure: z.record(z.string(), ColumnMeasure).optional(),
});

const MilestoneSchema = z.object({
  snapshot_constraints: z.array(Constraint),
  guardrail_database_list: z.array(Namespace).nullable(),
});

const Edges = z.array(z.tuple([z.number().int(), z.number().int()]));

const Variant = z.object({
  tool_allow_list: z.array(z.string()),
  tool_augmentation_list: z.array(z.string()),
  categories: z.array(z.string()),
});

const ScenarioSchema = z.object({
  name: z.string(),
  categories: z.array(z.string()),
  max_messages: z.number().int(),
  tool_allow_list: z.array(z.string()),
  tool_deny_list: z.array(z.string()).nullable(),
  needs_network: z.boolean(),
  tables: z.record(z.string(), z.string()),
  messages: z.array(RowSchema),
  evaluation: z.object({
    milestones: z.array(MilestoneSchema),
    milestone_edge_list: Edges,
    minefields: z.array(MilestoneSchema),
    minefield_edge_list: Edges,
  }),
  variants: z.record(z.string(), Variant),
});

const PackSchema = z.object({
  sandbox_prefix: z.array(RowSchema),
  tables: z.record(z.string(), z.array(RowSchema)),
  tool_modules: z.record(z.string(), z.string()),
  scenarios: z.array(ScenarioSchema),
});

export type ScenarioData = z.infer<typeof ScenarioSchema>;
export type ScenarioPack = z.infer<typeof PackSchema>;

/** One runnable scenario: a base scenario or one of its augmented variants. */
export interface ToolSandboxScenario {
  /** Upstream's scenario name (base name + variant suffix). */
  name: string;
  base: string;
  variant: string;
  categories: string[];
  maxMessages: number;
  toolAllowList: string[];
  /** Tools removed even when allowed (get_available_tools filters both lists; a variant's distraction tools can name one). */
  toolDenyList: string[];
  toolAugmentationList: string[];
  /** Uses a RapidAPI search tool, so it cannot run offline. */
  needsNetwork: boolean;
  evaluation: EvaluationSpec;
  /** The starting world state (a fresh copy each call). */
  startingContext(): SandboxContext;
}

export const SCENARIOS_FILE = new URL('../../data/toolsandbox/scenarios.json', import.meta.url);
export const BASE_VARIANT = 'base';

let cached: ScenarioPack | undefined;

export function loadPack(file: URL = SCENARIOS_FILE): ScenarioPack {
  if (file === SCENARIOS_FILE && cached) return cached;
  const raw = JSON.parse(readFileSync(file, 'utf8')) as unknown;
  const parsed = PackSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new Error(`${file.pathname}: ${issue.path.join('.')}: ${issue.message}`);
  }
  if (file === SCENARIOS_FILE) cached = parsed.data;
  return parsed.data;
}

function startingContext(pack: ScenarioPack, s: ScenarioData): SandboxContext {
  const dbs: Record<string, Row[]> = { SANDBOX: [...pack.sandbox_prefix, ...s.messages] };
  for (const [ns, id] of Object.entries(s.tables)) {
    const rows = pack.tables[id];
    if (!rows) throw new Error(`scenarios.json: scenario ${s.name}: tables.${ns}: unknown table '${id}'`);
    dbs[ns] = rows;
  }
  return SandboxContext.fromDbs(dbs);
}

/** Every scenario: 129 base ones (variant 'base') and their variants, in upstream's order per base. */
export function loadScenarios(pack: ScenarioPack = loadPack()): ToolSandboxScenario[] {
  const out: ToolSandboxScenario[] = [];
  for (const s of pack.scenarios) {
    const evaluation = s.evaluation as EvaluationSpec;
    const make = (variant: string, v: z.infer<typeof Variant>): ToolSandboxScenario => ({
      name: variant === BASE_VARIANT ? s.name : `${s.name}_${variant}`,
      base: s.name,
      variant,
      categories: v.categories,
      maxMessages: s.max_messages,
      toolAllowList: v.tool_allow_list,
      toolDenyList: s.tool_deny_list ?? [],
      toolAugmentationList: v.tool_augmentation_list,
      needsNetwork: s.needs_network,
      evaluation,
      startingContext: () => startingContext(pack, s),
    });
    out.push(
      make(BASE_VARIANT, { tool_allow_list: s.tool_allow_list, tool_augmentation_list: [], categories: s.categories }),
    );
    for (const [name, v] of Object.entries(s.variants)) out.push(make(name, v));
  }
  return out;
}
