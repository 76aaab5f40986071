/**
 * Red-team rerun 39 (an outside pass on 2057736: the gold anchor after rerun 38's fixes).
 * Run by `node --import tsx bench/sandbox-redteam.ts bench/redteam/rerun39.ts`. The findings are outside the harness
 * (scripts in /tmp/rerun39, NOTES.md; rerun 38's setup).
 * - CHOICES: the user's question lists every status, and facts left out what the user said: the count alone or a
 *   wrong status with it paid 16/16. Fixed: the facts are every number and instance value gold's words say.
 * - LONGVALUE: the answer a five-word product name, values over four words no facts: the count alone paid 16/16.
 *   Fixed: instance values of 3-256 characters are facts whatever their words.
 * - ANCHOR_DOS2: 64 KiB of gold words, 250,000 instance strings: resets 1.5-2.4 s, stalls under 0.5 s (bounded).
 * The probe below: a control, a module answering an empty episode with 0.9.
 */
import type { Attack } from '../sandbox-redteam.js';

const attacks: Record<string, Attack> = {
  // control: a module may pay the empty episode anything; the gold anchor bounds it in training
  controlMargin: `return JSON.stringify({ reward: 0.9, components: {}, success: false });`,
};
export default attacks;
