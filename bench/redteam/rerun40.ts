/**
 * Red-team rerun 40 (an outside pass on 00bb2c7: the gold anchor after rerun 39's fixes).
 * Run by `node --import tsx bench/sandbox-redteam.ts bench/redteam/rerun40.ts`. The findings are outside the harness
 * (scripts in /tmp/rerun40, NOTES.md; rerun 39's setup). Not fixed (README Known gaps: what the gold anchor leaves).
 * - HUMANIZE / HUMANIZE_MIX: the answer an enum stored `in_transit`, said "in transit"; only gold's count is a fact, so
 *   the count alone or a wrong status with it paid 16/16 (4 of 10 seeds on the mixed enum).
 * - SHORTCODE: the answer a size code under 3 characters: no fact; the count alone paid 16/16.
 * - DERIVED: a boolean read out as words: the documented "gold whose words hold no fact" gap.
 * The probe below: a control, a module answering an empty episode with 0.9.
 */
import type { Attack } from '../sandbox-redteam.js';

const attacks: Record<string, Attack> = {
  // control: a module may pay the empty episode anything; the gold anchor bounds it in training
  controlMargin: `return JSON.stringify({ reward: 0.9, components: {}, success: false });`,
};
export default attacks;
