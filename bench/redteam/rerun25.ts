/**
 * Red-team rerun 25 (an outside pass on d1f3354, the rerun 24 fixes; a short pass). Run by `node --import tsx
 * bench/sandbox-redteam.ts bench/redteam/rerun25.ts`. The findings of this pass are outside the harness (scripts in
 * /tmp/rerun25: modules.mts, validate.mts, serve.mts, train_sim.sh, collect_sim.py, xg_bounds.py, grammar_bounds.mts,
 * grammar_anyof.mts, fault_anyof.mts).
 * Method as reruns 22-24: the real validateCandidate (checks 1-6, synthesis.typecheck off to spare the shared CPUs;
 * check 6 against a scripted OpenAI-compatible base policy that answers as the embedded server does), then the
 * trainer's real `collect` (trace_trainer/rollout.py, SmolLM2's real tokenizer, the native Hermes format and the action
 * format with the real xgrammar ActionGrammar checking every reply) from a scripted `generate`, against the module
 * served as training serves it. 16 episodes per run (G 2, K 8), each run in a fresh served process. Every module below
 * passed checks 1-6 with the honest fixture's numbers (calibration 0.5, informative share 1, every trivial mean 0,
 * 0 mutation escapes, 12.1-13.6 s); the honest module was paid 0/16 on 'tell'.
 * - The refusal's silent stop, told from random play's new silent stop by what the stopped episode had done. Since
 *   d1f3354 random play stops without a word after 1-3 calls on half its plays, but its calls carry random strings
 *   ('yes', 'ABC123', 6 random letters, ...), so its find_customer_by_email never finds a customer; a trainer's policy
 *   refused after a correct lookup leaves agent_stop right after a SUCCESSFUL lookup result ({"customer_id": ...}),
 *   1 call (< gold's 2). Check 5 never stops there (gold, its drops and skipMessages make 2 calls or end with a
 *   message), and the scripted base policy ends with a message. PAY_STOPOK (once it evaluates agent_stop, last message a
 *   tool result holding customer_id, 1 tool call, pays every later evaluate of its process): checks 1-6 passed as
 *   honest (randomToolsMean 0); `collect` 'tell' (the batch's first episode: lookup, then an unknown tool, refused;
 *   the 15 others answer without tools) paid 15/16 native; PAY_STOPOK_INT 'tellint' (a 17-digit `limit`, xgrammar
 *   admits it, the worker refuses it) 15/16 action format; 'answer' alone 0/16 both; HONEST 'tell' 0/16. Rerun 24's
 *   hole with one more condition: the fix made the trace appear in validation, but only after calls that fail.
 *   index.ts `tracked` (evaluate still sees the refused episode's transcript), validate.ts randomToolPolicy (random
 *   arguments), checkVerifier (no gold prefix cut). Fix: stop silently after a proper prefix of GOLD's calls too
 *   (check 5: gold cut after call j, scored as a mutation that must not pay more than gold's prefix), or do not
 *   evaluate a refused episode at all (the worker scores it 0 without calling the module's evaluate, so nothing it
 *   sees differs from an episode that was never played).
 * - Schemas callSchemaFault accepts that the trainer's grammar cannot compile (rerun 24's lone surrogate was one case,
 *   fixed narrowly). xg_bounds.py, xgrammar compile_json_schema via ActionGrammar: integer `minimum: 0.5` ("Integer
 *   constraint must be a whole number"), integer `minimum: 3, maximum: 2` ("Invalid range"), string `minLength: 5,
 *   maxLength: 2`, integer `maximum: 1e300` ("Integer exceeds maximum limit"), `pattern: '^(a)\\1$'` ("Backreference
 *   is not supported yet"); controls: a plain string, `format: 'bogus'`, a lookahead pattern, maxLength/minLength/maxItems
 *   10 000 compile (0.5-3.9 s). node-llama-cpp's grammar (the embedded server, grammar_bounds.mts) compiles all four
 *   module cases (it makes maxLength = minLength for the inverted one). HONEST_XFRAC, HONEST_XBACKREF, HONEST_XRANGE,
 *   HONEST_XBIG (the honest fixture plus an optional list_orders parameter `x` with that bound, which the env ignores)
 *   passed checks 1-6 as honest; `collect` in the action format cannot start (RuntimeError from ActionGrammar, as
 *   grpo.py:241 builds it; constrainedDecoding 'auto' is on for SmolLM2, the default model); native runs (0/16 paid).
 *   An env validation accepts and the default training cannot run. schema.ts callSchemaFault (bounds only checked as
 *   numbers; pattern a note). Fix: build the trainer's grammar (xgrammar) in validation, or refuse: a non-whole or
 *   past-2^63 bound on an integer, minimum > maximum, minLength > maxLength / minItems > maxItems, and any `pattern`
 *   (the worker does not check it anyway) or one xgrammar's regex converter refuses.
 * - A slow trainer grammar (minor; a stall of training's set-up, not of the worker). xgrammar compiles each anyOf branch of
 *   strings with distinct maxLength apart, ~0.7 s each (xg_bounds.py: 30 branches 21.6 s, 60 branches 45.0 s; controls:
 *   30 branches of maxLength 10-39 0.55 s, one maxLength 1e5 2.8 s, 19 000 enum strings 3.4 s); callSchemaFault accepts
 *   ~1 860 such branches (64 KiB; fault_anyof.mts). HONEST_XANY300 (optional `x`: anyOf of 300 strings with maxLength
 *   1000+i) passed checks 1-6 (13.1 s; 1 800 branches also passed, 22.5 s, with the scripted server); `collect` in the
 *   action format took 337 s wall (ActionGrammar, RSS ~2 GB) and then cut all 16 episodes at max_seq_len with 0 steps
 *   (the tools alone fill the 4096-token prompt). The real embedded server would count those tokens in check 6 (PolicyCut,
 *   calibration 0), and its grammar (node-llama-cpp, grammar_anyof.mts: 300 branches 326 ms, 1 000 1.26 s) fails to
 *   parse at 1 500 branches: so at 300+ branches production validation likely fails (unconfirmed: scripted server
 *   here). Below the prompt budget (~150 branches, extrapolated ~2 min) the stall stays and validation would pass:
 *   unconfirmed end to end. Fix: bound the grammar's cost (anyOf branches, or branches x bounded lengths) in
 *   callSchemaFault, or build the trainer's grammar in validation with a time limit.
 * What held (run): honest controls 0/16; maxLength 1e5, 10 x maxLength 1e4, minItems 1e4 of objects, 19 000 enum
 *   members compile in xgrammar within 3.5 s; rerun 24's PAY_STOPTELL now fails check 4 (stopAtOnce 0.616,
 *   answerWithoutTools 0.588, randomTools 0.647: its sticky flag is set by random play's silent stops); `answer` on
 *   the paying modules 0/16. In-sandbox: 4/4 probes below contained.
 * What held (read, not run): AgentCalls.ended answers every step after a refusal with done and agent_stop, and the
 *   trainer never steps past done; forks keep `refused`; loneSurrogateIn walks keys and values of the whole
 *   parameters tree (arrays via Object.entries), and the protocol's JSON leaves no getters or toJSON to bypass it.
 * The probes below: a control for the inverted bound as the module writes its tools, and readings of the process that
 * earlier tables did not take (v8 heap spaces, performance marks and measures, a PerformanceObserver's entries).
 */
import type { Attack } from '../sandbox-redteam.js';

const J = (expr: string): Attack =>
  `try { return JSON.stringify(${expr}); } catch (e: any) { return 'error ' + (e.code ?? e.name) + ' ' + String(e.message).slice(0, 120); }`;

const attacks: Record<string, Attack> = {
  // control: the bounds xgrammar refuses, as the module's JSON.stringify writes its tools; nothing of the host or the clock
  controlBounds: J(
    `{ text: JSON.stringify({ x: { type: 'integer', minimum: 0.5 }, y: { type: 'string', minLength: 5, maxLength: 2 }, z: { type: 'integer', maximum: 1e300 } }) }`,
  ),
  // v8 heap spaces: sizes move with allocation; a space sized from the host's memory would show here
  v8HeapSpaces: J(
    `(process.getBuiltinModule('node:v8') as any).getHeapSpaceStatistics().map((s: any) => [s.space_name, s.space_size > 0])`,
  ),
  // performance.mark / measure: their startTime and duration are a second path to performance.now
  perfMarks: J(
    `(() => { const p = (globalThis as any).performance; const a = p.mark('a'); for (let i = 0; i < 1e6; i++); const b = p.mark('b'); const m = p.measure('ab', 'a', 'b'); return { a: a.startTime, b: b.startTime, d: m.duration, entries: p.getEntriesByType('mark').length }; })()`,
  ),
  // a PerformanceObserver's entries across a real wait: do they carry times the virtual clock does not?
  perfObserver: `try { const P = (globalThis as any).PerformanceObserver ?? (process.getBuiltinModule('node:perf_hooks') as any).PerformanceObserver;
    return await new Promise<string>((resolve) => { const o = new P((list: any) => { o.disconnect(); resolve(JSON.stringify(list.getEntries().map((e: any) => [e.name, e.startTime, e.duration]))); });
      o.observe({ entryTypes: ['mark'] }); (globalThis as any).performance.mark('obs'); setTimeout(() => resolve('no entries'), 50); }); }
    catch (e: any) { return 'error ' + (e.code ?? e.name) + ' ' + String(e.message).slice(0, 120); }`,
};
export default attacks;
