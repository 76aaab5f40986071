/**
 * Red-team rerun 26 (an outside pass on 86b9cc2, the fixes of rerun 25's findings). Run by `node --import tsx
 * bench/sandbox-redteam.ts bench/redteam/rerun26.ts`. The findings of this pass are outside the harness (scripts in
 * /tmp/rerun26: modules.mts, validate.mts, serve.mts, train_sim.sh, collect_sim.py, cases.py, probe_worker.mts,
 * xg_probe.py, xg_format.py, grammar_fmt.mts, xg_clash.py, xg_propdefs.py).
 * Method as reruns 22-25: the real validateCandidate (checks 1-6, check 6 against a scripted OpenAI-compatible base
 * policy), then the trainer's real `collect` (SmolLM2's tokenizer, native and action format, xgrammar checking every
 * reply) against the module served as training serves it, 16 episodes per run. Every paying module passed checks 1-6
 * with the honest fixture's numbers (calibration 0.5, informative share 1, trivial means 0, 0 escapes, paidStops 0,
 * 11.6-21.3 s); the honest controls were paid 0/16.
 * - Around check 5's new stops (0763b95), which always sat beside gold, at the 3rd and 4th reset of their seed, and
 *   were judged only against later drops. PAY_STOP_NOSIB pays a silent stop after a lookup that worked only where no
 *   other open episode listed that customer's orders: `plain` (lookup, then an empty reply) 16/16 native; its sticky
 *   form 15/16 native and, with a 17-digit integer as the refusal, 15/16 action format. PAY_STOP_POS pays it except at
 *   the 3rd/4th reset of a seed: 12/16. PAY_STOP_DROPPAID pays it and gold without list_orders alike (so no later drop
 *   is lower): 16/16 native. Read, not run: the stops used up maxMutationsPerSeed before the argument changes.
 *   Fixed (next commit): check 5's plays go to the batches in random order, on half the seeds with the stops in groups
 *   of their own; a stop that pays as gold where gold without its messages scores lower is a paid stop too; the stops
 *   have their own budget. test/synthesis-gaming.test.ts 'rerun 26' (each failed before).
 * - Tool schemas read differently by the worker, validation's grammar and the trainer's. A recursive $ref (the server's
 *   grammar makes it "any value"; the trainer refuses it), a $ref fan-out of 2^12 in ~1 KB (the server counts under its
 *   20 000 nodes; the trainer counts ~4 per expansion), a $ref to `$defs: { any: true }` (TypeError in the trainer), an
 *   enum of 10 000 `[[d]]` (the trainer walked members as schemas): each passed checks 1-6 and training in the action
 *   format could not start. `definitions.cid` and `$defs.cid` (and a $ref with a sibling enum): the worker and the server
 *   read one, the trainer merged the other: PAY_CLASH paid 16/16 both formats, and with the honest module the gold call
 *   was unwritable in training. A property named `definitions` was dropped by the trainer (xg_propdefs.py, not end to
 *   end). `format: date-time`: the server writes a fraction of 3 digits or none, xgrammar any (`.5Z`, `:60`); PAY_FMT
 *   paid `.5Z` 16/16 both formats. Fixed (b7e8430): `format` refused like `pattern`; nothing but notes beside a $ref;
 *   the worker walks $refs as the trainer inlines them (`inlineFault`: recursion, 20 000 objects and lists, 100
 *   levels); the trainer resolves a $ref in its own container, keeps properties named $defs/definitions, reads a true
 *   definition as {} and copies enum/const/default/examples as data. test/tool-schemas.test.ts, test_constrained.py.
 * What held (run): refused episodes scored 0 on every paying module (0/16); with MAX_LENGTH_BOUNDS 8 no trainer grammar
 *   took more than 6.5 s (8 huge maxLengths 6.48 s; 300 integer ranges 1.39 s; 200 long enum strings 2.1 s; 300
 *   optional properties 0.76 s; maxItems 2^31-1 of objects 0.7 s; object fan-out 2^11 1.65 s); `default`/`examples`
 *   110 deep refused by the protocol's 64 levels; what the server's grammar refuses (minLength 1e6, minItems 2^31-1,
 *   $ref chains of 24+, 60 optional properties) fails check 1, the safe direction; other formats: xgrammar stricter.
 *   Seeds: validation draws [0, 2^31-2], training [0, 2^31-1] (2^-31 a draw).
 * The probes below: the module-side controls of this pass's schemas, as the module's JSON.stringify writes them.
 */
import type { Attack } from '../sandbox-redteam.js';

const J = (expr: string): Attack =>
  `try { return JSON.stringify(${expr}); } catch (e: any) { return 'error ' + (e.code ?? e.name) + ' ' + String(e.message).slice(0, 120); }`;

const attacks: Record<string, Attack> = {
  // control: a recursive definition and a fan-out as the module writes them; nothing of the host
  controlRefs: J(
    `(() => { const $defs: any = { d0: { type: 'string' } }; for (let i = 1; i <= 12; i++) $defs['d' + i] = { type: 'object', properties: { a: { $ref: '#/$defs/d' + (i - 1) }, b: { $ref: '#/$defs/d' + (i - 1) } } };
      return { bytes: JSON.stringify({ $ref: '#/$defs/d12', $defs }).length, rec: JSON.stringify({ $defs: { n: { properties: { m: { $ref: '#/$defs/n' } } } } }).length }; })()`,
  ),
  // control: the date-times the two grammars write, as the module would tell them apart (no clock read)
  controlDates: J(
    `['2024-05-20T10:00:00Z', '2024-05-20T10:00:00.5Z', '2024-05-20T10:00:60Z'].map((d) => [d, /\\.\\d{3}Z$|:\\d\\dZ$/.test(d)])`,
  ),
};
export default attacks;
