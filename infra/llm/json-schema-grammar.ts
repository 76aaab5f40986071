import type { GbnfJsonSchema } from 'node-llama-cpp';

/**
 * Maps a standard JSON Schema (as sent in OpenAI `tools[].function.parameters` and
 * `response_format.json_schema.schema`, e.g. from zod's toJSONSchema) onto the subset that
 * node-llama-cpp compiles to a grammar. The result only admits values the source schema admits,
 * except for keywords a grammar cannot express (numeric bounds, patterns, most string formats),
 * which are dropped, and descriptions, which constrain nothing: copied into each optional-property
 * subset they made a 117 MiB grammar of one 960 KB tool, kept per tool set by the server (rerun 72k). `$ref`s are inlined; a recursive `$ref` becomes "any JSON value".
 *
 * node-llama-cpp makes every listed property required, so an object with optional properties
 * becomes a choice between its subsets (in their declared order) when it has at most
 * MAX_OPTIONAL_SUBSET of them, else between "required properties only" and "all properties".
 */
type Json = Record<string, unknown>;

export class SchemaConversionError extends Error {
  override name = 'SchemaConversionError';
  constructor(
    readonly field: string,
    readonly reason: string,
  ) {
    super(`${field}: ${reason}`);
  }
}

const ANY: GbnfJsonSchema = {
  oneOf: [
    { type: ['string', 'number', 'boolean', 'null'] },
    { type: 'array' },
    { type: 'object', additionalProperties: true },
  ],
};

/** Schema nodes a grammar may expand to: `$ref`s and optional properties fan out, so a small schema can stand for billions ("billion laughs"); the largest real tool schema here expands to a few hundred. */
export const MAX_GRAMMAR_NODES = 20_000;
/**
 * Optional properties of one object written as every subset of them (2^n alternatives): the worker
 * lets a generated env see any subset, and one validation's policy could not write is one a module
 * can pay in training alone. Every built-in target fits (τ² has at most 1, ToolSandbox 8); 8 costs
 * ToolSandbox's forced search_messages calls 3.4 s per 60 tokens on SmolLM2 instead of 1.6 s.
 */
export const MAX_OPTIONAL_SUBSET = 8;
/** Nesting of schemas inside schemas (the conversion recurses once per level). */
export const MAX_SCHEMA_DEPTH = 32;

const PRIMITIVES = new Set(['string', 'number', 'integer', 'boolean', 'null']);
const GRAMMAR_STRING_FORMATS = new Set(['date-time', 'time', 'date']);

export function jsonSchemaToGrammarSchema(schema: unknown, field = 'schema'): GbnfJsonSchema {
  return jsonSchemasToGrammarSchemas([{ schema, field }], field)[0];
}

/**
 * Several schemas that make one grammar (a request's or an env's tools), under one budget: 256
 * tools, each just under it, held check 1 on the worker's event loop for 1.6–1.9 s (rerun 72i).
 * `together` names them all where the whole is too large.
 */
export function jsonSchemasToGrammarSchemas(
  schemas: readonly { schema: unknown; field: string }[],
  together: string,
): GbnfJsonSchema[] {
  const budget = { left: MAX_GRAMMAR_NODES, tooLarge: tooLarge(together) };
  const out = schemas.map(({ schema, field }, i) => {
    if (!isObject(schema) && typeof schema !== 'boolean') {
      throw new SchemaConversionError(field, `must be a JSON Schema object`);
    }
    budget.tooLarge = tooLarge(field, i > 0);
    return convert(schema, { root: isObject(schema) ? schema : {}, field, refStack: [], depth: 0, budget });
  });
  // Conversion shares converted children between alternatives (optional properties); the grammar
  // compiler walks each use, so the budget applies to the expanded tree as well.
  assertGrammarSize(oneOf(out), together);
  return out;
}

/** Refuses a grammar schema (one converted schema, or several put together) that expands past MAX_GRAMMAR_NODES. */
export function assertGrammarSize(schema: GbnfJsonSchema, field: string): void {
  if (expandedNodes(schema, MAX_GRAMMAR_NODES) > MAX_GRAMMAR_NODES) throw tooLarge(field);
}

const tooLarge = (field: string, withEarlier = false) =>
  new SchemaConversionError(
    field,
    `expands to more than ${MAX_GRAMMAR_NODES} schema nodes${withEarlier ? ' together with the schemas before it' : ''} (through $refs, anyOf or optional properties); a grammar this large is refused`,
  );

interface Ctx {
  root: Json;
  field: string;
  refStack: string[];
  depth: number;
  /** Shared by the whole conversion: nodes still allowed. */
  budget: { left: number; tooLarge: SchemaConversionError };
}

function convert(schema: unknown, parent: Ctx): GbnfJsonSchema {
  if (--parent.budget.left < 0) throw parent.budget.tooLarge;
  const ctx = { ...parent, depth: parent.depth + 1 };
  if (ctx.depth > MAX_SCHEMA_DEPTH)
    throw new SchemaConversionError(ctx.field, `nests deeper than ${MAX_SCHEMA_DEPTH} schema levels`);
  if (schema === true || schema === undefined) return ANY;
  if (schema === false) throw new SchemaConversionError(ctx.field, `schema 'false' admits no value`);
  if (!isObject(schema)) throw new SchemaConversionError(ctx.field, `must be a JSON Schema object`);
  const s = schema;
  const out = convertBody(s, ctx);
  return s.nullable === true ? oneOf([out, { type: 'null' }]) : out;
}

function convertBody(s: Json, ctx: Ctx): GbnfJsonSchema {
  if (typeof s.$ref === 'string') return convertRef(s.$ref, ctx);
  if ('const' in s) {
    if (isPrimitive(s.const)) return { const: s.const };
    return ANY;
  }
  if (Array.isArray(s.enum)) {
    if (s.enum.length === 0) throw new SchemaConversionError(ctx.field, `empty enum admits no value`);
    return s.enum.every(isPrimitive) ? { enum: s.enum as (string | number | boolean | null)[] } : ANY;
  }
  const alternatives = (Array.isArray(s.anyOf) ? s.anyOf : Array.isArray(s.oneOf) ? s.oneOf : undefined) as
    unknown[] | undefined;
  if (alternatives) {
    if (alternatives.length === 0) throw new SchemaConversionError(ctx.field, `empty anyOf/oneOf admits no value`);
    return oneOf(alternatives.map((a) => convert(a, ctx)));
  }
  if (Array.isArray(s.allOf)) return convert(mergeAllOf(s.allOf as unknown[], ctx), ctx);

  const type =
    s.type ??
    (isObject(s.properties) || s.additionalProperties !== undefined
      ? 'object'
      : s.items !== undefined || s.prefixItems !== undefined
        ? 'array'
        : undefined);
  if (type === undefined) return ANY;
  if (Array.isArray(type)) {
    if (type.every((t) => typeof t === 'string' && PRIMITIVES.has(t) && t !== 'string')) {
      return { type: type as ('number' | 'integer' | 'boolean' | 'null')[] };
    }
    return oneOf(type.map((t) => convertBody({ ...s, type: t }, ctx)));
  }
  switch (type) {
    case 'string':
      return convertString(s);
    case 'number':
    case 'integer':
    case 'boolean':
    case 'null':
      return { type: type as 'number' | 'integer' | 'boolean' | 'null' };
    case 'object':
      return convertObject(s, ctx);
    case 'array':
      return convertArray(s, ctx);
    default:
      throw new SchemaConversionError(ctx.field, `unsupported type ${JSON.stringify(type)}`);
  }
}

function convertRef(ref: string, ctx: Ctx): GbnfJsonSchema {
  const m = /^#\/(\$defs|definitions)\/(.+)$/.exec(ref);
  if (ref === '#') return ctx.refStack.includes(ref) ? ANY : withRef(ref, ctx, ctx.root);
  if (!m)
    throw new SchemaConversionError(
      ctx.field,
      `unsupported $ref ${JSON.stringify(ref)} (only #/$defs/… and #/definitions/…)`,
    );
  const defs = ctx.root[m[1]];
  const target = isObject(defs) ? defs[decodeURIComponent(m[2].replace(/~1/g, '/').replace(/~0/g, '~'))] : undefined;
  if (target === undefined) throw new SchemaConversionError(ctx.field, `$ref ${ref} does not resolve`);
  // Inlining a recursive definition would never terminate; "any value" keeps the output parseable.
  if (ctx.refStack.includes(ref)) return ANY;
  return withRef(ref, ctx, target);
}

function withRef(ref: string, ctx: Ctx, target: unknown): GbnfJsonSchema {
  return convert(target, { ...ctx, refStack: [...ctx.refStack, ref] });
}

function convertString(s: Json): GbnfJsonSchema {
  if (typeof s.format === 'string' && GRAMMAR_STRING_FORMATS.has(s.format)) {
    return { type: 'string', format: s.format as 'date-time' | 'time' | 'date' };
  }
  const out: { type: 'string'; minLength?: number; maxLength?: number } = { type: 'string' };
  if (typeof s.minLength === 'number') out.minLength = s.minLength;
  if (typeof s.maxLength === 'number') out.maxLength = s.maxLength;
  return out;
}

function convertObject(s: Json, ctx: Ctx): GbnfJsonSchema {
  const props = isObject(s.properties) ? s.properties : {};
  const names = Object.keys(props);
  const requiredList = Array.isArray(s.required) ? s.required : [];
  // Charged before any work: 16,000 properties against 60,000 required names took 3.2 s (rerun 15).
  ctx.budget.left -= names.length + requiredList.length;
  if (ctx.budget.left < 0) throw ctx.budget.tooLarge;
  const converted: Record<string, GbnfJsonSchema> = {};
  for (const name of names)
    converted[name] = convert(props[name], { ...ctx, field: `${ctx.field}.properties.${name}` });
  const extra =
    s.additionalProperties === undefined
      ? names.length === 0
      : s.additionalProperties === true || s.additionalProperties === false
        ? s.additionalProperties
        : convert(s.additionalProperties, { ...ctx, field: `${ctx.field}.additionalProperties` });
  const object = (keys: string[]): GbnfJsonSchema => ({
    type: 'object',
    properties: Object.fromEntries(keys.map((k) => [k, converted[k]])),
    additionalProperties: extra,
    ...(typeof s.minProperties === 'number' ? { minProperties: s.minProperties } : {}),
    ...(typeof s.maxProperties === 'number' ? { maxProperties: s.maxProperties } : {}),
  });
  const requiredSet = new Set(requiredList);
  const optional = names.filter((n) => !requiredSet.has(n));
  if (optional.length > MAX_OPTIONAL_SUBSET)
    return oneOf([object(names.filter((n) => requiredSet.has(n))), object(names)]);
  // The subsets charged before they are built, as their expansion counts them at the least (each
  // object, its properties, each chosen child once): four tools of 294 objects with 8 optional
  // properties built 256 each before the size check refused them (rerun 72j: 0.6 s of the worker).
  const k = optional.length;
  if (k) ctx.budget.left -= 2 ** k * (2 + names.length - k) + k * 2 ** (k - 1);
  if (ctx.budget.left < 0) throw ctx.budget.tooLarge;
  const subsets: GbnfJsonSchema[] = [];
  for (let mask = 0; mask < 2 ** optional.length; mask++) {
    const chosen = new Set(optional.filter((_, i) => mask & (1 << i)));
    subsets.push(object(names.filter((n) => requiredSet.has(n) || chosen.has(n))));
  }
  return oneOf(subsets);
}

function convertArray(s: Json, ctx: Ctx): GbnfJsonSchema {
  const out: {
    type: 'array';
    items?: GbnfJsonSchema;
    prefixItems?: GbnfJsonSchema[];
    minItems?: number;
    maxItems?: number;
  } = { type: 'array' };
  const tuple = Array.isArray(s.prefixItems) ? s.prefixItems : Array.isArray(s.items) ? s.items : undefined;
  if (tuple) out.prefixItems = tuple.map((t, i) => convert(t, { ...ctx, field: `${ctx.field}.prefixItems.${i}` }));
  const rest = Array.isArray(s.items) ? s.additionalItems : s.items;
  if (rest === false && tuple) out.maxItems = tuple.length;
  else if (rest !== undefined && rest !== false) out.items = convert(rest, { ...ctx, field: `${ctx.field}.items` });
  if (typeof s.minItems === 'number') out.minItems = s.minItems;
  if (typeof s.maxItems === 'number') out.maxItems = Math.min(s.maxItems, out.maxItems ?? Infinity);
  return out;
}

/** Shallow merge of `allOf` members (properties and required lists unite); enough for generated schemas. */
function mergeAllOf(parts: unknown[], ctx: Ctx): Json {
  const merged: Json = {};
  const properties: Json = {};
  const required: unknown[] = [];
  for (const part of parts) {
    const p = isObject(part) && typeof part.$ref === 'string' ? resolveRefShallow(part.$ref, ctx) : part;
    if (!isObject(p)) continue;
    // Charged before it is copied: 2,000 $refs to one 5,000-property definition took 2.8 s (rerun 16).
    ctx.budget.left -=
      1 +
      (isObject(p.properties) ? Object.keys(p.properties).length : 0) +
      (Array.isArray(p.required) ? p.required.length : 0);
    if (ctx.budget.left < 0) throw ctx.budget.tooLarge;
    Object.assign(merged, p);
    if (isObject(p.properties)) Object.assign(properties, p.properties);
    if (Array.isArray(p.required)) required.push(...p.required);
  }
  if (Object.keys(properties).length) merged.properties = properties;
  if (required.length) merged.required = [...new Set(required)];
  delete merged.allOf;
  return merged;
}

function resolveRefShallow(ref: string, ctx: Ctx): unknown {
  const m = /^#\/(\$defs|definitions)\/(.+)$/.exec(ref);
  const defs = m ? ctx.root[m[1]] : undefined;
  return m && isObject(defs) ? defs[m[2]] : undefined;
}

/** Objects and arrays in `node` counted as a tree (shared ones once per use), stopping past `limit`. */
function expandedNodes(node: unknown, limit: number): number {
  let n = 0;
  const walk = (v: unknown): void => {
    if (typeof v !== 'object' || v === null || n > limit) return;
    n++;
    for (const child of Object.values(v)) walk(child);
  };
  walk(node);
  return n;
}

function oneOf(options: GbnfJsonSchema[]): GbnfJsonSchema {
  return options.length === 1 ? options[0] : { oneOf: options };
}

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function isPrimitive(v: unknown): v is string | number | boolean | null {
  return v === null || ['string', 'number', 'boolean'].includes(typeof v);
}
