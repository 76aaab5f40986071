import { createHash } from 'node:crypto';
import { calculate } from './calculate.js';
import { dumpTyped, fromTree, str, type ModelType, type Obj, type PyType } from './model.js';
import type { JsonTree } from './ordered-json.js';
import { pyJsonString } from './python-format.js';

/**
 * The runtime shared by the tau2 domains: a copy-on-write database, tool definitions with tau2's
 * READ/WRITE/GENERIC/THINK types, and tool execution that formats results and errors exactly as
 * tau2's `Environment.get_response` does.
 */
export type ToolType = 'read' | 'write' | 'think' | 'generic';

/**
 * A domain database whose top level is a set of dict fields (flights/users/reservations, ...).
 * `fork()` copies nothing: tables and entities stay shared until a WRITE tool takes an entity with
 * `own()`, which clones that entity (and its table's Map) for this copy alone.
 */
const entityText = new WeakMap<object, string>();

export class Tau2Db {
  private owned = new WeakSet<object>();
  constructor(
    readonly type: ModelType,
    readonly tables: Record<string, Map<string, unknown>>,
    private sharedTables = new Set<string>(),
    /** The copy this one descends from by forks, and the `table/key`s written since then. */
    private readonly root: object = {},
    private readonly written = new Set<string>(),
  ) {}

  static load(type: ModelType, tree: JsonTree): Tau2Db {
    const o = fromTree(tree, type) as Record<string, Map<string, unknown>>;
    return new Tau2Db(type, o);
  }

  table<T>(name: string): Map<string, T> {
    return this.tables[name] as Map<string, T>;
  }

  /** The entity `key` of `table`; a ValueError with the domain's own message (tau2's wording) when absent. */
  get<T>(name: string, key: unknown, notFound: string): T {
    const e = this.table<T>(name).get(key as string);
    if (!e) throw valueError(notFound);
    return e;
  }

  /** The entity `key` of `table`, private to this copy so it may be mutated. */
  own<T extends object>(name: string, key: string): T {
    const e = this.tables[name].get(key) as T;
    if (this.owned.has(e)) return e;
    const copy = structuredClone(e);
    this.writable(name).set(key, copy);
    this.owned.add(copy);
    this.written.add(`${name}/${key}`);
    return copy;
  }

  /** Adds a new entity (owned by this copy). */
  insert(name: string, key: string, value: object): void {
    this.writable(name).set(key, value);
    this.owned.add(value);
    this.written.add(`${name}/${key}`);
  }

  /** A table this copy may add entries to: shared tables are copied on first write. */
  private writable(name: string): Map<string, unknown> {
    if (this.sharedTables.delete(name)) this.tables[name] = new Map(this.tables[name]);
    return this.tables[name];
  }

  /** O(number of tables): both copies share every table and entity until they write. */
  fork(): Tau2Db {
    this.owned = new WeakSet();
    this.sharedTables = new Set(Object.keys(this.tables));
    return new Tau2Db(this.type, { ...this.tables }, new Set(this.sharedTables), this.root, new Set(this.written));
  }

  /**
   * Whether `hash()` of both copies would be equal, without hashing: copies of one base DB share
   * every entity neither has written, so only the entities either side owns are serialised.
   */
  sameAs(other: Tau2Db): boolean {
    if (this.root === other.root) return this.sameEntries(other, new Set([...this.written, ...other.written]));
    for (const f of this.type.fields) {
      const a = this.tables[f.name];
      const b = other.tables[f.name];
      if (a === b) continue;
      if (a.size !== b.size) return false;
      const t = (f.type as { k: 'dict'; of: PyType }).of;
      for (const [k, v] of a) {
        if (!b.has(k)) return false;
        const w = b.get(k);
        if (v !== w && dumpTyped(v, t, true) !== dumpTyped(w, t, true)) return false;
      }
    }
    return true;
  }

  /** Copies of one root differ at most in the entities either has written since. */
  private sameEntries(other: Tau2Db, keys: Set<string>): boolean {
    for (const ref of keys) {
      const cut = ref.indexOf('/');
      const name = ref.slice(0, cut);
      const key = ref.slice(cut + 1);
      const a = this.tables[name];
      const b = other.tables[name];
      if (a.has(key) !== b.has(key)) return false;
      const v = a.get(key);
      const w = b.get(key);
      if (v === w) continue;
      const t = (this.type.fields.find((f) => f.name === name)!.type as { k: 'dict'; of: PyType }).of;
      if (dumpTyped(v, t, true) !== dumpTyped(w, t, true)) return false;
    }
    return true;
  }

  /**
   * tau2's DB hash: sha256 of `json.dumps(db.model_dump(), sort_keys=True, default=str)`. Entities
   * not owned by this copy can never change again, so their serialisation is cached across copies.
   */
  hash(): string {
    const h = createHash('sha256');
    const fields = [...this.type.fields].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    h.update('{');
    fields.forEach((f, i) => {
      const t = f.type as { k: 'dict'; of: PyType };
      const table = this.tables[f.name];
      h.update(`${i ? ', ' : ''}${pyJsonString(f.name)}: {`);
      [...table.keys()].sort().forEach((key, j) => {
        const e = table.get(key) as object;
        let text = this.owned.has(e) ? undefined : entityText.get(e);
        if (text === undefined) {
          text = dumpTyped(e, t.of, true);
          if (!this.owned.has(e)) entityText.set(e, text);
        }
        h.update(`${j ? ', ' : ''}${pyJsonString(key)}: ${text}`);
      });
      h.update('}');
    });
    h.update('}');
    return h.digest('hex');
  }
}

export interface ToolParam {
  name: string;
  /** Parameters with a Python default may be omitted. */
  optional?: boolean;
}

export interface ToolDef<Ctx> {
  name: string;
  type: ToolType;
  params: ToolParam[];
  /** The declared return type, used to serialise results (`str` results are returned as is). */
  returns: PyType;
  run(ctx: Ctx, args: Obj): unknown;
}

/** Required parameters by name, as most tau2 tools declare them. */
export const params = (...names: string[]): ToolParam[] => names.map((name) => ({ name }));

/** tau2's GENERIC `calculate` tool, the same in every domain that offers it. */
export const CALCULATE_TOOL: ToolDef<Tau2Db> = {
  name: 'calculate',
  type: 'generic',
  returns: str,
  params: params('expression'),
  run: (_db, a) => calculate(a.expression as string),
};

/** tau2's GENERIC `transfer_to_human_agents` tool, the same in every domain that offers it. */
export const TRANSFER_TOOL: ToolDef<Tau2Db> = {
  name: 'transfer_to_human_agents',
  type: 'generic',
  returns: str,
  params: params('summary'),
  run: () => 'Transfer successful',
};

export interface ToolOutput {
  content: string;
  error: boolean;
}

/** Python's TypeError for a call with missing or unexpected keyword arguments, or null. */
export function checkArguments(qualname: string, params: ToolParam[], args: Obj): string | null {
  const names = new Set(params.map((p) => p.name));
  for (const k of Object.keys(args)) {
    if (!names.has(k)) return `${qualname}() got an unexpected keyword argument '${k}'`;
  }
  const missing = params.filter((p) => !p.optional && !(p.name in args)).map((p) => `'${p.name}'`);
  if (!missing.length) return null;
  const list =
    missing.length === 1
      ? missing[0]
      : missing.length === 2
        ? `${missing[0]} and ${missing[1]}`
        : `${missing.slice(0, -1).join(', ')}, and ${missing[missing.length - 1]}`;
  return `${qualname}() missing ${missing.length} required positional argument${missing.length === 1 ? '' : 's'}: ${list}`;
}

/** Runs one tool call and renders the result as tau2 does (`to_json_str`, `"Error: {e}"`). */
export function runTool<Ctx>(
  toolkitName: string,
  tools: Map<string, ToolDef<Ctx>>,
  ctx: Ctx,
  name: string,
  args: Obj,
): ToolOutput {
  const tool = tools.get(name);
  if (!tool) return { content: `Error: Tool '${name}' not found.`, error: true };
  const typeError = checkArguments(`${toolkitName}.${name}`, tool.params, args);
  if (typeError) return { content: `Error: ${typeError}`, error: true };
  let result: unknown;
  try {
    result = tool.run(ctx, args);
  } catch (e) {
    return { content: `Error: ${e instanceof Error ? e.message : String(e)}`, error: true };
  }
  return { content: typeof result === 'string' ? result : dumpTyped(result, tool.returns, false), error: false };
}

/** Python's ValueError, whose str() is the message. */
export function valueError(message: string): Error {
  return new Error(message);
}
