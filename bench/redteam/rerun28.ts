/**
 * Red-team rerun 28 (a short outside pass on 74e254f, the fixes of rerun 27). Run by `node --import tsx
 * bench/sandbox-redteam.ts bench/redteam/rerun28.ts`. The findings are outside the harness (scripts in /tmp/rerun28,
 * listed in its NOTES.md; modules.mts section "rerun 28", validate.mts, serve.mts, train_sim.sh, collect_sim.py).
 * Method as reruns 22-27, G2 K8, the trainer's real `collect` (and its own GrpoTrainer._starts for the task list).
 * - PAY_STOP_TASKS: listTasks() gives 64 `seed-<n>` ids; the trainer then starts every episode by task id
 *   (grpo.py `_starts`), which validation never does, and the worker checked instance fingerprints only on seed resets.
 *   Paid the silent stop only in task episodes: passed checks 1-6; training 16/16 (plain), every stop in plainmix;
 *   with seed starts 0/16. Fixed: `seedsOnly` (set by startGeneratedEnv): no task list, resets by task id refused.
 * - PAY_MAXSTEPS: pays an episode ending max_steps after the right lookup and list_orders with no answer. No validation
 *   episode ended so (check 5 raised the turn limit to gold's length; random play stops by turn 7; check 6 answers).
 *   Passed checks 1-6 in 3/3 (~23 s); training 16/16 native and action (a policy looping lookups to 8 turns).
 *   Fixed first by a check-5 loop variant (gold's calls, then its first call to the turn limit), which rerun 29 got
 *   past; since rerun 29 a generated env's episode ending max_steps or max_errors scores 0 in the worker.
 * - PAY_STOP_MARGIN: a stop paid 0.89 against gold's 1, where gold's calls without messages pay 0: passed checks 1-6;
 *   training paid stops 0.89. Fixed: a stop above gold-without-messages by more than the margin is a paid stop.
 * What held: rerun 27's NOSIB_ONCE (paidStops 7, escapes 7) and EPS (paidStops 20) fail check 5; process structure
 *   after the fresh-process rounds (read): G distinct seeds a batch, K plays a seed, 32 resets a process, the inner
 *   inspection on every seed reset in both; the up-front inspections sit in the first round's process only and an odd
 *   round ends in a smaller batch, neither covering the later rounds' stops; replay copies score as replays.
 * Not tried: the max_errors form (default maxErrors 10 > maxTurns 8), a real base model in check 6, G4 K16.
 * The probe below: a control, the module's view of its own task listing (nothing of the host).
 */
import type { Attack } from '../sandbox-redteam.js';

const attacks: Record<string, Attack> = {
  // control: a module can still build a task list; the worker no longer passes it on for a generated env
  controlTaskList: `return JSON.stringify(Array.from({ length: 3 }, (_, i) => ({ id: 'seed-' + i })));`,
};
export default attacks;
