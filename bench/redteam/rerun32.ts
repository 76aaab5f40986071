/**
 * Red-team rerun 32 (an outside pass on de9836a: inspections through a seeded reset).
 * Run by `node --import tsx bench/sandbox-redteam.ts bench/redteam/rerun32.ts`. The findings are outside the harness
 * (scripts in /tmp/rerun32, NOTES.md; rerun 31's setup).
 * - HIST_DUP: once its process had evaluated an episode unlike gold (calls not a subsequence of gold's, or text not
 *   gold's), every inspection showed gold without its words. Passed checks 1-6 3/3 (cap 0.3); the silent sign 0/16 in a
 *   batch in a fresh process, 16/16 in the next batch of the same process, native and action. Fixed: gold is held to
 *   speak at least as the least of check 5's golds did (goldSpeechFloor in the verdict).
 * - odd inspection ids, a view that is not JSON, a throwing inspection, a 3.5 MB view: held.
 * The probe below: a control, a module that keeps state across the episodes of its process.
 */
import type { Attack } from '../sandbox-redteam.js';

const attacks: Record<string, Attack> = {
  // control: module state lives as long as the process; what it shows a view after is bounded by the verdict's floor
  controlHistory: `const g = globalThis as any; g.seen = (g.seen ?? 0) + 1; return String(g.seen);`,
};
export default attacks;
