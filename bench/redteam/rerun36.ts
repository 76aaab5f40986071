/**
 * Red-team rerun 36 (an outside pass on ae3ea79: the stop at once on a gold that only speaks).
 * Run by `node --import tsx bench/sandbox-redteam.ts bench/redteam/rerun36.ts`. The findings are outside the harness
 * (scripts in /tmp/rerun36, NOTES.md; rerun 35's setup).
 * - MARGIN_DUP_SUBMIT: the stop at once paid 0.9 (gold less the margin) put the cap at 0.9; passed 2/2, the sign paid
 *   0.9 in every episode. Fixed: that stop may score at most maxTrivialReward per seed.
 * - TRIVCALL_DUP_SUBMIT: gold speaks after one lookup on a tenth of seeds, scored on the lookup alone (words not
 *   required), the rest answer through a tool; cap 1; the sign 16/16. Not stopped (Known gaps).
 * The probe below: a control, a module answering an empty episode with 0.9.
 */
import type { Attack } from '../sandbox-redteam.js';

const attacks: Record<string, Attack> = {
  // control: a module may pay the empty episode anything; check 5 bounds it where gold only speaks
  controlMargin: `return JSON.stringify({ reward: 0.9, components: {}, success: false });`,
};
export default attacks;
