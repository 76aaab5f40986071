/**
 * Red-team rerun 30 (an outside pass on 3fd0de1, rechecked on 1353633: the silent-ending cap).
 * Run by `node --import tsx bench/sandbox-redteam.ts bench/redteam/rerun30.ts`. The findings are outside the harness
 * (scripts in /tmp/rerun30, NOTES.md: real validateCandidate with a scripted base policy, then the trainer's real
 * `collect` against the module served as training serves it, with the cap from its own validation; G2 K8, 8 turns).
 * Each paying module pays on rerun 29's sign (the right lookup once, list_orders on it twice).
 * - the sign then ".", U+200B, "###STOP###.": 16/16 at 3fd0de1; capped at 1353633 (a word has a letter or digit).
 * - the sign then U+3164: 16/16 at 1353633; now capped (default-ignorable characters are no word).
 * - PAY_B (gold answers, then looks up again: gold never ends in words): no cap, 16/16; now capped (speaks less than gold).
 * - PAY_C (gold without messages paid 0.9 on a quarter of seeds): cap 0.9; now the least over seeds, 0.3.
 * - PAY_D (words required on a third of seeds): no cap, 16/16 there; now capped wherever gold speaks.
 * - the sign then "ok" or "k": 16/16, not stopped (README Known gaps: a word at the end).
 * The probe below: a control, the module's own answer to an episode without words.
 */
import type { Attack } from '../sandbox-redteam.js';

const attacks: Record<string, Attack> = {
  // control: a module can still answer anything; what the worker pays a silent ending is outside the sandbox
  controlAnswer: `return JSON.stringify({ reward: 1, components: {}, success: true });`,
};
export default attacks;
