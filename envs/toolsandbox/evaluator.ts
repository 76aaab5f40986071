/**
 * ToolSandbox's milestone/minefield evaluator (tool_sandbox/common/evaluation.py), ported to give
 * the same numbers: column similarities in float32 as polars computes them, row costs -log(sim)
 * averaged with polars' mean_horizontal, an optimal row assignment (scipy's linear_sum_assignment),
 * the guardrails, the order-respecting DFS over the milestone DAG and the minefield rule.
 * Derived from apple/ToolSandbox (Copyright (C) 2024 Apple Inc.; licence in data/toolsandbox/LICENSE).
 */
import { NAMESPACES, SCHEMAS, type Namespace, type Row, type SandboxContext } from './context.js';
import { isClose, NOT_GIVEN, pyEquals, pyFixed, PyFloat, pyFormat, PyKeyError } from './pyvalues.js';
import { rougeLFmeasure } from './rouge.js';

const f32 = Math.fround;
/** polars' `log()` on a Float32 column is Rust's `f32::log(x, e)` = ln(x) / ln(e as f32), all in float32. */
const LN_E_F32 = f32(Math.log(f32(Math.E)));
const polarsLog32 = (x: number): number => f32(f32(Math.log(x)) / LN_E_F32);

// ---------------------------------------------------------------------------------------------
// Column similarity measures: one value per snapshot row; null where polars yields null.

export type ColumnMeasureName =
  | 'column_exact_match_similarity'
  | 'column_close_similarity'
  | 'column_one_similarity'
  | 'column_contains_similarity'
  | 'column_tool_trace_exact_match_similarity'
  | 'column_rouge_l_similarity';

export interface ColumnMeasure {
  name: ColumnMeasureName;
  /** functools.partial(..., atol_dict=...) for close / tool-trace match; Infinity allowed. */
  atol_dict?: Record<string, number>;
}

type Sim = number | null;

/** `pl.col(c).eq(value)` (null where the cell is null) or `is_null()` when value is None. */
function exactMatch(rows: Row[], col: string, value: unknown): Sim[] {
  if (value === null || value === undefined) return rows.map((r) => (r[col] === null ? 1 : 0));
  return rows.map((r) => (r[col] === null ? null : pyEquals(r[col], value) ? 1 : 0));
}

function closeMatch(rows: Row[], col: string, value: unknown, atol?: Record<string, number>): Sim[] {
  if (typeof value !== 'number' || !atol)
    throw new Error(`column_close_similarity on '${col}' needs a numeric target and atol_dict`);
  return rows.map((r) => (isClose(value, r[col], atol[col]) ? 1 : 0));
}

/** `str.contains_any([value])`: literal, case-sensitive substring. */
function contains(rows: Row[], col: string, value: unknown): Sim[] {
  return rows.map((r) => (r[col] === null ? null : String(r[col]).includes(String(value)) ? 1 : 0));
}

/** Any recorded trace matching any golden trace: same tool name, every golden argument close. */
function toolTraceMatch(rows: Row[], col: string, value: unknown, atol?: Record<string, number>): Sim[] {
  const parsed = JSON.parse(String(value)) as unknown;
  const golden = (Array.isArray(parsed) ? parsed : [parsed]) as {
    tool_name: string;
    arguments: Record<string, unknown>;
  }[];
  return rows.map((r) => {
    const traces = r[col];
    if (traces === null || traces === undefined) return 0;
    for (const g of golden) {
      for (const json of traces as string[]) {
        const t = JSON.parse(json) as { tool_name: string; arguments: Record<string, unknown> };
        if (t.tool_name !== g.tool_name) continue;
        const ok = Object.keys(g.arguments).every((arg) =>
          isClose(arg in t.arguments ? t.arguments[arg] : NOT_GIVEN, g.arguments[arg], atol?.[arg]),
        );
        if (ok) return 1;
      }
    }
    return 0;
  });
}

function rougeL(rows: Row[], col: string, value: unknown): Sim[] {
  return rows.map((r) => {
    if (typeof r[col] !== 'string')
      throw new Error(
        `column_rouge_l_similarity: '${col}' is ${r[col] === null ? 'null' : typeof r[col]} (upstream's rouge scorer fails on it too)`,
      );
    return f32(rougeLFmeasure(String(value), r[col] as string));
  });
}

function columnSimilarity(m: ColumnMeasure, rows: Row[], col: string, value: unknown): Sim[] {
  switch (m.name) {
    case 'column_exact_match_similarity':
      return exactMatch(rows, col, value);
    case 'column_close_similarity':
      return closeMatch(rows, col, value, m.atol_dict);
    case 'column_one_similarity':
      return rows.map(() => 1);
    case 'column_contains_similarity':
      return contains(rows, col, value);
    case 'column_tool_trace_exact_match_similarity':
      return toolTraceMatch(rows, col, value, m.atol_dict);
    case 'column_rouge_l_similarity':
      return rougeL(rows, col, value);
  }
}

/** evaluation._default_dbs_column_similarities. */
const E: ColumnMeasure = { name: 'column_exact_match_similarity' };
const R: ColumnMeasure = { name: 'column_rouge_l_similarity' };
const ONE: ColumnMeasure = { name: 'column_one_similarity' };
export const DEFAULT_COLUMN_MEASURES: Record<Namespace, Record<string, ColumnMeasure>> = {
  SANDBOX: {
    sandbox_message_index: E,
    sender: E,
    recipient: E,
    content: R,
    openai_tool_call_id: ONE,
    openai_function_name: ONE,
    conversation_active: E,
    tool_call_exception: ONE,
    tool_trace: { name: 'column_tool_trace_exact_match_similarity' },
    visible_to: E,
  },
  SETTING: {
    sandbox_message_index: E,
    device_id: E,
    cellular: E,
    wifi: E,
    location_service: E,
    low_battery_mode: E,
    latitude: E,
    longitude: E,
  },
  CONTACT: { sandbox_message_index: E, person_id: E, name: E, phone_number: E, relationship: R, is_self: E },
  MESSAGING: {
    sandbox_message_index: E,
    message_id: E,
    sender_person_id: E,
    sender_phone_number: E,
    recipient_person_id: E,
    recipient_phone_number: E,
    content: R,
    creation_timestamp: E,
  },
  REMINDER: {
    sandbox_message_index: E,
    reminder_id: E,
    content: R,
    creation_timestamp: E,
    reminder_timestamp: E,
    latitude: E,
    longitude: E,
  },
};

// ---------------------------------------------------------------------------------------------
// Snapshot similarity measures.

/**
 * polars' fill_null(strategy="zero"): numeric → 0, boolean → false, string → "" (list columns are
 * left null). Upstream applies it before joining snapshots, since polars never joins on a null.
 */
const BOOLEAN_COLUMNS = new Set([
  'cellular',
  'wifi',
  'location_service',
  'low_battery_mode',
  'is_self',
  'conversation_active',
]);
const LIST_COLUMNS = new Set(['tool_trace', 'visible_to']);
function fillNullZero(rows: Row[], ns: Namespace | 'target', targetSchema?: Record<string, string>): Row[] {
  const floats = ns === 'target' ? undefined : new Set(SCHEMAS[ns].floats);
  return rows.map((r) => {
    const out: Row = {};
    for (const [k, v] of Object.entries(r)) {
      if (v !== null) out[k] = v;
      else if (ns === 'target') out[k] = targetFill(rows, k, targetSchema?.[k]);
      else out[k] = floats!.has(k) ? 0 : BOOLEAN_COLUMNS.has(k) ? false : LIST_COLUMNS.has(k) ? null : '';
    }
    return out;
  });
}

/** A target column's fill value follows its polars dtype (given, else inferred as polars would). */
function targetFill(rows: Row[], col: string, dtype?: string): unknown {
  if (dtype === 'String') return '';
  if (dtype === 'Boolean') return false;
  if (dtype && /^(Float|Int|UInt)\d+$/.test(dtype)) return 0;
  if (dtype) return null;
  const sample = rows.map((r) => r[col]).find((v) => v !== null && v !== undefined);
  if (typeof sample === 'number') return 0;
  if (typeof sample === 'boolean') return false;
  if (typeof sample === 'string') return '';
  return null;
}

/** Row equality as a polars join key: every column equal, and a null never joins. */
function joinEqual(a: Row, b: Row, cols: string[]): boolean {
  return cols.every((c) => a[c] !== null && b[c] !== null && pyEquals(a[c], b[c]));
}

const dropIndex = (rows: Row[]): Row[] => rows.map(({ sandbox_message_index: _i, ...rest }) => rest);

/** Minimum total cost over perfect assignments (Infinity = forbidden); undefined when infeasible. */
function minAssignment(cost: number[][]): number[] | undefined {
  const n = cost.length;
  // DP over subsets of columns; targets are small (a handful of rows).
  const best = new Array<number>(1 << n).fill(Infinity);
  const choice = new Array<number>(1 << n).fill(-1);
  best[0] = 0;
  for (let mask = 0; mask < 1 << n; mask++) {
    if (best[mask] === Infinity) continue;
    const row = popcount(mask);
    if (row >= n) continue;
    for (let col = 0; col < n; col++) {
      if (mask & (1 << col) || cost[row][col] === Infinity) continue;
      const next = mask | (1 << col);
      const v = best[mask] + cost[row][col];
      if (v < best[next]) {
        best[next] = v;
        choice[next] = col;
      }
    }
  }
  const full = (1 << n) - 1;
  if (best[full] === Infinity) return undefined;
  const cols = new Array<number>(n);
  for (let mask = full, row = n - 1; row >= 0; row--) {
    cols[row] = choice[mask];
    mask &= ~(1 << choice[mask]);
  }
  return cols;
}

function popcount(x: number): number {
  let c = 0;
  for (; x; x &= x - 1) c++;
  return c;
}

export type Measures = Record<string, ColumnMeasure>;

/** evaluation.snapshot_similarity: same row count, optimal 1:1 rows by geometric mean of column sims. */
export function snapshotSimilarity(snapshot: Row[], target: Row[], measures: Measures): number {
  const targetCols = target.length ? Object.keys(target[0]) : [];
  const snapCols = new Set(snapshot.length ? Object.keys(snapshot[0]) : targetCols);
  if (snapshot.length !== target.length || targetCols.some((c) => !snapCols.has(c))) return 0;
  let invalid = false;
  const cost = target.map((row) => {
    const cols = Object.entries(row).map(([c, v]) => {
      const m = measures[c];
      if (!m) throw new Error(`no similarity measure for column '${c}'`);
      return columnSimilarity(m, snapshot, c, v).map((s) => (s === null ? null : -polarsLog32(s)));
    });
    return snapshot.map((_, j) => {
      // mean_horizontal: float32 running sum of the non-null costs, divided in float64.
      let sum = 0;
      let count = 0;
      for (const c of cols) {
        const v = c[j];
        if (v === null) continue;
        sum = f32(sum + v);
        count++;
      }
      if (!count) invalid = true; // a null mean becomes NaN, which linear_sum_assignment rejects
      return count ? sum / count : NaN;
    });
  });
  if (invalid || !cost.length) return 0;
  const cols = minAssignment(cost);
  if (!cols) return 0;
  let sum = 0;
  cols.forEach((c, i) => (sum += cost[i][c]));
  return Math.exp(-(sum / cols.length));
}

/** A measure of one table's snapshot against the target rows, given the reference milestone's snapshot. */
type TableSimilarity = (
  ns: Namespace,
  snapshot: Row[],
  target: Row[],
  measures: Measures,
  reference: Row[],
  targetSchema?: Record<string, string>,
) => number;

/** evaluation.addition_similarity: snapshot ⊇ reference, and what was added matches the target. */
export const additionSimilarity: TableSimilarity = (ns, snapshot, target, measures, reference, targetSchema) => {
  const { snap, ref, cols } = comparable(ns, snapshot, reference);
  let joined = 0;
  for (const s of snap) for (const r of ref) if (joinEqual(s, r, cols)) joined++;
  if (ref.length !== joined) return 0;
  return newRowsSimilarity(snap, ref, cols, target, measures, targetSchema);
};

/** evaluation.removal_similarity: addition with snapshot and reference swapped. */
export const removalSimilarity: TableSimilarity = (ns, snapshot, target, measures, reference, targetSchema) => {
  return additionSimilarity(ns, reference, target, measures, snapshot, targetSchema);
};

/** evaluation.update_similarity: same row count, and the rows not in the reference match the target. */
export const updateSimilarity: TableSimilarity = (ns, snapshot, target, measures, reference, targetSchema) => {
  const { snap, ref, cols } = comparable(ns, snapshot, reference);
  if (ref.length !== snap.length) return 0;
  return newRowsSimilarity(snap, ref, cols, target, measures, targetSchema);
};

/**
 * Snapshot and reference as the addition and update measures compare them: index dropped, nulls
 * filled, joined on every column but the message index.
 */
function comparable(ns: Namespace, snapshot: Row[], reference: Row[]): { snap: Row[]; ref: Row[]; cols: string[] } {
  return {
    snap: fillNullZero(dropIndex(snapshot), ns),
    ref: fillNullZero(dropIndex(reference), ns),
    cols: SCHEMAS[ns].columns.filter((c) => c !== 'sandbox_message_index'),
  };
}

/** Similarity to the target of the snapshot rows that join no reference row (the added or changed ones). */
function newRowsSimilarity(
  snap: Row[],
  ref: Row[],
  cols: string[],
  target: Row[],
  measures: Measures,
  targetSchema?: Record<string, string>,
): number {
  const fresh = snap.filter((s) => !ref.some((r) => joinEqual(s, r, cols)));
  return snapshotSimilarity(fresh, fillNullZero(target, 'target', targetSchema), measures);
}

/** evaluation.guardrail_similarity: 1 iff the snapshot equals the reference (row order included). */
export function guardrailSimilarity(snapshot: Row[], reference: Row[]): number {
  return snapshot.length === reference.length && snapshot.every((r, i) => rowsIdentical(r, reference[i])) ? 1 : 0;
}

function rowsIdentical(a: Row, b: Row): boolean {
  const keys = Object.keys(a);
  return (
    keys.length === Object.keys(b).length &&
    keys.every((k) => (a[k] === null ? b[k] === null : b[k] !== null && pyEquals(a[k], b[k])))
  );
}

// ---------------------------------------------------------------------------------------------
// Tool trace extractors (tool_sandbox/common/tool_trace_extractors.py).

type Trace = { tool_name: string; arguments: Record<string, unknown>; result: unknown };
type Extracted = Record<string, unknown>;

/** Python float(x) of a JSON value; TypeError/ValueError for what Python's float() rejects. */
function pyFloat(v: unknown): number {
  if (typeof v === 'number') return v;
  if (typeof v === 'boolean') return Number(v);
  if (typeof v === 'string' && /^\s*[+-]?(\d+\.?\d*(e[+-]?\d+)?|\.\d+(e[+-]?\d+)?|inf(inity)?|nan)\s*$/i.test(v)) {
    const t = v
      .trim()
      .toLowerCase()
      .replace(/^([+-]?)inf(inity)?$/, '$1Infinity');
    return t === 'nan' || t === '+nan' || t === '-nan' ? NaN : Number(t);
  }
  throw new TypeError(`float() argument: ${JSON.stringify(v)}`);
}

function pyInt(v: unknown): number {
  if (typeof v === 'number') return Math.trunc(v);
  if (typeof v === 'boolean') return Number(v);
  if (typeof v === 'string' && /^\s*[+-]?\d+\s*$/.test(v)) return Number(v);
  throw new TypeError(`int() argument: ${JSON.stringify(v)}`);
}

const field = (o: unknown, k: string): unknown => {
  if (o === null || typeof o !== 'object' || Array.isArray(o) || !(k in (o as object)))
    throw new TypeError(`missing key ${k}`);
  return (o as Record<string, unknown>)[k];
};

/** default_value_normalization of a float: 0 to 3 decimals. */
const normalisations = (x: number): string[] => [0, 1, 2, 3].map((d) => pyFixed(x, d));

export const EXTRACTORS: Record<string, (t: Trace) => Extracted[]> = {
  search_weather_around_lat_lon_temperature_extractor: (t) => {
    try {
      return normalisations(pyFloat(field(t.result, 'current_temperature'))).map((temperature) => ({ temperature }));
    } catch {
      return [];
    }
  },
  result_to_timestamp0_extractor: (t) => [{ timestamp_0: new PyFloat(pyFloat(t.result)) }],
  result_to_timestamp1_extractor: (t) => [{ timestamp_1: new PyFloat(pyFloat(t.result)) }],
  days_extractor: (t) => [{ days: pyInt(field(t.result, 'days')) }],
  lat_lon_dict_extractor: (t) => [{ latitude: field(t.result, 'latitude'), longitude: field(t.result, 'longitude') }],
  current_temperature_extractor: (t) => [{ amount: new PyFloat(pyFloat(field(t.result, 'current_temperature'))) }],
  result_to_temperature_extractor: (t) => normalisations(pyFloat(t.result)).map((temperature) => ({ temperature })),
  result_to_reminder_timestamp_lowerbound_extractor: (t) => [
    { reminder_timestamp_lowerbound: new PyFloat(pyFloat(t.result)) },
  ],
  min_temperature_amount_extractor: (t) => [{ amount: new PyFloat(pyFloat(field(t.result, 'min_temperature'))) }],
  min_temperature_extractor: (t) => normalisations(pyFloat(t.result)).map((min_temperature) => ({ min_temperature })),
};

/** JSON with PyFloat unwrapped (json.dumps writes a float as its repr; the reader only sees numbers). */
const plain = (v: unknown): unknown =>
  v instanceof PyFloat
    ? v.value
    : Array.isArray(v)
      ? v.map(plain)
      : v && typeof v === 'object'
        ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, plain(x)]))
        : v;

/**
 * evaluation.tool_trace_dependant_similarity: values extracted from the reference message's tool
 * traces are filled into the target's tool_trace arguments or content template; the best fill wins.
 */
export function toolTraceDependantSimilarity(
  snapshot: Row[],
  target: Row[],
  measures: Measures,
  reference: Row[],
  fillTo: 'tool_trace' | 'content',
  extractor: string,
): number {
  if (snapshot.length !== 1 || reference.length !== 1)
    throw new Error('tool_trace_dependant_similarity can only be used with SANDBOX database with only 1 row');
  const extract = EXTRACTORS[extractor];
  if (!extract) throw new Error(`extractor: unknown tool trace extractor '${extractor}'`);
  const traces = reference[0].tool_trace as string[] | null;
  if (traces === null) return 0;
  const extracted: Extracted[] = [];
  for (const json of traces) {
    try {
      extracted.push(...extract(JSON.parse(json) as Trace));
    } catch (e) {
      if (!(e instanceof TypeError || e instanceof PyKeyError)) throw e;
    }
  }
  let similarity = 0;
  try {
    for (const value of extracted) {
      if (fillTo === 'tool_trace') {
        const parsed = JSON.parse(String(target[0].tool_trace)) as unknown;
        const candidates = (Array.isArray(parsed) ? parsed : [parsed]) as Trace[];
        const filled: Trace[] = [];
        for (const c of candidates) {
          filled.push({ ...structuredClone(c), arguments: { ...c.arguments, ...value } });
          filled.push({ ...structuredClone(c), arguments: { ...value, ...c.arguments } });
        }
        const t = target.map((r) => ({ ...r, tool_trace: JSON.stringify(plain(filled)) }));
        similarity = Math.max(similarity, snapshotSimilarity(snapshot, t, measures));
      } else {
        const content = pyFormat(String(target[0].content), value);
        const t = target.map((r) => ({ ...r, content }));
        similarity = Math.max(similarity, snapshotSimilarity(snapshot, t, measures));
      }
    }
  } catch (e) {
    if (e instanceof PyKeyError) return 0;
    throw e;
  }
  return similarity;
}

// ---------------------------------------------------------------------------------------------
// Milestones, minefields and the matcher.

export type SnapshotMeasure =
  | {
      name:
        | 'snapshot_similarity'
        | 'addition_similarity'
        | 'removal_similarity'
        | 'update_similarity'
        | 'guardrail_similarity';
    }
  | { name: 'tool_trace_dependant_similarity'; fill_to: 'tool_trace' | 'content'; extractor: string };

export interface SnapshotConstraint {
  database_namespace: Namespace;
  snapshot_constraint: SnapshotMeasure;
  /** The milestone whose matched snapshot is the reference; -1 = the first user message; null = none. */
  reference_milestone_node_index: number | null;
  target_dataframe: Row[] | null;
  /** The target's polars dtypes ("String", "Float64", …): what fill_null fills a None with. */
  target_schema?: Record<string, string>;
  /** Overrides of the default column measures (SnapshotConstraint.__attrs_post_init__ merges them). */
  column_similarity_measure?: Record<string, ColumnMeasure>;
}

export interface Milestone {
  snapshot_constraints: SnapshotConstraint[];
  /** Databases guarded against change; null = all (Milestone.__attrs_post_init__). */
  guardrail_database_list?: Namespace[] | null;
  guardrail_database_exclusion_list?: Namespace[] | null;
}

export interface MatcherSpec {
  milestones: Milestone[];
  /** DAG edges; null = a chain 0 → 1 → … */
  edge_list?: [number, number][] | null;
}

interface Dag {
  nodes: number[];
  edges: [number, number][];
}

/** Matches a list of milestones (or minefields) against a finished context (MilestoneMatcher). */
export class MilestoneMatcher {
  readonly milestones: Milestone[];
  private readonly dag: Dag;

  constructor(spec: MatcherSpec) {
    this.milestones = structuredClone(spec.milestones).map(withGuardrailDefaults);
    const edges = spec.edge_list ?? this.milestones.slice(1).map((_, i) => [i, i + 1] as [number, number]);
    // networkx.DiGraph(edge_list) holds the nodes named by the edges, in order of appearance.
    const nodes: number[] = [];
    if (this.milestones.length === 1) nodes.push(0);
    else for (const [a, b] of edges) for (const n of [a, b]) if (!nodes.includes(n)) nodes.push(n);
    this.dag = { nodes, edges: this.milestones.length === 1 ? [] : edges };
    this.addGuardrails();
  }

  /** _add_guardrail_constraints: guard each database no constraint of i, its references or predecessors touches. */
  private addGuardrails(): void {
    const added: SnapshotConstraint[][] = this.milestones.map(() => []);
    for (const i of this.dag.nodes) {
      const own = this.milestones[i].snapshot_constraints;
      const refs = new Set(own.map((c) => c.reference_milestone_node_index).filter((x): x is number => x !== null));
      const preds = new Set(this.dag.edges.filter(([, b]) => b === i).map(([a]) => a));
      const guarded = new Set(this.milestones[i].guardrail_database_list ?? []);
      guarded.delete('SANDBOX');
      for (const j of new Set([i, ...refs, ...preds])) {
        // Python's milestones[-1] is the last milestone, so a reference to the first user message
        // (-1) also exempts the databases the last milestone constrains.
        const m = this.milestones.at(j)!;
        for (const c of m.snapshot_constraints) guarded.delete(c.database_namespace);
      }
      for (const ref of new Set([...refs, ...preds])) {
        for (const ns of guarded) {
          added[i].push({
            database_namespace: ns,
            snapshot_constraint: { name: 'guardrail_similarity' },
            reference_milestone_node_index: ref,
            target_dataframe: null,
          });
        }
      }
    }
    added.forEach((cs, i) => this.milestones[i].snapshot_constraints.push(...cs));
  }

  /** compute_mapping_and_similarity: null similarity when there are no milestones. */
  match(ctx: SandboxContext): { mapping: Map<number, [number, number]>; similarity: number | null } {
    if (!this.dag.nodes.length) return { mapping: new Map(), similarity: null };
    const snapshots = new SnapshotCache(ctx);
    const calculators = this.milestones.map((m) => new CachedSimilarity(snapshots, m));
    const { mapping, sum } = this.dfs(
      new Map(),
      calculators,
      0,
      this.dag,
      ctx.firstUserSandboxMessageIndex,
      ctx.maxSandboxMessageIndex,
    );
    return { mapping, similarity: sum / this.milestones.length };
  }

  /** _dfs: best-first over (milestone, snapshot) pairs with 0 in-degree, pruned by the remaining upper bound. */
  private dfs(
    assigned: Map<number, [number, number]>,
    calc: CachedSimilarity[],
    assignedSum: number,
    remaining: Dag,
    minIndex: number,
    maxIndex: number,
  ): { mapping: Map<number, [number, number]>; sum: number } {
    if (!remaining.nodes.length) return { mapping: assigned, sum: assignedSum };
    const last = assigned.size ? [...assigned.values()].at(-1)![0] : minIndex;
    let bestMapping = new Map<number, [number, number]>();
    let bestSum = -1;
    const heap: [number, number, number][] = [];
    for (const m of remaining.nodes) {
      if (remaining.edges.some(([, b]) => b === m)) continue;
      for (let s = maxIndex; s >= last; s--) heap.push([-calc[m].similarity(s, assigned), m, s]);
    }
    // heapq pops tuples in ascending order: highest similarity, then lowest milestone, then lowest snapshot.
    heap.sort((a, b) => a[0] - b[0] || a[1] - b[1] || a[2] - b[2]);
    for (const [negSim, m, s] of heap) {
      const sim = -negSim;
      if (assignedSum + sim + remaining.nodes.length - 1 <= bestSum) continue;
      const next = new Map(assigned);
      next.set(m, [s, sim]);
      const rest: Dag = {
        nodes: remaining.nodes.filter((n) => n !== m),
        edges: remaining.edges.filter(([a, b]) => a !== m && b !== m),
      };
      const r = this.dfs(next, calc, assignedSum + sim, rest, minIndex, maxIndex);
      if (r.sum > bestSum) {
        bestMapping = r.mapping;
        bestSum = r.sum;
      }
    }
    return { mapping: bestMapping, sum: bestSum };
  }
}

function withGuardrailDefaults(m: Milestone): Milestone {
  if (m.guardrail_database_list && m.guardrail_database_exclusion_list)
    throw new Error('Only one of guardrail_database_list, guardrail_database_exclusion_list should be set');
  let list = m.guardrail_database_list ?? [...NAMESPACES];
  if (m.guardrail_database_exclusion_list) list = list.filter((x) => !m.guardrail_database_exclusion_list!.includes(x));
  return { ...m, guardrail_database_list: list };
}

/** Snapshots of a finished context, read once per (database, snapshot index); callers must not mutate them. */
class SnapshotCache {
  private readonly rows = new Map<string, Row[]>();

  constructor(readonly ctx: SandboxContext) {}

  /** The index of the snapshot that `index` resolves to (equal indices = identical snapshots). */
  resolve(ns: Namespace, index: number): number {
    return this.ctx.snapshotIndex(ns, index);
  }

  get(ns: Namespace, index: number): Row[] {
    const key = `${ns}:${this.resolve(ns, index)}`;
    let rows = this.rows.get(key);
    if (!rows) {
      rows = this.ctx.getDatabase(ns, { index });
      this.rows.set(key, rows);
    }
    return rows;
  }
}

const TABLE_SIMILARITIES = {
  addition_similarity: additionSimilarity,
  removal_similarity: removalSimilarity,
  update_similarity: updateSimilarity,
};

/** CachedSimilarityCalculator: geometric mean of a milestone's constraint similarities (guardrails multiply but do not count). */
class CachedSimilarity {
  private readonly cache: Map<string, number>[];

  constructor(
    private readonly snapshots: SnapshotCache,
    private readonly milestone: Milestone,
  ) {
    this.cache = milestone.snapshot_constraints.map(() => new Map());
  }

  similarity(current: number, mapping: Map<number, [number, number]>): number {
    let product = 1;
    let count = 0;
    this.milestone.snapshot_constraints.forEach((c, k) => {
      const refMilestone = c.reference_milestone_node_index;
      let refIndex: number | null;
      if (refMilestone === null) refIndex = null;
      else if (refMilestone === -1) refIndex = this.snapshots.ctx.firstUserSandboxMessageIndex;
      else {
        const hit = mapping.get(refMilestone);
        if (!hit) throw new Error(`milestone references milestone ${refMilestone}, which is not matched before it`);
        refIndex = hit[0];
      }
      const key = `${current},${refIndex}`;
      let v = this.cache[k].get(key);
      if (v === undefined) {
        const ns = c.database_namespace;
        // A guardrail between two indices that resolve to the same snapshot holds trivially.
        v =
          c.snapshot_constraint.name === 'guardrail_similarity' &&
          refIndex !== null &&
          this.snapshots.resolve(ns, current) === this.snapshots.resolve(ns, refIndex)
            ? 1
            : constraintSimilarity(
                c,
                this.snapshots.get(ns, current),
                refIndex === null ? null : this.snapshots.get(ns, refIndex),
              );
        this.cache[k].set(key, v);
      }
      product *= v;
      count += c.snapshot_constraint.name === 'guardrail_similarity' ? 0 : 1;
    });
    return Math.pow(product, 1 / count);
  }
}

export function constraintSimilarity(c: SnapshotConstraint, snapshot: Row[], reference: Row[] | null): number {
  const measures: Measures = {
    ...DEFAULT_COLUMN_MEASURES[c.database_namespace],
    ...(c.column_similarity_measure ?? {}),
  };
  const target = c.target_dataframe;
  const need = <T>(v: T | null, what: string): T => {
    if (v === null) throw new Error(`${c.snapshot_constraint.name} on ${c.database_namespace} needs ${what}`);
    return v;
  };
  const ns = c.database_namespace;
  switch (c.snapshot_constraint.name) {
    case 'snapshot_similarity':
      return snapshotSimilarity(snapshot, need(target, 'a target_dataframe'), measures);
    case 'addition_similarity':
    case 'removal_similarity':
    case 'update_similarity':
      return TABLE_SIMILARITIES[c.snapshot_constraint.name](
        ns,
        snapshot,
        need(target, 'a target_dataframe'),
        measures,
        need(reference, 'a reference milestone'),
        c.target_schema,
      );
    case 'guardrail_similarity':
      return guardrailSimilarity(snapshot, need(reference, 'a reference milestone'));
    case 'tool_trace_dependant_similarity':
      return toolTraceDependantSimilarity(
        snapshot,
        need(target, 'a target_dataframe'),
        measures,
        need(reference, 'a reference milestone'),
        c.snapshot_constraint.fill_to,
        c.snapshot_constraint.extractor,
      );
  }
}

export interface EvaluationSpec {
  milestones: Milestone[];
  milestone_edge_list?: [number, number][] | null;
  minefields: Milestone[];
  minefield_edge_list?: [number, number][] | null;
}

export interface EvaluationResult {
  /** milestone index → [snapshot index, similarity], sorted by milestone. */
  milestone_mapping: [number, [number, number]][];
  minefield_mapping: [number, [number, number]][];
  milestone_similarity: number;
  minefield_similarity: number;
  /** 0 as soon as any minefield matches with non-zero similarity. */
  similarity: number;
  turn_count: number;
}

/** Evaluation.evaluate. */
export function evaluateContext(spec: EvaluationSpec, ctx: SandboxContext): EvaluationResult {
  const ms = new MilestoneMatcher({ milestones: spec.milestones, edge_list: spec.milestone_edge_list }).match(ctx);
  const mf = new MilestoneMatcher({ milestones: spec.minefields, edge_list: spec.minefield_edge_list }).match(ctx);
  const milestone_similarity = ms.similarity ?? 1;
  const minefield_similarity = mf.similarity ?? 0;
  return {
    milestone_mapping: [...ms.mapping.entries()].sort((a, b) => a[0] - b[0]),
    minefield_mapping: [...mf.mapping.entries()],
    milestone_similarity,
    minefield_similarity,
    similarity: (minefield_similarity === 0 ? 1 : 0) * milestone_similarity,
    turn_count: effectiveTurnCount(ctx),
  };
}

/** get_effective_turn_count: messages other than system, user↔execution-environment and user few-shot (null visible_to drops out too, as polars filters nulls). */
export function effectiveTurnCount(ctx: SandboxContext): number {
  return ctx.getDatabase('SANDBOX', { allHistory: true }).filter((r) => {
    const userExec =
      (r.sender === 'USER' && r.recipient === 'EXECUTION_ENVIRONMENT') ||
      (r.sender === 'EXECUTION_ENVIRONMENT' && r.recipient === 'USER');
    const v = r.visible_to as string[] | null;
    return r.sender !== 'SYSTEM' && !userExec && v !== null && !(v.length === 1 && v[0] === 'USER');
  }).length;
}

/** A run's summary as the paper reports it: mean similarity, perfect (= 1.0) count, per category. */
export interface SimilaritySummary {
  n: number;
  meanSimilarity: number;
  perfect: number;
  byCategory: Record<string, { n: number; meanSimilarity: number; perfect: number }>;
}

export function summarise(results: { similarity: number; categories: string[] }[]): SimilaritySummary {
  const agg = (rs: { similarity: number }[]) => ({
    n: rs.length,
    meanSimilarity: rs.length ? rs.reduce((s, r) => s + r.similarity, 0) / rs.length : 0,
    perfect: rs.filter((r) => r.similarity === 1).length,
  });
  const cats = [...new Set(results.flatMap((r) => r.categories))].sort();
  return {
    ...agg(results),
    byCategory: Object.fromEntries(cats.map((c) => [c, agg(results.filter((r) => r.categories.includes(c)))])),
  };
}
