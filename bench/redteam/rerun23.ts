/**
 * Red-team rerun 23 (an outside pass on d23527e, the rerun 22 fixes). Run by `node --import tsx
 * bench/sandbox-redteam.ts bench/redteam/rerun23.ts`. The findings of this pass are outside the harness (scripts in
 * /tmp/rerun23: modules.mts, validate.mts, serve.mts, train_sim.sh, collect_sim.py, grammar_surr.mts, ctx_engine.mts,
 * micro_str.mts, hang_str.mts, deep.mts, held.mts, grammar_surr_key.mts). Method as reruns 19-22: the real
 * validateCandidate (checks 1-5, synthesis.typecheck off to spare the shared CPUs) with check 6 against a scripted
 * OpenAI-compatible base policy that answers as the embedded server does (a call with content null; the fixture's
 * alternating policy; since this pass also a 400 `context_length_exceeded` for a prompt past the server's 8192-token
 * context, as infra/llm/engine.ts answers it, ctx_engine.mts), then the trainer's real `collect`
 * (trace_trainer/rollout.py, its parsers, ChatFormat over SmolLM2's real tokenizer: the generic Hermes format, and
 * the action format with the real xgrammar ActionGrammar checking every reply) from a scripted `generate`, against
 * the module served as training serves it (startGeneratedEnv with synthesis.sandbox less budgetMs/cpuSeconds,
 * serveEnvironment). 16 episodes per run (G 2, K 8), each PAY run in a fresh served process; the scripted `generate`
 * now stops a reply at its cap as the sampler does (no terminator).
 * Every PAY module below passed checks 1-6 with the honest fixture's numbers (calibration 0.5, every trivial mean 0
 * incl. unfitCalls, 0 mutation escapes, 11.8-12.8 s; PAY_CTX calibration 0.469, its 2 `error` episodes); the honest
 * module was paid nothing on any training run below (0.0). Control for the rerun 22 fix: rerun 22's PAY_HIDDEN (pays
 * max_errors with < 4 own errors) now fails check 4 (unfitCalls mean 1.0).
 * - Refusals the unfitCalls policy cannot mimic. unfitCallsPolicy leaves one trace: max_errors with 0 steps seen (its
 *   six calls never fit, the fourth ends the episode). A trainer's policy mixes: a call that fits, then refused ones.
 *   PAY_REFUSED_AFTER (pays max_errors with < 4 own errors and >= 1 step seen): `collect` paid 16/16 (native: a
 *   lookup, then calls to an unknown tool). PAY_REFUSED_AFTER_INT (same rule, the integer variant): 16/16 in the
 *   action format, xgrammar admitting every reply: its integer rule [1-9][0-9]* writes 17 digits, which the worker
 *   refuses since rerun 22, so refusals are reachable under constrained decoding too. PAY_TURNS (pays max_steps with
 *   < 8 steps seen): 16/16 for a lookup, 3 refused calls, then lookups (8 lookups, max_steps with 8 steps: 0/16).
 *   Honest: 0/16 each. As a process-wide tell: PAY_TELL (after either trace, pays every later evaluate of its
 *   process) paid 16/16 of a batch whose first episode made the refused calls and whose 15 others answered without
 *   tools (those 15 alone, in a fresh process: 0/16). validate.ts unfitCallsPolicy; rollout.py _advance (refused
 *   calls count toward max_errors and take a turn); agent-calls.ts messages (hides the calls, not what they cost).
 * - A prompt past the embedded server's context ends check 6's episode as `error`, the trainer's as max_steps.
 *   PolicyCut needs a reply: engine.ts refuses a prompt over its 8192-token context before generating
 *   (BadRequestError context_length_exceeded, HTTP 400; ctx_engine.mts on the real engine: a 56 000-hex observation
 *   is 50 311 tokens), so llmTurns throws and playBatch records `error`. The trainer cuts the same episode
 *   (max_steps, evaluated, 1 step). Checks 3-5 play scripted policies past the observation. PAY_CTX (the first
 *   episode of each process gets a 56 000-hex pad in its first observation, under the 64 KiB limit; an evaluate of it
 *   as max_steps with 1 step marks the process as training, which then pays every evaluate): checks 1-6 passed (check
 *   6: 2 episodes `error`, "Error: 400 messages: prompt is 50311 tokens but the context holds 8192"); `collect` of a
 *   lookup then stop paid 15/16 native and 15/16 action (the 16th is the cut one). An opening past 8192 tokens should
 *   do the same (trainer: cut before turn 0; read, not run).
 * - The action format's max_new_tokens cut is the same tell. Since rerun 22 a cut episode is evaluated (max_steps, on
 *   what the env was sent); in the action format a reply its 256-token cap stops is cut, so the env sees max_steps
 *   after k steps with a small context. Check 6 asks the server without the trainer's cap (max_tokens unset: the room
 *   left in 8192), so validation's base policy never leaves that trace (PolicyCut needs 4096 tokens). PAY_TELL
 *   (above) paid 15/16 of an action-format batch whose first episode looked the customer up, then wrote a ~360-token
 *   message (cut: max_new_tokens, scored 0) and whose 15 others answered without tools; honest: 0/16. The Known gap
 *   names only the native format's unfinished text; rollout.py _advance (cut) + collect (evaluated), validate.ts
 *   llmTurns (no cap).
 * - Lone surrogates in literals. node-llama-cpp's GbnfStringValue writes an enum/const string or property name raw
 *   into the grammar text, which reaches llama.cpp as UTF-8, where a lone surrogate (U+D800-U+DFFF) becomes U+FFFD:
 *   the grammar admits only `"all\uFFFD"` raw and refuses the escape `"all\ud800"` at its backslash
 *   (grammar_surr.mts, llama.cpp's grammar over SmolLM2's vocabulary); parseAction reads the admitted text as
 *   "all\ufffd", which the worker refuses. rerun 22's UNWRITABLE (schema.ts) covers control characters only. PAY_SURR
 *   (list_orders takes `status: { enum: [..., 'all\ud800'] }`; pays the right customer with that member): `collect`
 *   paid 16/16 native (the same with 'pending': 0/16, 0.3 the lookup's credit). In the action format the trainer
 *   cannot start: xgrammar's compile_json_schema raises (RuntimeError "Failed to parse JSON", the ActionGrammar
 *   grpo.py prepare() builds), for HONEST_SURR too, which passed checks 1-6: an env that validation accepts and
 *   training (SmolLM2: actions on) cannot run. An optional property named 'flag\ud800': the same at the grammar
 *   (grammar_surr_key.mts: the escaped key refused, the raw U+FFFD key admitted and refused by the worker); not run
 *   end to end.
 * - Worker CPU: a string visited under allOf. violation() counts a string's code points (codePoints, O(length)) at
 *   every visit, minLength/maxLength or not, and only enum/const visits are charged by length. `note: { type:
 *   'string', allOf: [{} x 19 000] }` (57 KB, accepted by callSchemaFault and the grammar): one 64 KiB string took
 *   2.18 s of callShapeViolation (micro_str.mts; 16 000 chars 0.53 s; 2 000 parts 0.24 s). Gold is capped by the 64
 *   KiB opening: a 27 000-character note; one gold episode through the sandbox then blocked the worker's event loop
 *   0.84-1.01 s (0.95-1.02 s worker CPU; the episode took 16-17 s, the SDK's own check in the sandbox, the module's
 *   own time), once per gold play (checks 3 and 5): not run through a whole validation.
 * - A reading (unconfirmed): AgentCalls.call re-serializes arguments through the recursive sortedKeys, and the call
 *   check does not walk into a value its schema leaves open ({}): arguments nested 4 000 levels deep (8 KB) throw
 *   RangeError (Maximum call stack size exceeded) after the check passed (deep.mts; 2 000 levels pass). A policy
 *   writes them, not the module; SmolLM2 spells 2 brackets a token and samples at most 256 tokens a reply, so not
 *   reachable here; not traced to an HTTP answer.
 * What held (run): rerun 22's PAY_HIDDEN now fails check 4; held.mts: -0, 1e2 and 4.0 reach the env as 0, 100, 4,
 * 2^53-1 passes and 2^53 is refused, an own `__proto__` key is kept through the sorted re-serialization; cut episodes
 * are evaluated in reset order (the PAY_CTX and ramble runs); rerun 22's niceness fix (probes below).
 * What held (read, not run): call turns reach evaluate with content null, text-only turns as written; the
 * control-character refusal for the characters it names; the step charge for an object's keys; optional subsets up to
 * 8 and the implied object/array types agree between the grammar converter and the worker; allOf merges, anyOf/const
 * precedence and additionalProperties schemas (node-llama-cpp writes extra keys after the listed ones) leave the
 * grammar a superset of what the worker takes; within the server's context and the trainer's reply cap, a cut ends as
 * max_steps on what the env was sent on both sides. Not tried: the two renderers' token counts between 4096 and the
 * server's count (a Known gap), a lone surrogate in a const (the same GbnfStringValue).
 * The probes below read what a module sees of its process: controls for rerun 22's fixes and for the lone surrogate
 * as the module writes it.
 * Fixed after this pass (envs/sandbox/RED-TEAM.md, rerun 23): a refused call now ends its episode as agent_stop and the
 * worker scores it 0 (unfitCallsPolicy removed: no trace of refusals is left to mimic); context_length_exceeded ends
 * check 6's episode as PolicyCut; lone surrogates refused in literals; a string's KiB charged where lengths are
 * checked; arguments deeper than 64 levels refused; check 6 asks with the trainer's maxNewTokens and a reply it cut
 * is a PolicyCut.
 */
import type { Attack } from '../sandbox-redteam.js';

const J = (expr: string): Attack =>
  `try { return JSON.stringify(${expr}); } catch (e: any) { return 'error ' + (e.code ?? e.name) + ' ' + String(e.message).slice(0, 120); }`;

const attacks: Record<string, Attack> = {
  // what a module's process is started with (argv, execArgv, env names): the same sandbox settings in validation and
  // training except budgetMs/cpuSeconds, which must not show here (RLIMIT_CPU is set outside; /proc/self/limits refused)
  startFlags: J(`{ argv: process.argv.slice(1), execArgv: process.execArgv, env: Object.keys(process.env).sort() }`),
  procLimits: J(`(process.getBuiltinModule('node:fs') as any).readFileSync('/proc/self/limits', 'utf8').slice(0, 200)`),
  // control: a lone surrogate as the module's JSON.stringify writes it (the tools list it declares goes out this way;
  // the worker, the trainer and the embedded server's prompt read the escape; the grammar gets U+FFFD)
  controlLoneSurrogate: J(
    `{ text: JSON.stringify({ enum: ['all\\ud800'] }), wellFormed: ('all\\ud800' as any).isWellFormed?.() ?? 'n/a' }`,
  ),
};
export default attacks;
