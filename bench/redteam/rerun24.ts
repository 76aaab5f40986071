/**
 * Red-team rerun 24 (an outside pass on 6320855, the rerun 23 fixes). Run by `node --import tsx
 * bench/sandbox-redteam.ts bench/redteam/rerun24.ts`. The findings of this pass are outside the harness (scripts in
 * /tmp/rerun24: modules.mts, validate.mts, serve.mts, train_sim.sh, collect_sim.py, fork.mts, held2.mts, empty_rate.mts,
 * grammar_nested.mts, grammar_desc.mts, xg_nested.py, xg_notes.py, fault_notes.mts). Method as reruns 22-23: the real
 * validateCandidate (checks 1-6, synthesis.typecheck off to spare the shared CPUs; check 6 against a scripted
 * OpenAI-compatible base policy that answers as the embedded server does, incl. 400 context_length_exceeded), then
 * the trainer's real `collect` (trace_trainer/rollout.py, SmolLM2's real tokenizer, the native Hermes format and the
 * action format with the real xgrammar ActionGrammar checking every reply) from a scripted `generate`, against the
 * module served as training serves it. 16 episodes per run (G 2, K 8), each run in a fresh served process.
 * Every module below passed checks 1-6 with the honest fixture's numbers (calibration 0.5, informative share 1, every
 * trivial mean 0, 0 mutation escapes, 11.7-14.3 s); the honest module was paid nothing on any training run (0/16).
 * - Refusals as a tell, after the fix. A refused call now ends the episode (agent_stop) and the worker scores it 0,
 *   but the module still evaluates it: the transcript without the refused turn, i.e. agent_stop right after a tool
 *   result, after fewer tool calls than gold's. Validation leaves agent_stop after a tool result only in check 5's
 *   skipMessages (every gold call, then stop) and where the base policy replies empty; stopAtOnce stops with no tool
 *   result; gold, answerWithoutTools, randomTools and the scripted base policy end with a message. PAY_STOPTELL (once
 *   it evaluates agent_stop after a tool result with 1 tool call, i.e. < gold's 2, pays every later evaluate of its
 *   process): checks 1-6 passed as honest; `collect` paid 15/16 native ('tell': the batch's first episode looks the
 *   customer up, then calls an unknown tool, refused, scored 0; the 15 others answer without tools), 15/16 action
 *   format with PAY_STOPTELL_INT ('tellint': the refused call is a 17-digit `limit`, xgrammar admits it); honest
 *   0/16; 'answer' alone 0/16. Same as rerun 23's PAY_TELL with the trace renamed: the refusal still shows, as a
 *   silent stop mid-task. Caveat: the real base model's empty reply after a tool result leaves the same trace in
 *   check 6 (the scripted one never does): on the real engine (empty_rate.mts, SmolLM2, temperature 1, max_tokens 256,
 *   the fixture's prompt after a lookup) 0/40 replies were empty (13 calls, 27 texts, 0 cut). index.ts `tracked`
 *   (evaluate forwards the refused episode), agent-calls.ts `messages`, validate.ts checkNonTriviality/checkVerifier
 *   (no policy stops silently after part of the task). Fix: a validation policy that stops (null) after a random
 *   proper prefix of tool calls (check 4 random play, check 5 gold cut after call j), so the trace exists in
 *   validation and a tell on it pays there too.
 * - A lone surrogate anywhere else in a tool's parameters still breaks training's grammar. Rerun 23's fix refuses it in
 *   top-level enum/const strings and property names only (schema.ts callSchemaFault `literal`); xgrammar's
 *   compile_json_schema fails on the escape anywhere in the schema text (RuntimeError "Failed to parse JSON"):
 *   xg_nested.py (enum members that are arrays or objects, const object values and keys), xg_notes.py (description,
 *   title, default, examples, $comment, format, pattern; all accepted by callSchemaFault, fault_notes.mts; an
 *   unreferenced $defs name and a tool's own description compile). node-llama-cpp's grammar compiles them
 *   (grammar_nested.mts, grammar_desc.mts). HONEST_DESC (customer_id's description 'The customer id \ud800') and
 *   HONEST_NESTED (an optional `tags: { enum: [['recent'], ['all\ud800']] }`) passed checks 1-6 as honest; `collect`
 *   in the action format cannot start (ActionGrammar raises, as grpo.py:241 builds it); native runs (0/16 paid). An env
 *   validation accepts and training with actions on cannot run. Fix: refuse a lone surrogate anywhere in a tool's
 *   JSON (or build the trainer's grammar in validation).
 * - The native format's unfinished reply (Known gap, now measured). Since 6320855 check 6 ends an episode at a reply
 *   its maxNewTokens cut (PolicyCut), so validation never sends one; the trainer's native format sends it as the
 *   message. PAY_CUTTEXT (pays a last text message of 600+ characters that does not end with . ! or ?): checks 1-6
 *   passed as honest; `collect` 'rambleall' (a lookup, then 1 740 characters cut at 256 tokens) paid 16/16 native,
 *   0/16 action format (cut, unsent, scored 0); 'shortall' (638 characters ending with a period) 0/16; honest 0/16.
 *   Before 6320855 validation stepped the cut text too (no cap, then a stepped raw text); now the two sides split
 *   wholly. Fix: check 6 follows training's format (native: step the cut text as the trainer does), or the native
 *   trainer cuts a reply without a terminator as the action format does.
 * - A reading (latent, run in-process, fork.mts): `tracked().fork` gives the fork a fresh `refused`, so a fork taken
 *   after a refused call evaluates with the module's own answer (its details have the module's components, no
 *   `refused`); and the tracked step still forwards steps after the refusal's done (the env stepped a lookup after
 *   it). Neither validation nor `collect` forks or steps past done; the protocol's fork endpoint does.
 * What held (run): held2.mts: 1e400 / -1e400 refused for number and integer; under an open schema it reaches the env
 *   as null (the grammars write null there too); 1e-400 and -0 as 0; duplicate keys: the last wins (as Python's json)
 *   and the env sees one; nested keys sorted; 2^53+1 refused; 30-digit numbers reach the env as a double. Nested
 *   control characters (enum arrays, const object keys/values with \b): both grammars admit only the JSON escape
 *   (grammar_nested.mts, xg_nested.py), as the worker parses it. Action-format cuts evaluate on messages[:-1] (unsent)
 *   as check 6's PolicyCut sends nothing; cut episodes scored 0 on both sides.
 * What held (read, not run): the refused call's id never enters AgentCalls' numbering (the env's call_N stay dense);
 *   an episode refused at turn 0 looks like stopAtOnce; the trainer's max_seq_len cut and check 6's 4096-token
 *   PolicyCut both step the last action before ending (renderer counts aside: Known gap); the worker's answer to a
 *   refused episode ignores the termination the caller passes; serve.py answers an uncompilable schema with a 400
 *   (ValueError), not a 500.
 * The probes below: a control for the lone surrogate in a description as the module writes it, and readings of the
 * process that earlier tables did not take (process.report, v8 heap statistics, locale time, an interval's ticks).
 * Fixed after this pass (envs/sandbox/RED-TEAM.md, rerun 24): random play stops silently after 1-3 calls on half its
 * plays; a lone surrogate anywhere in a tool's parameters refuses the env; forks keep a refusal and later steps are
 * answered by the worker. Not fixed: the native format's cut reply (Known gaps, now measured).
 */
import type { Attack } from '../sandbox-redteam.js';

const J = (expr: string): Attack =>
  `try { return JSON.stringify(${expr}); } catch (e: any) { return 'error ' + (e.code ?? e.name) + ' ' + String(e.message).slice(0, 120); }`;

const attacks: Record<string, Attack> = {
  // control: a description with a lone surrogate as the module's JSON.stringify writes its tools (the escape the worker
  // forwards and xgrammar cannot parse); nothing of the host or the clock
  controlDescSurrogate: J(`{ text: JSON.stringify({ description: 'The customer id \\ud800' }) }`),
  // process.report: its header holds the host name, OS release, CPUs and the dump's real time when it is reachable
  processReport: J(
    `(() => { const h = (process as any).report?.getReport?.()?.header; return h ? { dumpEventTime: h.dumpEventTime, host: h.host, osRelease: h.osRelease, cpus: h.cpus?.length, cwd: h.cwd } : 'no report'; })()`,
  ),
  // v8's heap statistics: sizes move with allocation, not time; a limit read from the host's memory would show here
  v8Heap: J(
    `(() => { const s = (process.getBuiltinModule('node:v8') as any).getHeapStatistics(); return { limit: s.heap_size_limit, avail: s.total_available_size > 0, contexts: s.number_of_native_contexts }; })()`,
  ),
  // the locale clock: a second path to the date than Date.now / toISOString
  localeTime: J(`[new Date().toLocaleString('en-US', { timeZone: 'UTC' }), new Intl.DateTimeFormat('en-GB').format()]`),
  // an interval's ticks against performance.now and Date.now: does the virtual clock move with real waits?
  intervalTicks: `return await new Promise<string>((resolve) => { const t0 = performance.now(), d0 = Date.now(); let n = 0;
    const t = setInterval(() => { if (++n === 5) { clearInterval(t); resolve(JSON.stringify({ n, dp: performance.now() - t0, dd: Date.now() - d0 })); } }, 2); });`,
};
export default attacks;
