import { pyJsonDumps, pyJsonString, pyNumber, pyRepr } from './python-format.js';
import type { JsonTree } from './ordered-json.js';

/**
 * A small description of tau2's pydantic models: enough to load the JSON DBs with the right shape
 * (dicts as Maps, defaults filled), to dump them exactly as `json.dumps(model.model_dump())` does
 * (floats as floats, null-valued optional fields included) and to validate tool arguments the way
 * pydantic's constructors do, with pydantic's error text.
 */
export type PyType =
  | { k: 'str' }
  | { k: 'int' }
  | { k: 'float' }
  | { k: 'bool' }
  | { k: 'any' }
  | { k: 'literal'; values: string[] }
  | { k: 'list'; of: PyType }
  | { k: 'dict'; of: PyType }
  | { k: 'opt'; of: PyType }
  | ModelType
  | { k: 'union'; by: string; options: Record<string, ModelType> };
export interface ModelField {
  name: string;
  type: PyType;
  /** Present when the field has a default (pydantic `Field(default=...)`). */
  default?: { value: unknown };
}
export interface ModelType {
  k: 'model';
  name: string;
  fields: ModelField[];
}

export const str: PyType = { k: 'str' };
export const int: PyType = { k: 'int' };
export const float: PyType = { k: 'float' };
export const bool: PyType = { k: 'bool' };
export const literal = (...values: string[]): PyType => ({ k: 'literal', values });
export const list = (of: PyType): PyType => ({ k: 'list', of });
export const dict = (of: PyType): PyType => ({ k: 'dict', of });
export const opt = (of: PyType): PyType => ({ k: 'opt', of });
export const union = (by: string, options: Record<string, ModelType>): PyType => ({ k: 'union', by, options });
/** `[name, type]` is required; `[name, type, default]` has a default. */
export function model(name: string, fields: ([string, PyType] | [string, PyType, unknown])[]): ModelType {
  return {
    k: 'model',
    name,
    fields: fields.map((f) =>
      f.length === 3 ? { name: f[0], type: f[1], default: { value: f[2] } } : { name: f[0], type: f[1] },
    ),
  };
}

export type Obj = Record<string, unknown>;

/** Loads a DB tree (from parseOrderedJson) into runtime values: models → objects, dicts → Maps. */
export function fromTree(tree: JsonTree, t: PyType, path = '$'): unknown {
  switch (t.k) {
    case 'opt':
      return tree === null ? null : fromTree(tree, t.of, path);
    case 'list':
      if (!Array.isArray(tree)) throw new Error(`${path}: expected a list`);
      return tree.map((x, i) => fromTree(x, t.of, `${path}[${i}]`));
    case 'dict': {
      if (!(tree instanceof Map)) throw new Error(`${path}: expected an object`);
      const m = new Map<string, unknown>();
      for (const [k, v] of tree) m.set(k, fromTree(v, t.of, `${path}.${k}`));
      return m;
    }
    case 'union': {
      if (!(tree instanceof Map)) throw new Error(`${path}: expected an object`);
      const opt = t.options[String(tree.get(t.by))];
      if (!opt) throw new Error(`${path}.${t.by}: unknown variant ${String(tree.get(t.by))}`);
      return fromTree(tree, opt, path);
    }
    case 'model': {
      if (!(tree instanceof Map)) throw new Error(`${path}: expected an object for ${t.name}`);
      const o: Obj = {};
      for (const f of t.fields) {
        if (tree.has(f.name)) o[f.name] = fromTree(tree.get(f.name)!, f.type, `${path}.${f.name}`);
        else if (f.default) o[f.name] = structuredClone(f.default.value);
        else throw new Error(`${path}.${f.name}: missing field of ${t.name}`);
      }
      return o;
    }
    case 'any':
      return treeToPlain(tree);
    default:
      return tree;
  }
}

function treeToPlain(tree: JsonTree): unknown {
  if (tree instanceof Map) return Object.fromEntries([...tree].map(([k, v]) => [k, treeToPlain(v)]));
  if (Array.isArray(tree)) return tree.map(treeToPlain);
  return tree;
}

/** `json.dumps(model_dump(v))` (sortKeys: `sort_keys=True`), driven by the declared types. */
export function dumpTyped(v: unknown, t: PyType, sortKeys: boolean): string {
  if (v === null || v === undefined) return 'null';
  switch (t.k) {
    case 'float':
      return typeof v === 'number' ? pyNumber(v, true) : pyJsonDumps(v, sortKeys);
    case 'opt':
      return dumpTyped(v, t.of, sortKeys);
    case 'int':
      return typeof v === 'number' ? pyNumber(v, false) : pyJsonDumps(v, sortKeys);
    case 'list':
      return Array.isArray(v) ? `[${v.map((x) => dumpTyped(x, t.of, sortKeys)).join(', ')}]` : pyJsonDumps(v, sortKeys);
    case 'dict': {
      if (!(v instanceof Map)) return pyJsonDumps(v, sortKeys);
      let keys = [...v.keys()];
      if (sortKeys) keys = keys.sort(cmp);
      return `{${keys.map((k) => `${pyJsonString(k)}: ${dumpTyped(v.get(k), t.of, sortKeys)}`).join(', ')}}`;
    }
    case 'union': {
      const opt = t.options[String((v as Obj)[t.by])];
      return opt ? dumpTyped(v, opt, sortKeys) : pyJsonDumps(v, sortKeys);
    }
    case 'model': {
      const o = v as Obj;
      let fields = t.fields;
      if (sortKeys) fields = [...fields].sort((a, b) => cmp(a.name, b.name));
      return `{${fields.map((f) => `${pyJsonString(f.name)}: ${dumpTyped(o[f.name], f.type, sortKeys)}`).join(', ')}}`;
    }
    default:
      return pyJsonDumps(v, sortKeys);
  }
}

const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

interface LineError {
  loc: (string | number)[];
  type: string;
  msg: string;
  input: unknown;
}

/** A pydantic ValidationError, with pydantic's message layout. */
export class PydanticValidationError extends Error {
  constructor(title: string, errors: LineError[]) {
    const n = errors.length;
    const lines = errors.map((e) => {
      const loc = e.loc.length ? `${e.loc.join('.')}\n` : '';
      const input = e.input === undefined ? {} : e.input;
      return (
        `${loc}  ${e.msg} [type=${e.type}, input_value=${truncateRepr(pyRepr(input))}, input_type=${pyTypeName(input)}]\n` +
        `    For further information visit https://errors.pydantic.dev/2.14/v/${e.type}`
      );
    });
    super(`${n} validation error${n === 1 ? '' : 's'} for ${title}\n${lines.join('\n')}`);
  }
}

function truncateRepr(r: string): string {
  return r.length > 50 ? `${r.slice(0, 25)}...${r.slice(-24)}` : r;
}

function pyTypeName(v: unknown): string {
  if (v === null || v === undefined) return 'NoneType';
  if (typeof v === 'string') return 'str';
  if (typeof v === 'boolean') return 'bool';
  if (typeof v === 'number') return Number.isInteger(v) ? 'int' : 'float';
  if (Array.isArray(v)) return 'list';
  return 'dict';
}

/** Constructs a model from argument values as pydantic's lax mode does; throws its ValidationError. */
export function construct(t: ModelType, input: Obj): Obj {
  const errors: LineError[] = [];
  const out = coerceModel(t, input, [], errors);
  if (errors.length) throw new PydanticValidationError(t.name, errors);
  return out;
}

function isPlainObject(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Map);
}

function coerceModel(t: ModelType, input: Obj, loc: (string | number)[], errors: LineError[]): Obj {
  const o: Obj = {};
  for (const f of t.fields) {
    if (f.name in input && input[f.name] !== undefined)
      o[f.name] = coerce(input[f.name], f.type, [...loc, f.name], errors);
    else if (f.default) o[f.name] = structuredClone(f.default.value);
    else errors.push({ loc: [...loc, f.name], type: 'missing', msg: 'Field required', input });
  }
  return o;
}

function coerce(v: unknown, t: PyType, loc: (string | number)[], errors: LineError[]): unknown {
  const bad = (type: string, msg: string) => {
    errors.push({ loc, type, msg, input: v });
    return v;
  };
  switch (t.k) {
    case 'any':
      return v;
    case 'str':
      return typeof v === 'string' ? v : bad('string_type', 'Input should be a valid string');
    case 'bool':
      return typeof v === 'boolean' ? v : bad('bool_type', 'Input should be a valid boolean');
    case 'int':
      if (typeof v === 'boolean') return v ? 1 : 0;
      if (typeof v === 'number')
        return Number.isInteger(v)
          ? v
          : bad('int_from_float', 'Input should be a valid integer, got a number with a fractional part');
      if (typeof v === 'string')
        return /^\s*[+-]?\d+\s*$/.test(v)
          ? Number(v)
          : bad('int_parsing', 'Input should be a valid integer, unable to parse string as an integer');
      return bad('int_type', 'Input should be a valid integer');
    case 'float':
      if (typeof v === 'boolean') return v ? 1 : 0;
      if (typeof v === 'number') return v;
      if (typeof v === 'string')
        return v.trim() !== '' && !Number.isNaN(Number(v))
          ? Number(v)
          : bad('float_parsing', 'Input should be a valid number, unable to parse string as a number');
      return bad('float_type', 'Input should be a valid number');
    case 'literal': {
      if (typeof v === 'string' && t.values.includes(v)) return v;
      const q = t.values.map((x) => `'${x}'`);
      const expected = q.length === 1 ? q[0] : `${q.slice(0, -1).join(', ')} or ${q[q.length - 1]}`;
      return bad('literal_error', `Input should be ${expected}`);
    }
    case 'opt':
      return v === null ? null : coerce(v, t.of, loc, errors);
    case 'list':
      if (!Array.isArray(v)) return bad('list_type', 'Input should be a valid list');
      return v.map((x, i) => coerce(x, t.of, [...loc, i], errors));
    case 'dict': {
      if (!isPlainObject(v)) return bad('dict_type', 'Input should be a valid dictionary');
      const m = new Map<string, unknown>();
      for (const [k, x] of Object.entries(v)) m.set(k, coerce(x, t.of, [...loc, k], errors));
      return m;
    }
    case 'union': {
      const o = isPlainObject(v) ? t.options[String(v[t.by])] : undefined;
      return o ? coerceModel(o, v as Obj, loc, errors) : bad('union_tag_invalid', 'Input does not match any variant');
    }
    case 'model':
      if (!isPlainObject(v)) return bad('model_type', `Input should be a valid dictionary or instance of ${t.name}`);
      return coerceModel(t, v, loc, errors);
  }
}
