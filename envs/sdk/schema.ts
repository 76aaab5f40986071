/**
 * The JSON-schema subset OpenAI function tools use, checked without code generation (generated
 * environments run in a sandbox): type (incl. type arrays), enum, const, properties, required,
 * additionalProperties, items, anyOf/oneOf, minimum/maximum, minLength/maxLength, minItems/maxItems,
 * pattern, and local `$ref`s (`#/$defs/…`, as pydantic emits). Other keywords are ignored.
 * Returns the first violation, or undefined.
 */
export type JsonSchema = { [k: string]: unknown };

export function schemaViolation(
  schema: JsonSchema,
  value: unknown,
  path = 'arguments',
  root: JsonSchema = schema,
): string | undefined {
  return violation(schema, value, path, root, false);
}

/**
 * A tool call's arguments as the worker checks them outside an untrusted module's sandbox, in time
 * linear in the value: no `pattern` (a regex can backtrack for hours), and a node with `anyOf` or
 * `oneOf` takes any value (alternatives multiply the work); local `$ref`s are followed, at most 32
 * in a row. An object whose schema names its `properties` takes no other key unless
 * `additionalProperties` allows it, as a Python tool refuses an unexpected keyword.
 */
export function callShapeViolation(schema: JsonSchema, value: unknown, path = 'arguments'): string | undefined {
  return violation(schema, value, path, schema, true);
}

function violation(
  schema: JsonSchema,
  value: unknown,
  path: string,
  root: JsonSchema,
  callShape: boolean,
  refHops = 0,
): string | undefined {
  const sub = (s: JsonSchema, v: unknown, p: string) => violation(s, v, p, root, callShape);
  if (typeof schema.$ref === 'string') {
    const target = schema.$ref.startsWith('#/')
      ? schema.$ref
          .slice(2)
          .split('/')
          .reduce<unknown>((node, k) => (node as JsonSchema | undefined)?.[k], root)
      : undefined;
    if (!target || typeof target !== 'object') return `${path}: schema reference ${schema.$ref} cannot be resolved`;
    if (callShape && refHops >= 32) return `${path}: schema references chain more than 32 deep`;
    return violation(target as JsonSchema, value, path, root, callShape, refHops + 1);
  }
  if (callShape && (Array.isArray(schema.anyOf) || Array.isArray(schema.oneOf))) return undefined;
  if (schema.const !== undefined && JSON.stringify(schema.const) !== JSON.stringify(value))
    return `${path} must be ${JSON.stringify(schema.const)}`;
  if (Array.isArray(schema.enum) && !schema.enum.some((e) => JSON.stringify(e) === JSON.stringify(value))) {
    return `${path} must be one of ${schema.enum.map((e) => JSON.stringify(e)).join(', ')}`;
  }
  for (const key of ['anyOf', 'oneOf'] as const) {
    const alts = schema[key];
    if (Array.isArray(alts) && !alts.some((s) => sub(s as JsonSchema, value, path) === undefined))
      return `${path} matches none of the allowed shapes`;
  }
  const types = schema.type === undefined ? undefined : ([] as unknown[]).concat(schema.type);
  if (types && !types.some((t) => hasType(value, String(t))))
    return `${path} must be ${types.join(' or ')}, got ${typeName(value)}`;

  if (typeof value === 'number') {
    if (typeof schema.minimum === 'number' && value < schema.minimum) return `${path} must be ≥ ${schema.minimum}`;
    if (typeof schema.maximum === 'number' && value > schema.maximum) return `${path} must be ≤ ${schema.maximum}`;
  }
  if (typeof value === 'string') {
    if (typeof schema.minLength === 'number' && value.length < schema.minLength)
      return `${path} must have ≥ ${schema.minLength} characters`;
    if (typeof schema.maxLength === 'number' && value.length > schema.maxLength)
      return `${path} must have ≤ ${schema.maxLength} characters`;
    if (!callShape && typeof schema.pattern === 'string' && !new RegExp(schema.pattern).test(value))
      return `${path} must match /${schema.pattern}/`;
  }
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
    const props = (schema.properties ?? {}) as Record<string, JsonSchema>;
    for (const r of (schema.required ?? []) as string[]) if (!Object.hasOwn(obj, r)) return `${path}.${r} is required`;
    for (const [k, v] of Object.entries(obj)) {
      if (Object.hasOwn(props, k)) {
        const bad = sub(props[k], v, `${path}.${k}`);
        if (bad) return bad;
      } else if (
        schema.additionalProperties === false ||
        (callShape && schema.properties !== undefined && !schema.additionalProperties)
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

function hasType(v: unknown, t: string): boolean {
  switch (t) {
    case 'string':
      return typeof v === 'string';
    case 'number':
      return typeof v === 'number' && Number.isFinite(v);
    case 'integer':
      return Number.isInteger(v);
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

function typeName(v: unknown): string {
  return v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v;
}
