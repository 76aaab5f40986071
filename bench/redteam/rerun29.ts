/**
 * Red-team rerun 29 (a short outside pass on cc84492, the fixes of rerun 28, one validation at a time beside the CI).
 * Run by `node --import tsx bench/sandbox-redteam.ts bench/redteam/rerun29.ts`. The findings are outside the harness
 * (scripts in /tmp/rerun29, NOTES.md; the setup of rerun 28: real validateCandidate with a scripted base policy, the
 * trainer's real `collect`, G2 K8, 8 turns, 4 tool errors).
 * - PAY_LOOPLAST: pays max_steps after the right lookup and list_orders unless the lookup was repeated (check 5's loop
 *   variant repeated gold's first call). Passed checks 1-6; training 16/16 native and action (lookup, then list_orders
 *   to the turn limit). PAY_MAXERR: pays max_errors after the right list (list_orders on a missing customer, a ToolError
 *   the env raises). Passed checks 1-6; training 16/16 both formats. Fixed at the root: a generated env's episode that
 *   ends max_steps, max_errors, timeout or error scores 0 whatever the module answers (the SDK's evaluate does so);
 *   the loop variant is gone. The pass's prototype of this fix: 29a and 29b 0/16, the honest module passed 1-6 (13.5 s).
 * - PAY_STOP_REPEAT: a silent stop after the lookup and list_orders made twice. Passed checks 1-6 (paidStops judges
 *   only prefixes of gold); training 16/16. Fixed after the pass: training pays an ending without words, on a seed
 *   whose gold ends in words, at most check 5's silentEndingCap (0.3 here; test in synthesis-gaming).
 * What held (read): no way to have training reset by task id after seedsOnly (no task list, no inspect resets or forks
 *   from the trainer); validation's 4 tool errors are the trainer's.
 * The probe below: a control, the module's own answer to an episode it sees end at the turn limit.
 */
import type { Attack } from '../sandbox-redteam.js';

const attacks: Record<string, Attack> = {
  // control: a module can still answer anything; what the worker makes of an abnormal end is outside the sandbox
  controlAnswer: `return JSON.stringify({ reward: 1, components: {}, success: true });`,
};
export default attacks;
