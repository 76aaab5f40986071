import type { Message } from '../../core/messages.js';
import { initialDb, type Tau2Domain, type Toolkit } from './domains.js';
import { fromTree, type Obj, type PyType } from './model.js';
import type { JsonTree } from './ordered-json.js';
import type { Tau2Message, Tau2Task } from './tasks.js';
import { checkArguments, runTool, Tau2Db, type ToolDef, type ToolOutput } from './toolkit.js';

/**
 * The state of one tau2 environment (agent DB, plus the user DB in mock) and tau2's ways of
 * building it: initial state of a task, tool calls by requestor, and replaying the mutating calls of
 * a message list (Environment.set_state).
 */
export type Requestor = 'user' | 'assistant';

export interface ReplayCall {
  requestor: Requestor;
  name: string;
  args: Obj;
  /** The recorded output; a replayed output that differs is reported as a mismatch. */
  expected?: string;
}

const toolIndex = new WeakMap<Toolkit, Map<string, ToolDef<Tau2Db>>>();

export class Tau2State {
  constructor(
    readonly domain: Tau2Domain,
    public db: Tau2Db,
    public userDb: Tau2Db | undefined,
  ) {}

  static initial(domain: Tau2Domain): Tau2State {
    return new Tau2State(
      domain,
      initialDb(domain.name, domain.agent),
      domain.user ? initialDb(domain.name, domain.user) : undefined,
    );
  }

  /** A fresh environment with the task's initial_state applied (data, actions, message history). */
  static forTask(domain: Tau2Domain, task: Tau2Task, opts: { withHistory?: boolean } = {}): Tau2State {
    const s = Tau2State.initial(domain);
    const init = task.initial_state;
    if (!init) return s;
    const data = init.initialization_data;
    if (data?.agent_data) s.db = mergeUpdate(s.db, data.agent_data);
    if (data?.user_data && s.userDb) s.userDb = mergeUpdate(s.userDb, data.user_data);
    for (const a of init.initialization_actions ?? []) s.runFunction(a.env_type, a.func_name, a.arguments);
    if (opts.withHistory === false) return s;
    const mismatches = s.replay(historyCalls(init.message_history ?? []));
    if (mismatches.length)
      throw new Error(`task ${task.id}: initial message_history does not replay: ${mismatches[0]}`);
    return s;
  }

  fork(): Tau2State {
    return new Tau2State(this.domain, this.db.fork(), this.userDb?.fork());
  }

  private side(requestor: Requestor): [Toolkit, Tau2Db] {
    if (requestor === 'user') {
      if (!this.domain.user || !this.userDb) throw new Error('User tools not available');
      return [this.domain.user, this.userDb];
    }
    return [this.domain.agent, this.db];
  }

  /** `Environment.get_response`: one tool call rendered as tau2's tool message content. */
  call(requestor: Requestor, name: string, args: Obj): ToolOutput {
    const [kit, db] = this.side(requestor);
    let byName = toolIndex.get(kit);
    if (!byName) toolIndex.set(kit, (byName = new Map(kit.tools.map((t) => [t.name, t]))));
    return runTool(kit.className, byName, db, name, args);
  }

  /** `make_tool_call` for gold actions: runs the tool for its effect; errors are ignored, as upstream. */
  apply(requestor: Requestor, name: string, args: Obj): void {
    const [kit, db] = this.side(requestor);
    const tool = kit.tools.find((t) => t.name === name);
    if (!tool || checkArguments(`${kit.className}.${name}`, tool.params, args)) return;
    try {
      tool.run(db, args);
    } catch {
      // the gold env keeps whatever state the failing call left, like tau2's logged warning
    }
  }

  isMutating(requestor: Requestor, name: string): boolean | undefined {
    const kit = requestor === 'user' ? this.domain.user : this.domain.agent;
    const tool = kit?.tools.find((t) => t.name === name);
    return tool ? tool.type === 'write' : undefined;
  }

  /** `run_env_function_call`: a tool or helper method called directly; errors propagate. */
  runFunction(requestor: Requestor, name: string, args: Obj): unknown {
    const [kit, db] = this.side(requestor);
    const fn = kit.functions[name] ?? kit.tools.find((t) => t.name === name)?.run;
    if (!fn) throw new Error(`Function ${name} not found in ${requestor} tools`);
    return fn(db, args);
  }

  /** Replays only the mutating calls (as set_state does); returns a line per output mismatch. */
  replay(calls: ReplayCall[]): string[] {
    const mismatches: string[] = [];
    for (const c of calls) {
      if (!this.isMutating(c.requestor, c.name)) continue; // unknown tools and reads are no-ops
      const out = this.call(c.requestor, c.name, c.args);
      if (
        c.expected !== undefined &&
        out.content !== c.expected &&
        !jsonEqual(parseMaybe(out.content), parseMaybe(c.expected))
      ) {
        mismatches.push(
          `${c.name}: replay returned ${out.content.slice(0, 200)}, recorded ${c.expected.slice(0, 200)}`,
        );
      }
    }
    return mismatches;
  }
}

/** The tool calls of a tau2-format message history, paired with their recorded results. */
export function historyCalls(history: Tau2Message[]): ReplayCall[] {
  const calls: ReplayCall[] = [];
  history.forEach((m, i) => {
    if ((m.role === 'assistant' || m.role === 'user') && m.tool_calls) {
      m.tool_calls.forEach((tc, j) => {
        const result = history[i + 1 + j];
        calls.push({
          requestor: tc.requestor ?? (m.role === 'user' ? 'user' : 'assistant'),
          name: tc.name,
          args: tc.arguments,
          expected: result?.role === 'tool' ? (result.content ?? '') : undefined,
        });
      });
    }
  });
  return calls;
}

/** The agent's tool calls in an OpenAI-format trajectory, with their recorded tool messages. */
export function trajectoryCalls(messages: Message[]): ReplayCall[] {
  const results = new Map<string, string>();
  for (const m of messages) if (m.role === 'tool') results.set(m.tool_call_id, m.content);
  const calls: ReplayCall[] = [];
  for (const m of messages) {
    if (m.role !== 'assistant' || !m.tool_calls) continue;
    for (const tc of m.tool_calls) {
      const args = parseArguments(tc.function.arguments);
      if (args) calls.push({ requestor: 'assistant', name: tc.function.name, args, expected: results.get(tc.id) });
    }
  }
  return calls;
}

/** Tool-call arguments as tau2 receives them (a JSON object), or null when they are not one. */
export function parseArguments(text: string): Obj | null {
  try {
    const v: unknown = JSON.parse(text === '' ? '{}' : text);
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Obj) : null;
  } catch {
    return null;
  }
}

function parseMaybe(s: string): unknown {
  try {
    return JSON.parse(s);
  } catch {
    return s;
  }
}

/** Python `==` on JSON values: dicts compare without regard to key order. */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a))
    return a.length === (b as unknown[]).length && a.every((x, i) => jsonEqual(x, (b as unknown[])[i]));
  const ka = Object.keys(a);
  return ka.length === Object.keys(b).length && ka.every((k) => k in b && jsonEqual((a as Obj)[k], (b as Obj)[k]));
}

/** `update_pydantic_model_with_dict`: addict's recursive dict merge, then re-validation. */
function mergeUpdate(db: Tau2Db, update: Obj): Tau2Db {
  const copy = new Tau2Db(db.type, structuredClone(db.tables));
  for (const [field, value] of Object.entries(update)) {
    const f = db.type.fields.find((x) => x.name === field);
    if (!f) throw new Error(`initialization_data: unknown field '${field}' of ${db.type.name}`);
    copy.tables[field] = merge(copy.tables[field], value, f.type) as Map<string, unknown>;
  }
  return copy;
}

function merge(cur: unknown, upd: unknown, t: PyType): unknown {
  const isDict = typeof upd === 'object' && upd !== null && !Array.isArray(upd);
  if (!isDict) return fromTree(toTree(upd), t);
  if (t.k === 'opt') return cur == null ? fromTree(toTree(upd), t) : merge(cur, upd, t.of);
  if (t.k === 'dict' && cur instanceof Map) {
    for (const [k, v] of Object.entries(upd as Obj))
      cur.set(k, cur.has(k) ? merge(cur.get(k), v, t.of) : fromTree(toTree(v), t.of));
    return cur;
  }
  const model = t.k === 'union' ? t.options[String((cur as Obj)?.[t.by])] : t.k === 'model' ? t : undefined;
  if (model && typeof cur === 'object' && cur !== null) {
    const o = cur as Obj;
    for (const [k, v] of Object.entries(upd as Obj)) {
      const f = model.fields.find((x) => x.name === k);
      if (f) o[k] = k in o && o[k] !== null ? merge(o[k], v, f.type) : fromTree(toTree(v), f.type);
    }
    return o;
  }
  return fromTree(toTree(upd), t);
}

function toTree(v: unknown): JsonTree {
  if (Array.isArray(v)) return v.map(toTree);
  if (typeof v === 'object' && v !== null) return new Map(Object.entries(v).map(([k, x]) => [k, toTree(x)]));
  return v as JsonTree;
}

/** A task's tau2-format message history as OpenAI-format messages (agent tool calls kept). */
export function historyAsMessages(history: Tau2Message[]): Message[] {
  const out: Message[] = [];
  for (const m of history) {
    if (m.role === 'assistant') {
      const calls = (m.tool_calls ?? []).map((tc) => ({
        id: tc.id,
        type: 'function' as const,
        function: { name: tc.name, arguments: JSON.stringify(tc.arguments) },
      }));
      out.push({ role: 'assistant', content: m.content ?? null, ...(calls.length ? { tool_calls: calls } : {}) });
    } else if (m.role === 'tool') {
      if (m.requestor !== 'user') out.push({ role: 'tool', tool_call_id: m.id ?? '', content: m.content ?? '' });
    } else if (m.role === 'user' && m.content) {
      out.push({ role: 'user', content: m.content });
    }
  }
  return out;
}
