/**
 * Red-team rerun 38 (an outside pass on 0269b39: the gold anchor after rerun 37's fixes).
 * Run by `node --import tsx bench/sandbox-redteam.ts bench/redteam/rerun38.ts`. The findings are outside the harness
 * (scripts in /tmp/rerun38, NOTES.md; rerun 37's setup, served by the real goldAnchorCapsOf).
 * - NUMFACT: the answer is a status word, gold's words also say a count; with numbers-first facts the count alone or a
 *   wrong status with it was paid 16/16. Fixed: facts are the numbers and instance values gold says, less what the
 *   opening's user messages say.
 * - FLOAT_SUBMIT: gold's total a float sum on 19% of seeds; the right total to the cent paid 0 there. Fixed: amounts in
 *   gold's arguments match to within 0.005.
 * - ANCHOR_DOS: 1 MiB of gold words, 40,000 instance strings: 79 s per reset on the worker's event loop. Fixed: no
 *   anchor past 64 KiB of gold words; linear fact matching (0.82 s / 0.54 s resets, 0.13 s longest stall).
 * - MARGIN_WORDS: every play lacking gold's words paid 0.9. Fixed: that cap is at most maxTrivialReward where gold
 *   without its messages scored below gold.
 * The probe below: a control, a module answering an empty episode with 0.9.
 */
import type { Attack } from '../sandbox-redteam.js';

const attacks: Record<string, Attack> = {
  // control: a module may pay the empty episode anything; the gold anchor bounds it in training
  controlMargin: `return JSON.stringify({ reward: 0.9, components: {}, success: false });`,
};
export default attacks;
