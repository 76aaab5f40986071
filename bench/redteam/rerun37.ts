/**
 * Red-team rerun 37 (an outside pass on c90fa3b: the gold anchor).
 * Run by `node --import tsx bench/sandbox-redteam.ts bench/redteam/rerun37.ts`. The findings are outside the harness
 * (scripts in /tmp/rerun37, NOTES.md; rerun 36's setup, served with goldAnchorCapsOf).
 * - PREFIX_DUP_SUBMIT: gold answers through submit_total; the instance's prefix makes that call in the opening, and
 *   the anchor read the opening as the agent's: passed 3/3, the sign (lookup, list twice, no submit) paid 16/16 in
 *   both formats and batches. Fixed in 7f596a7 (found in review before the pass reported): the agent's part only.
 * - MARGIN_CALLS_SUBMIT: every play lacking a gold call paid 0.9 (gold less the margin counts as lower):
 *   missingCallCap 0.9, a lookup and silence paid 0.9 in every episode. Fixed: training caps a missing call at
 *   synthesis.maxTrivialReward too.
 * - HONEST: the right total in other words ("You spent X in total.") capped to 0.3 for leaving out the status word
 *   gold's words named, as a wrong total was. Fixed: where gold's words hold a number, the numbers are the facts.
 * The probe below: a control, a module answering an empty episode with 0.9.
 */
import type { Attack } from '../sandbox-redteam.js';

const attacks: Record<string, Attack> = {
  // control: a module may pay the empty episode anything; the gold anchor bounds it in training
  controlMargin: `return JSON.stringify({ reward: 0.9, components: {}, success: false });`,
};
export default attacks;
