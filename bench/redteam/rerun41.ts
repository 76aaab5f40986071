/**
 * Red-team rerun 41 (an outside pass on 9e9b0dc: the gold anchor's facts as terms).
 * Run by `node --import tsx bench/sandbox-redteam.ts bench/redteam/rerun41.ts`. The findings are outside the harness
 * (scripts in /tmp/rerun41, NOTES.md; rerun 40's setup), fixed after the pass (RED-TEAM.md "Red-team rerun 41"):
 * - POSSESSIVE: the answer a name gold says as "Lena's": no fact; the count alone or a wrong name paid 16/16.
 * - COUNTRY / GRADE: codes that are words (`US`) or differ by a sign (`B+`, `B-`): none or one fact; paid on 4 and 9 of 10 seeds.
 * - Q: one 64 000-character word of dashes in gold: 67-74 s of the worker's loop per reset (quadratic trimming).
 * - U: instance strings of U+FDFA, 18 characters each under NFKD: 3.4-4.6 s per anchor.
 * - honest cost: common words of stored values ("one" of `one_way`) made facts: rewordings capped on 19 of 20 seeds.
 * The probe below: a control, a module answering an empty episode with 0.9 (the anchor bounds it in training).
 */
import type { Attack } from '../sandbox-redteam.js';

const attacks: Record<string, Attack> = {
  controlMargin: `return JSON.stringify({ reward: 0.9, components: {}, success: false });`,
};
export default attacks;
