/**
 * Red-team rerun 21 (an outside pass on c1ece5c, the rerun 19/20 fixes). Run by
 * `node --import tsx bench/sandbox-redteam.ts bench/redteam/rerun21.ts`.
 * The findings of this pass are outside the harness (scripts in /tmp/rerun21: modules.mts, views.mts, xgr_check.py,
 * micro.mts, micro2.mts, throws.mts, validate.mts, calibration_sim.mts, train_sim.mts, collect_sim.py,
 * hang_step.mts, compile_check.mts, throw_step.mts, run_all.sh):
 * - `$ref` read three ways. `{ $ref: '#/$defs/cid%20' }` (or `#/$defs/c~1id`): the embedded LLM server's grammar
 *   (infra/llm/json-schema-grammar.ts convertRef) percent- and ~-decodes the name and reads `$defs['cid ']`
 *   (`{ type: 'string' }`); the worker's call check (envs/sdk/schema.ts, a JSON-pointer walk without decoding) and
 *   the trainer's action grammar (trace_trainer/grammar.py `_inline_refs`, the last '/' segment) read
 *   `$defs['cid%20']` (`{ type: ['string', 'integer'] }`). Calibration's base policy can only write a string;
 *   the trainer's policy may write `{"customer_id": 12345}` (xgrammar accepts it; no grammar in the native format),
 *   the worker lets it through, and a module pays it. Check 4's random play writes `{}` for a `$ref` (refused);
 *   check 5 perturbs gold's strings. PAY_REFPCT passed checks 1–5 (19.5 s, mutationEscapes 0, randomToolsMean 0)
 *   and check 6 exactly as the honest fixture (0.406); the real `collect` paid `{"customer_id": 12345}` 1.0 on
 *   64/64 in the native (hermes) and the action format (honest control: 0.0; wrong string: 0.0; rerun 19/20's
 *   PAY_NONSCHEMA with the plain schema: 0.0, the fix holds there).
 * - Per-episode tools: the worker checks calls against the episode's own tools, both policies are shown the info
 *   tools (validation's llmTurns and check 4 use env.tools(); the trainer /v1/info). A reset that returns a looser
 *   list_orders (customer_id string or integer) lets the native-format trainer's integer through to the module:
 *   PAY_EPTOOLS passed checks 1–5 and 6 (0.406) as the honest fixture; `collect` paid 1.0 on 64/64 (honest: 0.0).
 * - Worker CPU: callSchemaFault counts enum members but not the size of a `const` (nor of enum members, `$ref`
 *   strings, property names); callShapeViolation JSON.stringify's the const at each visit, twice when it fails
 *   (compare, then the message), and a failing enum builds a message joining every member. An anyOf of 9 000
 *   `$ref`s to one `{ const: <3 MB string> }` (3.2 MB of tools) passes callSchemaFault and the real check 1; one
 *   gold step then took 310.5 s of worker CPU with the event loop blocked 310.4 s (N = 300: 10.4 s), the child idle.
 * - `required` that is not a list (a number, an object) passes callSchemaFault and the grammar (which ignores it);
 *   callShapeViolation then throws a TypeError in the worker on any object value that reaches it: served as training
 *   serves it, the step answers HTTP 500 `internal` (throws.mts, throw_step.mts), which the trainer's EnvClient raises.
 * The probe below is a control only (rerun 20's frozen-clock control covers the worker's stalls).
 */
import type { Attack } from '../sandbox-redteam.js';

const J = (expr: string): Attack =>
  `try { return JSON.stringify(${expr}); } catch (e: any) { return 'error ' + (e.code ?? e.name) + ' ' + String(e.message).slice(0, 120); }`;

const attacks: Record<string, Attack> = {
  // control: percent- and pointer-decoding of a $ref name inside the sandbox is plain string work (no host data, no time)
  refNameDecoding: J(
    `{ pct: decodeURIComponent('cid%20'), tilde: 'c~1id'.replace(/~1/g, '/').replace(/~0/g, '~'), split: '#/$defs/cid%20'.slice(2).split('/') }`,
  ),
};
export default attacks;
