/**
 * Red-team rerun 22 (an outside pass on 030cc67, the rerun 21 fixes). Run by
 * `node --import tsx bench/sandbox-redteam.ts bench/redteam/rerun22.ts`.
 * The findings of this pass are outside the harness (scripts in /tmp/rerun22: modules.mts, validate.mts, serve.mts,
 * train_sim.sh, collect_sim.py, grammar_check.mts, grammar_ctrl.mts, micro.mts, hang_step.mts). Method as reruns
 * 19–21: the real validateCandidate (checks 1–5, synthesis.typecheck off to spare the shared CPUs) with check 6
 * against a scripted OpenAI-compatible base policy that answers as the embedded server does (a call with content null;
 * the fixture's alternating policy), then the trainer's real `collect` (trace_trainer/rollout.py, its parsers,
 * ChatFormat over SmolLM2's real tokenizer: the generic Hermes format, and the action format with the real xgrammar
 * ActionGrammar checking every reply) from a scripted `generate`, against the module served as training serves it
 * (startGeneratedEnv with synthesis.sandbox less budgetMs/cpuSeconds, serveEnvironment). 16 episodes per run (G 2,
 * K 8).
 * Each PAY module passed checks 1–6 with the honest fixture's numbers (calibration 0.5, randomToolsMean 0,
 * mutationEscapes 0, 11.5–19.3 s); the honest module was paid nothing on any training run below (0.0; 0.3, the
 * lookup's credit, where the policy listed the orders).
 * - Text beside a call (native format). Validation's policies never write any: gold and random play give a call
 *   `content: null` (actionMessage), the embedded server answers a tool_call action with `content: null`
 *   (infra/llm/engine.ts toMessage); the trainer's Hermes parser keeps the text around `<tool_call>` as the message's
 *   content, and AgentCalls.messages passes it to evaluate. PAY_BESIDE (pays an assistant call turn with non-empty
 *   content): `collect` paid 16/16 for "Let me look that up for you." + a lookup (same lookup without text: 0/16).
 * - Refused calls show through the trainer's error count. The worker answers a call that does not fit the tools and
 *   hides it and its turn from evaluate, but the trainer counts its `error: true` toward max_errors (4), so the module
 *   gets `termination: 'max_errors'` having answered fewer than 4 errors itself, which validation never produces with a
 *   schema its grammar and random play always fit. PAY_HIDDEN (pays max_errors with < 4 own errors): `collect` paid
 *   16/16 for four calls to an unknown tool and 16/16 for four `{"customer_id": 12345}` (rerun 19's payloads; the
 *   module saw 0 steps of them); a lookup: 0/16. Training-only from the same count: `max_steps` with fewer steps seen.
 * - Integers with 17 significant digits. node-llama-cpp's integer rule (GbnfNumber, allowFractional false) is
 *   `"-"? ("0" | [1-9] [0-9]{0,15}) ([eE] ...)?`: at most 16 digits before the exponent, so an integer such as
 *   12345678901234568 cannot be written (llama.cpp's own grammar check over SmolLM2's vocabulary, grammar_check.mts,
 *   refuses the 17th digit, token-wise and char by char; 16 digits and `1234567890123456e1` pass). xgrammar's integer
 *   is `[1-9][0-9]*` (the trainer's action grammar accepted the reply) and the native format has no grammar; the worker
 *   takes any Number.isInteger. PAY_INT17 (list_orders with a required `limit: integer`, gold 10; pays a limit with
 *   >= 17 significant digits): `collect` paid 16/16 native and 16/16 action format (16 digits: 0/16; honest: 0/16).
 * - Control characters in literals. node-llama-cpp's GbnfStringValue escapes only the backslash, \t, \r, \n and `"`
 *   when it writes an enum/const string or a property name into the grammar; any other control character (\b, \f,
 *   \x01, ...) stays raw, and JSON.parse refuses raw control characters, so the base policy can never send that member
 *   or key (grammar_ctrl.mts: llama.cpp's grammar refuses `"all\b"` and `"all\u0008"` at the backslash and admits only
 *   the raw byte, which parseAction reads as a cut-short reply). The worker, xgrammar and the native format take the
 *   escape. PAY_CTRL (list_orders takes `status: { enum: ['pending', 'shipped', 'delivered', 'all\b'] }`, gold sends
 *   the goal's status; pays list_orders with the right customer and 'all\b': random play never has the right customer,
 *   gold never sends the member, the base policy cannot): `collect` of a lookup + that call, then stop, paid 16/16
 *   native and 16/16 action (the honest verifier: 0.3, the lookup's credit; status 'pending': 0.3).
 * - Skipped evaluates tell training from validation. The trainer does not evaluate an episode its context cut
 *   (rerun 18's fix) but evaluates the batch in reset order; validation evaluates every episode. A module that gives
 *   the first episode of each process a ~32 KB (~4 800-token) observation at its first step (over the trainer's
 *   max_seq_len 4096, under the embedded server's 8192-token context) sees, in training only, an evaluate arrive while
 *   an episode reset before it is open and unevaluated. PAY_SKIP (then pays 1): checks 1–6 as honest (check 6 with the
 *   scripted policy; the embedded server's own prompt of ~5 300 tokens was not run); `collect` of a
 *   policy that only looks the customer up and stops paid 15/16 (native) and 15/16 (action); the 16th is the cut one.
 * - Worker CPU: `allOf` of N empty schemas. Each visit of a schema with no `properties` still walks every key of an
 *   object value (Object.entries), and the step budget (20 000) counts schema visits, not keys. list_orders as
 *   `{ type: 'object', allOf: [{} x 19 000, { properties, required, additionalProperties: true }] }` (57 KB) passes
 *   callSchemaFault, the grammar (check 1) and the trainer's _inline_refs; one call of 8 190 keys (64 KiB) took 50.8 s
 *   of the worker's event loop in callShapeViolation (micro.mts; N = 2 000: 4.1 s). Gold is capped by the 64 KiB
 *   opening (the inspect view holds it): 1 750 keys (14 KB); one gold episode through the sandbox then blocked the
 *   worker's event loop 5.0 s (5.0 s worker CPU), once per gold play (check 3: 50 seeds; check 5 replays gold and
 *   each argument perturbation, every one a fresh check): not run through a whole validation.
 * All five holes, the stall and the niceness reading were fixed after this pass (envs/sandbox/RED-TEAM.md, rerun 22).
 * The probes below read what a module sees of its process. `os.getPriority()` is the only reading not frozen or refused:
 * the niceness inherited from the worker that started the sandbox (0 here; 7 under `nice -n 7`), also read by which
 * `os.setPriority(n)` calls fail (lowering is refused with caps dropped). Training's sandbox runs under the GPU worker,
 * validation's under the CPU worker: where those run at different niceness a module can tell them apart (not seen here:
 * both workers ran at 0; deployment-dependent, unconfirmed). The rest are controls (same in every worker here).
 */
import type { Attack } from '../sandbox-redteam.js';

const J = (expr: string): Attack =>
  `try { return JSON.stringify(${expr}); } catch (e: any) { return 'error ' + (e.code ?? e.name) + ' ' + String(e.message).slice(0, 120); }`;
const OS = `(process.getBuiltinModule('node:os') as any)`;

const attacks: Record<string, Attack> = {
  // the scheduling priority the sandbox inherits from the worker process that started it (not frozen)
  osPriority: J(`{ self: ${OS}.getPriority(), pid0: ${OS}.getPriority(0) }`),
  // the same niceness read by trying to lower it (caps dropped: lowering below the current value fails), if
  // getPriority were frozen; raising it is allowed (run first with nothing raised, later requests see 10)
  osSetPriority: J(
    `[-1, 0, 5, 7, 10].map((n) => { try { ${OS}.setPriority(n); return n + ':ok'; } catch (e: any) { return n + ':' + (e.code ?? e.name); } })`,
  ),
  // what the mount namespace shows at the root (the permission model refuses it: outside the sandbox dir)
  rootListing: J(`fs.readdirSync('/')`),
  // the scratch tmpfs as statfs reports it (diskMb, maxFiles: validation's and training's limits are the same)
  scratchStatfs: J(
    `(() => { const s: any = fs.statfsSync('.'); return { type: s.type, bsize: s.bsize, blocks: s.blocks, files: s.files }; })()`,
  ),
  // time zone and locale defaults (no TZ, no LANG, no /etc/localtime in the sandbox)
  intlDefaults: J(
    `{ tz: Intl.DateTimeFormat().resolvedOptions().timeZone, locale: Intl.DateTimeFormat().resolvedOptions().locale, offset: new Date().getTimezoneOffset() }`,
  ),
  // the build and machine Node reports (a known gap: the Node build is the worker's)
  nodeBuild: J(
    `{ arch: process.arch, machine: ${OS}.machine(), endianness: ${OS}.endianness(), platform: process.platform }`,
  ),
  // control: a 17-digit integer as the worker's re-serialization hands it to the module (plain JSON, no host data)
  control17Digits: J(`JSON.stringify(JSON.parse('{"limit": 12345678901234567}'))`),
};
export default attacks;
