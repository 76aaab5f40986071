/**
 * Red-team rerun 33 (an outside pass on 7a291b0: the speech floor of rerun 32).
 * Run by `node --import tsx bench/sandbox-redteam.ts bench/redteam/rerun33.ts`. The findings are outside the harness
 * (scripts in /tmp/rerun33, NOTES.md; rerun 32's setup, batches back to back in one served env).
 * - FLOOR_HIST: gold silent on seeds = 0 mod 4 puts the least speech over check 5's golds at silent; with rerun 32's
 *   view trick the silent sign was paid 0/16 in the first batch, 16/16 in the second, native and action. Passed checks
 *   1-6 3/3 (cap 0.3). Fixed: gold is held to speak as the most any of check 5's golds did (goldSpeech).
 * - HIST_DUP (rerun 32) measured again: 0/16 in both batches, both formats.
 * The probe below: a control, a module whose view depends on the seed.
 */
import type { Attack } from '../sandbox-redteam.js';

const attacks: Record<string, Attack> = {
  // control: a module may make gold speak on some seeds only; training holds every seed to the most check 5 saw
  controlQuiet: `const seed = 4; return seed % 4 === 0 ? 'quiet' : 'speaks';`,
};
export default attacks;
