/**
 * The JSON-schema subset OpenAI function tools use, checked without code generation (generated
 * environments run in a sandbox): type (incl. type arrays), enum, const, nullable, properties,
 * required, additionalProperties, items, anyOf/oneOf/allOf, minimum/maximum (and exclusive),
 * minLength/maxLength, minItems/maxItems, pattern, and local `$ref`s (`#/$defs/…`, as pydantic emits). Other keywords are ignored.
 * Returns the first violation, or undefined.
 */
export type JsonSchema = { [k: string]: unknown };

export function schemaViolation(
  schema: JsonSchema,
  value: unknown,
  path = 'arguments',
  root: JsonSchema = schema,
): string | undefined {
  return violation(schema, value, path, root, { callShape: false, steps: Infinity }, 0);
}

/**
 * A tool call's arguments as the worker checks them outside an untrusted module's sandbox. The
 * same keywords as `schemaViolation` but `pattern` (a regex can backtrack for hours), at most
 * CALL_CHECK_STEPS schema nodes visited and 128 levels deep (alternatives and references multiply
 * the work: a call past them is refused), and an object whose schema names its `properties` takes
 * no other key unless `additionalProperties` allows it, as a Python tool refuses an unexpected
 * keyword, and a schema with no `type` has the one the grammars imply (`implied`). Tools whose schemas use other keywords are refused before any call (`callSchemaFault`).
 */
export function callShapeViolation(schema: JsonSchema, value: unknown, path = 'arguments'): string | undefined {
  return violation(schema, value, path, schema, { callShape: true, steps: CALL_CHECK_STEPS }, 0);
}

/** Schema nodes one call's check may visit (an enum or const counts once per visit, its set built once). */
export const CALL_CHECK_STEPS = 20_000;

/** Keywords `callShapeViolation` enforces. */
const ENFORCED = new Set([
  ...['type', 'enum', 'const', 'nullable', 'properties', 'required', 'additionalProperties', 'items'],
  ...['anyOf', 'oneOf', 'allOf', '$ref', 'minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum'],
  ...['minLength', 'maxLength', 'minItems', 'maxItems'],
]);
/** Keywords that constrain nothing: notes. */
const NOTES = new Set([
  ...['title', 'description', 'default', 'examples', '$defs', 'definitions', '$schema', '$id', '$comment'],
  ...['deprecated', 'readOnly', 'writeOnly'],
]);
/**
 * Keywords the worker cannot check and the policies' grammars read differently, refused: a regex
 * (it can backtrack for hours; xgrammar refuses backreferences and lookbehinds) and a format
 * (validation's grammar writes `date-time` with 3 fraction digits or none, xgrammar with any, and
 * a module paid `.5Z` in training alone, rerun 26).
 */
const UNCHECKED = new Set(['pattern', 'format']);
/**
 * Lengths and item counts a bound may give: xgrammar (the trainer's grammar) reads them as 32-bit
 * integers and refuses a schema past that, so training could not start (rerun 25).
 */
const MAX_COUNT = 2 ** 31 - 1;
/** Schema nodes (enum and const values counted) and levels a tool's parameters may have, as the policy's grammar allows. */
const MAX_SCHEMA_NODES = 20_000;
/**
 * Bytes of one tool's parameters (τ² tools have 1–3 KB): a 3 MB `const` the check compared at every
 * visit blocked the worker for 310 s on one step (rerun 21).
 */
const MAX_SCHEMA_BYTES = 64 * 1024;
/**
 * References the worker, the policy's grammar and the trainer all read alike (rerun 21: `%20` and `~1`
 * were decoded by one of three), with names of at most 128 characters (rerun 72k: a name of 30 000
 * reached 3 249 times cost the LLM server 300 ms a request).
 */
const LOCAL_REF = /^#\/(\$defs|definitions)\/[A-Za-z0-9_.-]{1,128}$/;
const TYPES = new Set(['string', 'number', 'integer', 'boolean', 'null', 'array', 'object']);
const MAX_SCHEMA_DEPTH = 32;
/**
 * Control characters the embedded server's grammar writes raw into an enum, const or property name
 * (it escapes only \t, \n and \r), where JSON forbids them: the base policy could never send that
 * value and a module paid it in training alone (rerun 22).
 */
const UNWRITABLE = /[\u0000-\u0008\u000b\u000c\u000e-\u001f]/;
/**
 * Half a UTF-16 pair, anywhere in a tool's parameters (a description too): the grammar writes it as
 * U+FFFD, and xgrammar cannot compile the schema at all, so training could not start (reruns 23, 24).
 */
const LONE_SURROGATE = /\p{Cs}/u;

function loneSurrogateIn(v: unknown): string | undefined {
  if (typeof v === 'string') return LONE_SURROGATE.test(v) ? v : undefined;
  if (v === null || typeof v !== 'object') return undefined;
  for (const [k, x] of Object.entries(v)) {
    const found = LONE_SURROGATE.test(k) ? k : loneSurrogateIn(x);
    if (found !== undefined) return found;
  }
  return undefined;
}

/**
 * Why a tool's parameters schema is refused, if it is: a keyword the worker's call check does not
 * enforce (`not`, `if`, `patternProperties`, ...: a module put its types under `allOf` when the
 * check skipped it, and paid wrongly typed calls in training only, rerun 20), `pattern`, more than
 * MAX_SCHEMA_NODES nodes or MAX_SCHEMA_DEPTH levels, or what the trainer's grammar cannot compile
 * (`boundsFault`, an empty enum, a `false` subschema, a `$ref` without its definition: rerun 25,
 * cross-checked against xgrammar in test/tool-schemas.test.ts).
 */
export function callSchemaFault(
  schema: JsonSchema,
  path = 'parameters',
  /**
   * What an env's tools have used together, this one added: bytes of enum and const values and
   * property names as inlined (bound: MAX_ENV_LITERAL_CHARS), and nodes as inlined (INLINED_NODES).
   */
  together = { chars: 0, nodes: 0 },
): string | undefined {
  const bytes = Buffer.byteLength(JSON.stringify(schema) ?? '');
  if (bytes > MAX_SCHEMA_BYTES) return `${path}: ${bytes} bytes of schema; at most ${MAX_SCHEMA_BYTES}`;
  const lone = loneSurrogateIn(schema);
  if (lone !== undefined)
    return `${path}: ${JSON.stringify(lone).slice(0, 60)} holds a lone surrogate (half a UTF-16 pair), which the policies' grammars cannot take`;
  let nodes = 0;
  const walk = (node: unknown, at: string, depth: number): string | undefined => {
    if (depth > MAX_SCHEMA_DEPTH) return `${at}: nested more than ${MAX_SCHEMA_DEPTH} levels`;
    // `false` admits nothing: xgrammar refuses a required property with it (additionalProperties: false is no child here).
    if (node === false) return `${at}: the schema false admits no value`;
    if (node === true) return undefined;
    if (node === null || typeof node !== 'object' || Array.isArray(node)) return `${at}: a schema must be an object`;
    const n = node as JsonSchema;
    nodes += 1 + (Array.isArray(n.enum) ? n.enum.length : 0);
    if (nodes > MAX_SCHEMA_NODES) return `${path}: more than ${MAX_SCHEMA_NODES} schema nodes`;
    for (const k of Object.keys(n))
      if (!ENFORCED.has(k) && !NOTES.has(k))
        return `${at}: keyword '${k}' is not supported (the worker checks calls against ${[...ENFORCED].join(', ')})`;
    for (const k of ['title', 'description', '$comment', '$id', '$schema'])
      if (n[k] !== undefined && typeof n[k] !== 'string') return `${at}.${k}: must be a string`;
    for (const k of ['deprecated', 'readOnly', 'writeOnly', 'nullable'])
      if (n[k] !== undefined && typeof n[k] !== 'boolean') return `${at}.${k}: must be true or false`;
    for (const k of UNCHECKED)
      if (n[k] !== undefined)
        return `${at}: keyword '${k}' is not supported (the worker cannot check it and the policies' grammars read it differently); say the expected form in the description`;
    // The worker and validation's grammar read only the target of a $ref; the trainer's merges the siblings over it.
    const beside = Object.keys(n).find((k) => k !== '$ref' && !NOTES.has(k));
    if (n.$ref !== undefined && beside) return `${at}: '${beside}' beside $ref (put it in the definition)`;
    const bounds = boundsFault(n, at);
    if (bounds) return bounds;
    const { optional, read } = optionalProperties(n, schema);
    // What it read counts as nodes: 1 560 unused $refs to a definition of 8 150 required names took
    // the worker 1.1 s at every start and reset (rerun 72j).
    nodes += read;
    if (nodes > MAX_SCHEMA_NODES) return `${path}: more than ${MAX_SCHEMA_NODES} schema nodes`;
    if (optional > MAX_OPTIONAL_PROPERTIES)
      return `${at}: ${optional} optional properties; at most ${MAX_OPTIONAL_PROPERTIES} (validation's grammar writes every subset of up to ${MAX_OPTIONAL_PROPERTIES}, and only none or all of more)`;
    if (n.$ref !== undefined && (typeof n.$ref !== 'string' || !LOCAL_REF.test(n.$ref)))
      return `${at}.$ref: must be '#/$defs/<name>' or '#/definitions/<name>' with a plain name (1–128 letters, digits, _ . -)`;
    if (typeof n.$ref === 'string') {
      const [, defs, name] = n.$ref.split('/');
      if (!isRecord(schema[defs]) || !Object.hasOwn(schema[defs], name))
        return `${at}.$ref: ${n.$ref} has no definition`;
    }
    if (n.required !== undefined && !(Array.isArray(n.required) && n.required.every((r) => typeof r === 'string')))
      return `${at}.required: must be a list of property names`;
    if (n.enum !== undefined && !(Array.isArray(n.enum) && n.enum.length))
      return `${at}.enum: must be a list of at least one value`;
    if (n.const !== undefined && Array.isArray(n.enum) && !enumText({ enum: n.enum }).has(JSON.stringify(n.const)))
      return `${at}: its const is not among its enum, so no value fits`;
    if (n.type !== undefined && !([] as unknown[]).concat(n.type).every((t) => typeof t === 'string' && TYPES.has(t)))
      return `${at}.type: must be one of ${[...TYPES].join(', ')} (or a list of them)`;
    const literal = [
      ...(Array.isArray(n.enum) ? n.enum : []),
      n.const,
      ...(isRecord(n.properties) ? Object.keys(n.properties) : []),
    ].find((v) => typeof v === 'string' && UNWRITABLE.test(v));
    if (literal !== undefined)
      return `${at}: ${JSON.stringify(literal).slice(0, 60)} holds a control character the policy's grammar cannot write`;
    if (n.items !== undefined && (Array.isArray(n.items) || typeof n.items !== 'object'))
      return `${at}.items: must be one schema`;
    if (
      n.additionalProperties !== undefined &&
      typeof n.additionalProperties !== 'boolean' &&
      (typeof n.additionalProperties !== 'object' || n.additionalProperties === null)
    )
      return `${at}.additionalProperties: must be true, false or a schema`;
    const children: [string, unknown][] = [];
    for (const key of ['properties', '$defs', 'definitions'])
      if (n[key] !== undefined) {
        if (typeof n[key] !== 'object' || n[key] === null) return `${at}.${key}: must be an object`;
        for (const [name, sub] of Object.entries(n[key] as object)) children.push([`${at}.${key}.${name}`, sub]);
      }
    for (const key of ['anyOf', 'oneOf', 'allOf'])
      if (n[key] !== undefined) {
        if (!Array.isArray(n[key])) return `${at}.${key}: must be a list of schemas`;
        (n[key] as unknown[]).forEach((sub, i) => children.push([`${at}.${key}[${i}]`, sub]));
      }
    if (n.items !== undefined) children.push([`${at}.items`, n.items]);
    if (typeof n.additionalProperties === 'object')
      children.push([`${at}.additionalProperties`, n.additionalProperties]);
    for (const [where, sub] of children) {
      const bad = walk(sub, where, depth + 1);
      if (bad) return bad;
    }
    return undefined;
  };
  return walk(schema, path, 0) ?? inlineFault(schema, path, together);
}

/** What the trainer's grammar inlines a tool's parameters to at most (trace_trainer/grammar.py MAX_SCHEMA_NODES, MAX_SCHEMA_DEPTH). */
const INLINED_NODES = 20_000;
const INLINED_DEPTH = 100;
/** Characters of names and strings it inlines to at most (MAX_SCHEMA_CHARS): 16 times the 64 KiB a tool's parameters may have. */
const INLINED_CHARS = 1 << 20;
/**
 * Bytes of enum and const values and property names (each as JSON, in UTF-8), as inlined, a tool's
 * parameters may have, and an env's tools together: xgrammar compiles alternatives of long literals in time
 * growing with their length squared (rerun 43b: two members of 30 000 characters, 136 s of the
 * trainer's CPU for one tool; a country list is ~3 000).
 */
const MAX_LITERAL_CHARS = 4096;
export const MAX_ENV_LITERAL_CHARS = 16_384;
/** Keywords whose values are data, not schemas (the trainer copies them as they are). */
const DATA = new Set(['enum', 'const', 'default', 'examples']);

/**
 * Why the trainer's grammar would refuse to inline a schema's `$ref`s, if it would: the same walk
 * as trace_trainer/grammar.py `_inline_refs` (every object and list counted, definitions expanded
 * where referenced), so a schema validation accepts is one training can start on: a recursive
 * `$ref` and a fan-out of 2^12 through 1 KB both passed validation and stopped training (rerun 26).
 */
function inlineFault(root: JsonSchema, path: string, together: { chars: number; nodes: number }): string | undefined {
  // One budget for an env's tools, as the LLM server's grammar of them all has: 256 tools, each
  // just under it, cost the worker 1–2 s at every start and reset (rerun 72i).
  let budget = INLINED_NODES - together.nodes;
  let chars = INLINED_CHARS;
  let own = 0;
  const tooMany = `${path}: expands to more than ${INLINED_NODES} schema nodes through $refs${together.nodes ? ' together with the tools before it' : ''}`;
  const tooLong = `${path}: expands to more than ${INLINED_CHARS} characters of names and strings through $refs`;
  // Every value counts, a name in `required` or a member of an enum too: a definition holding
  // 14 000 names reached 4 900 times through $refs passed and took the worker 23 s (rerun 41b);
  // and every character of a string or a key: 60 000 one-character members reached 3 600 times
  // were 206 MiB in the trainer (rerun 42b).
  const charge = (v: unknown): string | undefined => {
    if (--budget < 0) return tooMany;
    if (typeof v === 'string') chars -= v.length;
    else if (v !== null && typeof v === 'object' && !Array.isArray(v))
      for (const k of Object.keys(v)) chars -= k.length;
    return chars < 0 ? tooLong : undefined;
  };
  const data = (value: unknown): string | undefined => {
    const stack = [value];
    while (stack.length) {
      const v = stack.pop();
      const bad = charge(v);
      if (bad) return bad;
      if (v !== null && typeof v === 'object') stack.push(...Object.values(v));
    }
    return undefined;
  };
  const walk = (node: unknown, seen: string[], depth: number, keyword: boolean): string | undefined => {
    const bad = charge(node);
    if (bad) return bad;
    if (node === null || typeof node !== 'object') return undefined;
    if (depth > INLINED_DEPTH) return `${path}: nests deeper than ${INLINED_DEPTH} levels through $refs`;
    if (keyword && !Array.isArray(node))
      for (const [k, v] of Object.entries(node as JsonSchema)) {
        const bad = DATA.has(k) ? data(v) : undefined;
        if (bad) return bad;
        // Each member as the grammar writes it, in UTF-8 bytes: an object member was not counted,
        // and xgrammar's cost goes by bytes (rerun 44b: 118 s for two object members; CJK 9×).
        // Property names are literals too, counted as their bytes (the node count bounds how many):
        // 8 optional names of 7 000 characters in 12 tools took the trainer's grammar 23.6 s, and
        // validation's, which writes each in 128 subsets, 87 MB (rerun 47b).
        const names = k === 'properties' && isRecord(v);
        const members = k === 'enum' && Array.isArray(v) ? v : k === 'const' ? [v] : names ? Object.keys(v) : [];
        for (const m of members) {
          const json = names ? (m as string) : (JSON.stringify(m) ?? '');
          // DEL is one byte here and six in xgrammar's grammar ("\u007f"): 46 times the cost (rerun 45b).
          const bytes = Buffer.byteLength(json) + 5 * (json.match(/\x7f/g)?.length ?? 0);
          own += bytes;
          together.chars += bytes;
        }
        if (own > MAX_LITERAL_CHARS)
          return `${path}: its enum and const values and property names come to more than ${MAX_LITERAL_CHARS} bytes through $refs (the trainer's grammar compiles long ones slowly)`;
      }
    const children: [unknown, boolean][] = Array.isArray(node)
      ? node.map((v) => [v, true])
      : Object.entries(node as JsonSchema)
          .filter(([k]) => !(keyword && (k === '$defs' || k === 'definitions' || DATA.has(k) || k === '$ref')))
          .map(([k, v]) => [v, !(keyword && k === 'properties')]);
    // Every $ref here is a local one with a definition: the walk before this checked each.
    const ref = keyword && !Array.isArray(node) ? (node as JsonSchema).$ref : undefined;
    if (typeof ref === 'string') {
      if (seen.includes(ref)) return `${path}: $ref ${ref} is recursive, which the trainer's grammar cannot inline`;
      const [, container, name] = ref.split('/');
      const defs = root[container];
      const target = isRecord(defs) && Object.hasOwn(defs, name) ? defs[name] : undefined;
      if (target === undefined) return `${path}: $ref ${ref} has no definition`;
      const bad = walk(target === true ? {} : target, [...seen, ref], depth + 1, true);
      // The siblings are one more object in the trainer's walk.
      if (bad) return bad;
      const siblings = charge(Object.fromEntries(Object.entries(node).filter(([k]) => k !== '$ref')));
      if (siblings) return siblings;
      return children.reduce<string | undefined>((f, [v, k]) => f ?? walk(v, seen, depth + 2, k), undefined);
    }
    return children.reduce<string | undefined>((f, [v, k]) => f ?? walk(v, seen, depth + 1, k), undefined);
  };
  const bad = walk(root, [], 0, true);
  together.nodes = INLINED_NODES - budget;
  return bad;
}

/**
 * Optional properties one object may have: validation's grammar writes every subset of up to this
 * many (MAX_OPTIONAL_SUBSET in infra/llm/json-schema-grammar.ts) and only none or all of more,
 * while the trainer's writes any subset: a module could pay a subset in training alone.
 */
export const MAX_OPTIONAL_PROPERTIES = 8;

/**
 * Properties of an object not in its `required`, its `allOf` parts merged as the grammar merges them;
 * and how many names it read, its `$ref`s resolved.
 */
function optionalProperties(n: JsonSchema, root: JsonSchema): { optional: number; read: number } {
  const names = new Set<string>();
  const required = new Set<string>();
  const parts = [n, ...(Array.isArray(n.allOf) ? n.allOf : [])].map((p) =>
    isRecord(p) && typeof p.$ref === 'string' ? (root[p.$ref.split('/')[1]] as JsonSchema)?.[p.$ref.split('/')[2]] : p,
  );
  let read = 0;
  // Each part once: 1 600 $refs to one 4 000-property definition fit in 64 KiB.
  for (const p of new Set(parts)) {
    if (!isRecord(p)) continue;
    if (isRecord(p.properties)) for (const k of Object.keys(p.properties)) (names.add(k), read++);
    if (Array.isArray(p.required)) for (const r of p.required) (required.add(String(r)), read++);
  }
  let optional = 0;
  for (const k of names) if (!required.has(k)) optional++;
  return { optional, read };
}

const NUMERIC_BOUNDS = ['minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum'] as const;

/**
 * Why a node's bounds are refused, if they are: bounds no value meets (minimum above maximum,
 * minLength above maxLength, ...), a fractional or unsafe bound on an integer, a length or count
 * that is not a whole number up to MAX_COUNT. Each of these the worker took and xgrammar cannot
 * compile, so an env validation accepted could not be trained in the action format (rerun 25).
 */
function boundsFault(n: JsonSchema, at: string): string | undefined {
  for (const k of NUMERIC_BOUNDS)
    if (n[k] !== undefined && typeof n[k] !== 'number') return `${at}.${k}: must be a number`;
  for (const k of ['minLength', 'maxLength', 'minItems', 'maxItems'])
    if (n[k] !== undefined && !(Number.isInteger(n[k]) && (n[k] as number) >= 0 && (n[k] as number) <= MAX_COUNT))
      return `${at}.${k}: must be a whole number from 0 to ${MAX_COUNT}`;
  for (const [lo, hi] of [
    ['minLength', 'maxLength'],
    ['minItems', 'maxItems'],
  ])
    if ((n[lo] as number) > (n[hi] as number)) return `${at}: ${lo} ${n[lo]} is above ${hi} ${n[hi]}, so no value fits`;
  // xgrammar reads an array without `items` as one that takes no items.
  if ((n.minItems as number) > 0 && n.items === undefined)
    return `${at}: minItems needs items (the schema of each item)`;
  const { minimum: min, maximum: max, exclusiveMinimum: xmin, exclusiveMaximum: xmax } = n as Record<string, number>;
  if (([] as unknown[]).concat(n.type).includes('integer')) {
    for (const k of NUMERIC_BOUNDS)
      if (n[k] !== undefined && !Number.isSafeInteger(n[k]))
        return `${at}.${k}: an integer's bound must be a whole number within ±(2^53 − 1)`;
    const lo = Math.max(min ?? -Infinity, (xmin ?? -Infinity) + 1);
    const hi = Math.min(max ?? Infinity, (xmax ?? Infinity) - 1);
    if (lo > hi) return `${at}: no integer lies within its bounds`;
  } else if (min > max || xmin >= max || min >= xmax || xmin >= xmax) return `${at}: no number lies within its bounds`;
  return undefined;
}

/**
 * Distinct string length bounds (minLength, maxLength) an env's tools may use: the trainer's
 * grammar compiles each apart, ~0.7 s apiece (rerun 25: 300 of them held training's start-up for
 * 337 s); equal bounds are compiled once.
 */
export const MAX_LENGTH_BOUNDS = 8;

/** The distinct string length bounds in a schema, added to `out` as `min..max`. */
export function lengthBounds(node: unknown, out: Set<string>): Set<string> {
  if (node === null || typeof node !== 'object') return out;
  const n = node as JsonSchema;
  if (!Array.isArray(n) && (typeof n.minLength === 'number' || typeof n.maxLength === 'number'))
    out.add(`${n.minLength ?? 0}..${n.maxLength ?? ''}`);
  for (const v of Object.values(n)) lengthBounds(v, out);
  return out;
}

/** Each enum's members (or its const) as JSON text, built once per schema node. */
const enumTexts = new WeakMap<JsonSchema, Set<string>>();

function enumText(schema: JsonSchema): Set<string> {
  let set = enumTexts.get(schema);
  if (!set) {
    const members = schema.const !== undefined ? [schema.const] : (schema.enum as unknown[]);
    const texts = members.map((e) => JSON.stringify(e));
    // A node with both: the value must be the const and one of the members.
    set = new Set(
      schema.const !== undefined &&
        Array.isArray(schema.enum) &&
        !schema.enum.some((e) => JSON.stringify(e) === texts[0])
        ? []
        : texts,
    );
    enumTexts.set(schema, set);
  }
  return set;
}

function violation(
  schema: JsonSchema,
  value: unknown,
  path: string,
  root: JsonSchema,
  check: { callShape: boolean; steps: number },
  depth: number,
): string | undefined {
  const sub = (s: JsonSchema, v: unknown, p: string) => violation(s, v, p, root, check, depth + 1);
  if (check.callShape) {
    if (--check.steps < 0) return `${path}: too costly to check (more than ${CALL_CHECK_STEPS} schema steps)`;
    if (depth > 128) return `${path}: nested more than 128 levels in the schema`;
  }
  if (typeof schema.$ref === 'string') {
    const target = schema.$ref.startsWith('#/')
      ? schema.$ref
          .slice(2)
          .split('/')
          .reduce<unknown>((node, k) => (node as JsonSchema | undefined)?.[k], root)
      : undefined;
    if (!target || typeof target !== 'object') return `${path}: schema reference ${schema.$ref} cannot be resolved`;
    return sub(target as JsonSchema, value, path);
  }
  if (schema.nullable === true && value === null) return undefined;
  for (const s of Array.isArray(schema.allOf) ? (schema.allOf as JsonSchema[]) : []) {
    const bad = sub(s, value, path);
    if (bad) return bad;
  }
  if (schema.const !== undefined || Array.isArray(schema.enum)) {
    const text = JSON.stringify(value) ?? '';
    // Each stringified KiB of the value costs a step: 20 000 visits of a 64 KiB value took seconds (rerun 21).
    check.steps -= text.length >> 10;
    const allowed = enumText(schema);
    if (!allowed.has(text)) {
      const shown: string[] = [];
      for (const t of allowed) if (shown.push(t.slice(0, 60)) === 5) break;
      return `${path} must be ${schema.const !== undefined ? shown[0] : `one of ${shown.join(', ')}${allowed.size > 5 ? ', ...' : ''}`}`;
    }
  }
  for (const key of ['anyOf', 'oneOf'] as const) {
    const alts = schema[key];
    if (Array.isArray(alts) && !alts.some((s) => sub(s as JsonSchema, value, path) === undefined))
      return `${path} matches none of the allowed shapes`;
  }
  const types =
    schema.type !== undefined ? ([] as unknown[]).concat(schema.type) : check.callShape ? implied(schema) : undefined;
  // In a call, an integer past ±(2^53 − 1): the grammar writes at most 16 digits before an exponent,
  // so the base policy cannot send 12345678901234568, which a module paid in training alone (rerun 22).
  // Each type past the first costs a step: a list of them reached through $refs is walked at each visit, as `required` was (rerun 41b).
  if (types && types.length > 1 && (check.steps -= types.length - 1) < 0)
    return `${path}: too costly to check (more than ${CALL_CHECK_STEPS} schema steps)`;
  const typeOf = (t: unknown) => (check.callShape && t === 'integer' ? 'callInteger' : String(t));
  if (types && !types.some((t) => hasType(value, typeOf(t))))
    return Number.isInteger(value) && types.includes('integer')
      ? `${path} must be an integer within ±(2^53 − 1)`
      : `${path} must be ${types.join(' or ')}, got ${typeName(value)}`;

  if (typeof value === 'number') {
    if (typeof schema.minimum === 'number' && value < schema.minimum) return `${path} must be ≥ ${schema.minimum}`;
    if (typeof schema.maximum === 'number' && value > schema.maximum) return `${path} must be ≤ ${schema.maximum}`;
    if (typeof schema.exclusiveMinimum === 'number' && value <= schema.exclusiveMinimum)
      return `${path} must be > ${schema.exclusiveMinimum}`;
    if (typeof schema.exclusiveMaximum === 'number' && value >= schema.exclusiveMaximum)
      return `${path} must be < ${schema.exclusiveMaximum}`;
  }
  if (typeof value === 'string' && (schema.minLength !== undefined || schema.maxLength !== undefined)) {
    // Each KiB counted costs a step: an allOf of 19 000 parts counted a 64 KiB string 19 000 times (rerun 23).
    check.steps -= value.length >> 10;
    const length = codePoints(value);
    if (typeof schema.minLength === 'number' && length < schema.minLength)
      return `${path} must have ≥ ${schema.minLength} characters`;
    if (typeof schema.maxLength === 'number' && length > schema.maxLength)
      return `${path} must have ≤ ${schema.maxLength} characters`;
  }
  if (!check.callShape && typeof value === 'string' && typeof schema.pattern === 'string')
    if (!new RegExp(schema.pattern).test(value)) return `${path} must match /${schema.pattern}/`;
  if (Array.isArray(value)) {
    if (typeof schema.minItems === 'number' && value.length < schema.minItems)
      return `${path} must have ≥ ${schema.minItems} items`;
    if (typeof schema.maxItems === 'number' && value.length > schema.maxItems)
      return `${path} must have ≤ ${schema.maxItems} items`;
    if (schema.items && typeof schema.items === 'object') {
      for (let i = 0; i < value.length; i++) {
        const v = sub(schema.items as JsonSchema, value[i], `${path}[${i}]`);
        if (v) return v;
      }
    }
  }
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
    const obj = value as Record<string, unknown>;
    // Each key walked costs a step: an allOf of 19 000 empty parts walked an 8 190-key value at each
    // part, 50.8 s of the worker's loop for one call (rerun 22).
    check.steps -= Object.keys(obj).length;
    if (check.steps < 0) return `${path}: too costly to check (more than ${CALL_CHECK_STEPS} schema steps)`;
    const props = (schema.properties ?? {}) as Record<string, JsonSchema>;
    const required = (schema.required ?? []) as string[];
    // Each name looked for costs a step: a list of 14 000 reached 4 900 times took 1.5 s per call (rerun 41b).
    check.steps -= required.length;
    if (check.steps < 0) return `${path}: too costly to check (more than ${CALL_CHECK_STEPS} schema steps)`;
    for (const r of required) if (!Object.hasOwn(obj, r)) return `${path}.${r} is required`;
    for (const [k, v] of Object.entries(obj)) {
      if (Object.hasOwn(props, k)) {
        const bad = sub(props[k], v, `${path}.${k}`);
        if (bad) return bad;
      } else if (
        schema.additionalProperties === false ||
        (check.callShape && schema.properties !== undefined && !schema.additionalProperties)
      ) {
        return `${path}.${k} is not an allowed property`;
      } else if (schema.additionalProperties && typeof schema.additionalProperties === 'object') {
        const bad = sub(schema.additionalProperties as JsonSchema, v, `${path}.${k}`);
        if (bad) return bad;
      }
    }
  }
  return undefined;
}

/**
 * The type a schema without one stands for in the policies' grammars: object where it lists
 * properties, array where it gives items. Read as "any value", a module paid a string where
 * validation's grammar could only write an object, in training alone.
 */
function implied(schema: JsonSchema): string[] | undefined {
  if (schema.properties !== undefined || schema.additionalProperties !== undefined) return ['object'];
  if (schema.items !== undefined) return ['array'];
  return undefined;
}

/** A string's length as JSON Schema counts it: in code points (an emoji is one, not two UTF-16 units). */
function codePoints(s: string): number {
  let n = s.length;
  for (let i = 0; i < s.length - 1; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        n--;
        i++;
      }
    }
  }
  return n;
}

function hasType(v: unknown, t: string): boolean {
  switch (t) {
    case 'string':
      return typeof v === 'string';
    case 'number':
      return typeof v === 'number' && Number.isFinite(v);
    case 'integer':
      return Number.isInteger(v);
    case 'callInteger':
      return Number.isSafeInteger(v);
    case 'boolean':
      return typeof v === 'boolean';
    case 'null':
      return v === null;
    case 'array':
      return Array.isArray(v);
    case 'object':
      return v !== null && typeof v === 'object' && !Array.isArray(v);
    default:
      return true;
  }
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function typeName(v: unknown): string {
  return v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v;
}
