/**
 * Red-team rerun 34 (an outside pass on ca0a98d: gold held to the most any of check 5's golds spoke).
 * Run by `node --import tsx bench/sandbox-redteam.ts bench/redteam/rerun34.ts`. The findings are outside the harness
 * (scripts in /tmp/rerun34, NOTES.md; rerun 33's setup).
 * - MIX_DUP_SUBMIT: golds that speak make no call, golds that call answer through submit_total and never speak, so
 *   check 5 played no gold without its messages and no cap was recorded. Passed checks 1-6 3/3; the silent sign 16/16 in
 *   both batches, native and action (honest 0/16). Fixed: gold without its messages is played wherever gold has one
 *   (a stop at once where it makes no call); a verdict where gold spoke and no cap was measured reads as cap 0.
 * - PAY_DUP (rerun 29's sign on the honest fixture): capped 0.3 in every episode.
 * The probe below: a control, a module answering an empty episode.
 */
import type { Attack } from '../sandbox-redteam.js';

const attacks: Record<string, Attack> = {
  // control: a module may pay a stop at once; check 5 now plays it as gold without its words where gold only speaks
  controlStopAtOnce: `return JSON.stringify({ reward: 1, components: {}, success: true });`,
};
export default attacks;
