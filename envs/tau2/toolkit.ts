import { createHash } from 'node:crypto';
import { dumpTyped, fromTree, type ModelType, type Obj, type PyType } from './model.js';
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
 * `fork()` copies only the top-level Maps; entities are shared until a WRITE tool takes one with
 * `own()`, which clones that entity for this copy alone.
 */
const entityText = new WeakMap<object, string>();

export class Tau2Db {
  private owned = new WeakSet<object>();
  constructor(
    readonly type: ModelType,
    readonly tables: Record<string, Map<string, unknown>>,
  ) {}

  static load(type: ModelType, tree: JsonTree): Tau2Db {
    const o = fromTree(tree, type) as Record<string, Map<string, unknown>>;
    return new Tau2Db(type, o);
  }

  table<T>(name: string): Map<string, T> {
    return this.tables[name] as Map<string, T>;
  }

  /** The entity `key` of `table`, private to this copy so it may be mutated. */
  own<T extends object>(name: string, key: string): T {
    const t = this.tables[name];
    const e = t.get(key) as T;
    if (this.owned.has(e)) return e;
    const copy = structuredClone(e);
    t.set(key, copy);
    this.owned.add(copy);
    return copy;
  }

  /** Adds a new entity (owned by this copy). */
  insert(name: string, key: string, value: object): void {
    this.tables[name].set(key, value);
    this.owned.add(value);
  }

  fork(): Tau2Db {
    // Entities owned so far become shared with the copy, so neither side may mutate them in place.
    this.owned = new WeakSet();
    const tables: Record<string, Map<string, unknown>> = {};
    for (const [k, v] of Object.entries(this.tables)) tables[k] = new Map(v);
    return new Tau2Db(this.type, tables);
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
export function runTool<Ctx>(toolkitName: string, tools: Map<string, ToolDef<Ctx>>, ctx: Ctx, name: string, args: Obj): ToolOutput {
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
