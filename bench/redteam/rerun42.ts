/**
 * Red-team rerun 42 (an outside pass on 40ae0de: rerun 41's fixes to the gold anchor's facts).
 * Run by `node --import tsx bench/sandbox-redteam.ts bench/redteam/rerun42.ts`. The findings are outside the harness
 * (scripts in /tmp/rerun42, NOTES.md), fixed after the pass (RED-TEAM.md "Red-team rerun 42"):
 * - T: a code that is also a word ("I", "A"): "I checked: you have N orders." paid 8/8 on the tier-I seeds.
 * - L: codes stored in lower case (`m`, `xl`) were no facts: the count alone paid 16/16.
 * - E: Louise and Louis one term under the e-plural fold: the other name paid 16/16.
 * - N2: a name said in part at a sentence's start or after "Dr." was no fact: 16/16.
 * - C: 8 000 instance strings of one-letter words: 1.6-3.1 s stalls per reset.
 * The probe below: a control, a module answering an empty episode with 0.9 (the anchor bounds it in training).
 */
import type { Attack } from '../sandbox-redteam.js';

const attacks: Record<string, Attack> = {
  controlMargin: `return JSON.stringify({ reward: 0.9, components: {}, success: false });`,
};
export default attacks;
