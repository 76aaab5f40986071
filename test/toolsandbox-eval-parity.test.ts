import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { NAMESPACES, type Namespace, type Row, type SandboxContext } from '../envs/toolsandbox/context.js';
import { evaluateContext } from '../envs/toolsandbox/evaluator.js';
import { loadScenarios } from '../envs/toolsandbox/scenarios.js';

/**
 * Similarities of scripted trajectories over all 129 base scenarios, compared with ToolSandbox's own
 * Evaluation.evaluate (fixture written by upstream in a scratch venv; see test/fixtures/toolsandbox/README.md).
 * Each trajectory is a list of world-state operations replayed here on the scenario's starting
 * context, so the snapshot bookkeeping is checked too (row counts of every database).
 */
type Op =
  | { op: 'add'; ns: Namespace; rows: Row[] }
  | { op: 'remove'; ns: Namespace; match: Row }
  | { op: 'update'; ns: Namespace; rows: Row[] };
interface Fixture {
  scenario: string;
  variant: string;
  ops: Op[];
  rows: Record<Namespace, number>;
  expected: {
    similarity: number;
    milestone_similarity: number;
    minefield_similarity: number;
    turn_count: number;
    milestone_mapping: [number, [number, number]][];
    minefield_mapping: [number, [number, number]][];
  };
}
const fixtures = readFileSync(new URL('./fixtures/toolsandbox/eval-expected.jsonl', import.meta.url), 'utf8')
  .trimEnd()
  .split('\n')
  .map((l) => JSON.parse(l) as Fixture);

function replay(ctx: SandboxContext, ops: Op[]): void {
  for (const o of ops) {
    if (o.op === 'add') ctx.addToDatabase(o.ns, o.rows);
    else if (o.op === 'update') ctx.updateDatabase(o.ns, o.rows);
    else ctx.removeFromDatabase(o.ns, (r) => Object.entries(o.match).every(([k, v]) => r[k] === v));
  }
}

test(`upstream's similarity and milestone mapping on ${fixtures.length} scripted trajectories, to 1e-9`, () => {
  const scenarios = new Map(
    loadScenarios()
      .filter((s) => s.variant === 'base')
      .map((s) => [s.name, s]),
  );
  assert.equal(new Set(fixtures.map((f) => f.scenario)).size, 129);
  const bad: string[] = [];
  for (const f of fixtures) {
    const s = scenarios.get(f.scenario)!;
    const ctx = s.startingContext();
    replay(ctx, f.ops);
    for (const ns of NAMESPACES) assert.equal(ctx.dbs[ns].length, f.rows[ns], `${f.scenario}/${f.variant}: ${ns} rows`);
    const r = evaluateContext(s.evaluation, ctx);
    const e = f.expected;
    const off = (a: number, b: number) => Math.abs(a - b) > 1e-9;
    if (
      off(r.similarity, e.similarity) ||
      off(r.milestone_similarity, e.milestone_similarity) ||
      off(r.minefield_similarity, e.minefield_similarity) ||
      r.turn_count !== e.turn_count
    ) {
      bad.push(
        `${f.scenario}/${f.variant}: ours ${r.similarity} (${r.milestone_similarity}, ${r.minefield_similarity}, ${r.turn_count}) upstream ${e.similarity} (${e.milestone_similarity}, ${e.minefield_similarity}, ${e.turn_count})`,
      );
    }
    // The same matching: each milestone (and minefield) on the same snapshot, with the same similarity.
    const sameMapping = (ours: [number, [number, number]][], theirs: [number, [number, number]][]) =>
      ours.length === theirs.length &&
      ours.every(([m, [i, v]], k) => m === theirs[k][0] && i === theirs[k][1][0] && !off(v, theirs[k][1][1]));
    if (
      !sameMapping(r.milestone_mapping, e.milestone_mapping) ||
      !sameMapping(r.minefield_mapping, e.minefield_mapping)
    ) {
      bad.push(
        `${f.scenario}/${f.variant}: mapping ${JSON.stringify([r.milestone_mapping, r.minefield_mapping])} upstream ${JSON.stringify([e.milestone_mapping, e.minefield_mapping])}`,
      );
    }
  }
  assert.deepEqual(bad, []);
  // The fixtures are not degenerate: perfect, partial and zero scores all occur.
  const sims = fixtures.map((f) => f.expected.similarity);
  assert.ok(sims.some((x) => x === 1) && sims.some((x) => x === 0) && sims.some((x) => x > 0 && x < 1));
});
