/**
 * Red-team rerun 35 (an outside pass on 7ae7271: gold without its words played on golds that make no call).
 * Run by `node --import tsx bench/sandbox-redteam.ts bench/redteam/rerun35.ts`. The findings are outside the harness
 * (scripts in /tmp/rerun35, NOTES.md; rerun 34's setup).
 * - STOPCAP_DUP_SUBMIT: golds that only speak on seeds = 1 mod 10, the rest answer through submit_total; the stop at
 *   once paid 1 on the former (check 4's stop-at-once mean 0.116 < 0.2) put silentEndingCap at 1. Passed 4/4; the
 *   silent sign 16/16 in both batches, native and action. Fixed: check 5 counts that stop, scoring as high as gold, as
 *   a paid stop.
 * - Side effect noticed: an honest env of that shape pays its silent gold path 0 on tool-answer seeds (cap 0).
 * The probe below: a control, a module answering an empty episode.
 */
import type { Attack } from '../sandbox-redteam.js';

const attacks: Record<string, Attack> = {
  // control: a module may pay the empty episode; check 5 now fails it where gold only speaks
  controlEmpty: `return JSON.stringify({ reward: 1, components: {}, success: true, empty: true });`,
};
export default attacks;
