import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { NAMESPACES, type SandboxContext } from './context.js';
import { evaluateContext } from './evaluator.js';
import { BASE_VARIANT, loadScenarios } from './scenarios.js';

/**
 * `trace env replay toolsandbox --gold`: each base scenario's milestone-following trajectory
 * (data/toolsandbox/derived/gold-trajectories.jsonl, world-state operations; see SOURCE.md there)
 * replayed on the scenario's starting world state, scored by the port's evaluator next to
 * upstream's own score, with a hash of the final databases.
 */
const Op = z.discriminatedUnion('op', [
  z.object({ op: z.literal('add'), ns: z.enum(NAMESPACES), rows: z.array(z.record(z.string(), z.unknown())) }),
  z.object({ op: z.literal('update'), ns: z.enum(NAMESPACES), rows: z.array(z.record(z.string(), z.unknown())) }),
  z.object({ op: z.literal('remove'), ns: z.enum(NAMESPACES), match: z.record(z.string(), z.unknown()) }),
]);
const GoldLine = z.object({ scenario: z.string(), ops: z.array(Op), upstream_similarity: z.number() });
export type GoldTrajectory = z.infer<typeof GoldLine>;

const GOLD_FILE = new URL('../../data/toolsandbox/derived/gold-trajectories.jsonl', import.meta.url);

export function loadGoldTrajectories(): Map<string, GoldTrajectory> {
  const out = new Map<string, GoldTrajectory>();
  readFileSync(GOLD_FILE, 'utf8')
    .trimEnd()
    .split('\n')
    .forEach((line, i) => {
      const parsed = GoldLine.safeParse(JSON.parse(line));
      if (!parsed.success)
        throw new Error(
          `gold-trajectories.jsonl line ${i + 1}: ${parsed.error.issues[0].path.join('.')}: ${parsed.error.issues[0].message}`,
        );
      out.set(parsed.data.scenario, parsed.data);
    });
  return out;
}

export function applyOps(ctx: SandboxContext, ops: GoldTrajectory['ops']): void {
  for (const o of ops) {
    if (o.op === 'add') ctx.addToDatabase(o.ns, o.rows);
    else if (o.op === 'update') ctx.updateDatabase(o.ns, o.rows);
    else ctx.removeFromDatabase(o.ns, (r) => Object.entries(o.match).every(([k, v]) => r[k] === v));
  }
}

/** sha256 of the final SETTING / CONTACT / MESSAGING / REMINDER snapshots (rows in schema order, JSON). */
export function dbHash(ctx: SandboxContext): string {
  const dbs = Object.fromEntries(NAMESPACES.filter((ns) => ns !== 'SANDBOX').map((ns) => [ns, ctx.getDatabase(ns)]));
  return createHash('sha256').update(JSON.stringify(dbs)).digest('hex');
}

export interface GoldReplayLine {
  scenario: string;
  categories: string[];
  /** null: no gold trajectory for the scenario (every base scenario has one in the data). */
  similarity: number | null;
  upstream_similarity: number | null;
  perfect: boolean | null;
  db_hash: string | null;
  needs_network: boolean;
}

/** Every base scenario (or the one named), in data order. */
export function replayToolSandboxGold(scenario?: string): GoldReplayLine[] {
  const gold = loadGoldTrajectories();
  const base = loadScenarios().filter(
    (s) => s.variant === BASE_VARIANT && (scenario === undefined || s.name === scenario),
  );
  if (scenario !== undefined && !base.length)
    throw new Error(`--task: '${scenario}' is not a ToolSandbox base scenario`);
  return base.map((s) => {
    const g = gold.get(s.name);
    const line = { scenario: s.name, categories: s.categories, needs_network: s.needsNetwork };
    if (!g) return { ...line, similarity: null, upstream_similarity: null, perfect: null, db_hash: null };
    const ctx = s.startingContext();
    applyOps(ctx, g.ops);
    const r = evaluateContext(s.evaluation, ctx);
    return {
      ...line,
      similarity: r.similarity,
      upstream_similarity: g.upstream_similarity,
      perfect: r.similarity === 1,
      db_hash: dbHash(ctx),
    };
  });
}
