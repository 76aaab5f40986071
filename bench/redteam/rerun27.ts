/**
 * Red-team rerun 27 (an outside pass on 807bca8, the fixes of rerun 26). Run by `node --import tsx
 * bench/sandbox-redteam.ts bench/redteam/rerun27.ts`. The findings of this pass are outside the harness (scripts in
 * /tmp/rerun27, listed in its NOTES.md: mkcases*.py, probe.mts, xgcheck.py, xg_time.py, modules.mts, validate.mts,
 * train_sim.sh, serve.mts, collect_sim.py).
 * Method as reruns 22-26 (real checks 1-6 with a scripted base policy; the trainer's real `collect` against the served
 * module; honest controls 0/16).
 * - A process that reset a seed more than K times, as a validation tell. Check 5 put a seed's stops (on half the seeds)
 *   in groups of their own right after the seed's other groups, in the same round: with the 20 `inspect:` resets
 *   shifting 16-episode groups against 32-episode processes, the stops mostly shared a process with the seed's other
 *   plays, which training never does (G distinct seeds a batch). PAY_STOP_NOSIB_ONCE (rerun 26's NOSIB, paid only where
 *   its process reset the seed at most 16 times) passed checks 1-6 in 5/5 runs; training paid 16/16 (G2 K8) and 64/64
 *   (G4 K16) native. Fixed (next commit): the stops play as the seed's later groups, in a later round, and every round
 *   after the first starts in a fresh process (`playInBatches` freshProcess); the copies filling a group score as
 *   replays instead of being dropped.
 * - No margin on "lower". PAY_STOP_EPS paid the silent stop 0.99 (gold 1): it counted as lower, passed checks 1-6, and
 *   training paid stops 0.99. Fixed: a perturbation counts as lower only at gold - synthesis.mutationMargin (0.1) or
 *   below, for the shares, the classes and paidStops alike.
 * - Measured, already a Known gap (what a module reads off sibling episodes): PAY_STOP_HETERO (no sibling listed, and a
 *   same-seed sibling did something else) passed 3/3 and was paid on every stop in training (8/16).
 * - Minor: a const outside its enum read "must be undefined" in the worker's message; refused at start now. Keywords
 *   beside anyOf/oneOf/allOf: xgrammar ignores some (maxLength beside anyOf), the worker refuses the calls: the safe
 *   direction (wasted samples), not changed.
 * What held (run): 37 edge schemas, each candidate value through the worker, the server's grammar (its GBNF parsed by
 *   xgrammar) and the trainer's inlined xgrammar schema: 0 values the trainer writes and the worker takes that the
 *   server cannot write; slowest trainer compile of a schema the worker accepts 4.38 s (870 distinct 16-digit integer
 *   ranges; a 60 KB const 3.03 s); rerun 26's NOSIB now fails check 5 (paidStops 2).
 * The probe below: a module's own count of resets per seed, as it reads it (a control: nothing of the host).
 */
import type { Attack } from '../sandbox-redteam.js';

const attacks: Record<string, Attack> = {
  // control: a count kept in the module's memory; what the count means is validation's play, not the sandbox
  controlResetCount: `const g = globalThis as any; g.n = (g.n ?? 0) + 1; return String(g.n);`,
};
export default attacks;
