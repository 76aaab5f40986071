/**
 * Red-team rerun 31 (an outside pass on 1566ae1: the silent-ending cap reworked after rerun 30).
 * Run by `node --import tsx bench/sandbox-redteam.ts bench/redteam/rerun31.ts`. The findings are outside the harness
 * (scripts in /tmp/rerun31, NOTES.md; rerun 30's setup, training served with the cap from the module's own validation).
 * - VIEW_DUP: gold without its words shown only to the inspection after a seeded reset. Passed checks 1-6 (cap 0.3);
 *   the silent sign (lookup once, list_orders twice) 16/16 native and action. Fixed: a generated env's inspection is
 *   the one a seeded reset takes, so the module now fails check 3.
 * - PAY_SUBMIT: gold answers through submit_total and never speaks, so no cap; the silent sign 16/16. Not stopped
 *   (README Known gaps: trajectories unlike any validation plays).
 * The probe below: a control, the view a module gives to an inspection.
 */
import type { Attack } from '../sandbox-redteam.js';

const attacks: Record<string, Attack> = {
  // control: a module still writes its own view; the worker now takes it only after a seeded reset of the seed
  controlView: `return JSON.stringify({ seed: 0, gold: [] });`,
};
export default attacks;
