import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { execa } from 'execa';
import { PROJECT_ROOT } from '../infra/temporal.js';
import {
  callSchemaFault,
  lengthBounds,
  MAX_LENGTH_BOUNDS,
  MAX_OPTIONAL_PROPERTIES,
  type JsonSchema,
} from '../envs/sdk/schema.js';
import { MAX_OPTIONAL_SUBSET } from '../infra/llm/json-schema-grammar.js';
import { toolsFault } from '../envs/sandbox/index.js';
import { openEnvironment } from '../envs/registry.js';
import { parseConfig } from '../core/config.js';

/**
 * Every tool schema the worker accepts from a generated env must compile in the trainer's grammar
 * (xgrammar, trace_trainer/grammar.py), or validation passes an env training cannot start on
 * (reruns 24, 25). Bounds, lengths and types at their edges, alone and under anyOf/allOf.
 */
const prop = (s: JsonSchema): JsonSchema => ({ type: 'object', properties: { x: s }, required: ['x'] });
const EDGES: JsonSchema[] = [
  ...[0.5, 2.5, -0.5, 1e300, -1e300, 2 ** 53, 2 ** 63, -(2 ** 63), 2 ** 53 - 1].flatMap((v) =>
    ['minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum'].flatMap((k) => [
      { type: 'integer', [k]: v },
      { type: 'number', [k]: v },
      { type: ['integer', 'null'], [k]: v },
      { [k]: v },
    ]),
  ),
  ...[
    [3, 2],
    [2, 2],
    [2, 3],
    [-1, 5],
  ].flatMap(([lo, hi]) => [
    { type: 'integer', minimum: lo, maximum: hi },
    { type: 'integer', exclusiveMinimum: lo, exclusiveMaximum: hi },
    { type: 'integer', exclusiveMinimum: lo, maximum: hi },
    { type: 'number', minimum: lo, maximum: hi },
    { type: 'number', exclusiveMinimum: lo, maximum: hi },
    { type: 'number', exclusiveMinimum: lo, exclusiveMaximum: hi },
    { type: 'string', minLength: lo, maxLength: hi },
    { type: 'array', minItems: lo, maxItems: hi },
  ]),
  ...[-1, 0, 1.5, 2 ** 31 - 1, 2 ** 31, 1e21].flatMap((v) =>
    ['minLength', 'maxLength', 'minItems', 'maxItems'].map((k) => ({
      type: k.endsWith('Items') ? 'array' : 'string',
      [k]: v,
    })),
  ),
  ...['^(a)\\1$', '(?<=a)b', '\\bword', '\\p{L}', '^[a-z]+$'].map((pattern) => ({ type: 'string', pattern })),
  ...['email', 'date-time', 'uuid', 'bogus'].map((format) => ({ type: 'string', format })),
  { type: 'integer', anyOf: [{ minimum: 0.5 }] },
  { type: 'integer', allOf: [{ minimum: 3 }, { maximum: 2 }] },
  { anyOf: [{ type: 'integer', minimum: 0.5 }, { type: 'string' }] },
  { type: 'object', properties: { n: { $ref: '#/$defs/n' } }, $defs: { n: { type: 'integer', maximum: 1e300 } } },
  { type: 'array', items: { type: 'integer', exclusiveMaximum: 0.5 } },
  { type: 'string', enum: ['a', 'b'], maxLength: 0 },
  { type: 'string', enum: [1, 2] },
  { type: 'string', const: 'abc', maxLength: 1 },
  { const: { a: [1, 'b'] } },
  { enum: [] },
  { anyOf: [] },
  { allOf: [] },
  { oneOf: [{ type: 'string' }, { type: 'string' }] },
  { type: [] },
  { type: 'object', required: ['a'] },
  { type: 'object', properties: {}, required: ['a'], additionalProperties: true },
  { type: 'object', properties: { a: { type: 'string' } }, required: ['a', 'a'] },
  { type: 'object', properties: { a: false }, required: ['a'] },
  { type: 'object', additionalProperties: { type: 'integer', minimum: 1 } },
  { type: 'array', items: false, minItems: 1 },
  { type: 'array', items: true, minItems: 1 },
  { type: 'array', items: { type: 'integer' }, minItems: 3 },
  { type: 'null', minimum: 1 },
  { nullable: true, type: 'integer', minimum: 1 },
  { type: 'boolean', enum: [true], const: false },
  { $ref: '#/$defs/missing' },
  // Rerun 26: what the trainer's $ref inlining refused or read differently.
  { type: 'string', format: 'date-time' },
  {
    type: 'object',
    properties: { definitions: { type: 'string' }, $defs: { type: 'string' } },
    required: ['definitions'],
  },
  { type: 'object', properties: { a: { $ref: '#/$defs/a', enum: ['x'] } }, $defs: { a: { type: 'string' } } },
  { type: 'object', properties: { a: { $ref: '#/$defs/a', description: 'a note' } }, $defs: { a: { type: 'string' } } },
  { type: 'object', properties: { a: { $ref: '#/$defs/any' } }, $defs: { any: true } },
  {
    type: 'object',
    properties: { a: { $ref: '#/$defs/n' } },
    $defs: { n: { type: 'object', properties: { next: { $ref: '#/$defs/n' } } } },
  },
  { type: 'object', properties: { a: { enum: Array.from({ length: 10_000 }, (_, i) => [[i]]) } } },
  { type: 'object', title: { $ref: '#/$defs/x' } },
  fanOut(11),
  fanOut(12),
];

/** 2^levels leaves through about 60 bytes a level: each definition refers twice to the one below. */
function fanOut(levels: number): JsonSchema {
  const $defs: JsonSchema = { d0: { type: 'string' } };
  for (let i = 1; i <= levels; i++)
    $defs[`d${i}`] = {
      type: 'object',
      properties: { a: { $ref: `#/$defs/d${i - 1}` }, b: { $ref: `#/$defs/d${i - 1}` } },
    };
  return { $ref: `#/$defs/d${levels}`, $defs };
}

/** The built-in targets' tools: a generated env keeps its target's tool interface, so each must be one it may declare. */
async function targetTools() {
  const out = [];
  for (const name of ['toy-orders', 'showcase-desk', 'toolsandbox', 'tau2-airline', 'tau2-retail', 'tau2-mock']) {
    const config = parseConfig({ env: { name } });
    const env = await openEnvironment(config.env, { config });
    out.push({ name, tools: env.tools() });
    await env.close?.();
  }
  return out;
}

test("schema: every built-in target's tools are ones a generated env may declare", async () => {
  for (const { name, tools } of await targetTools()) assert.equal(toolsFault(tools), undefined, name);
});

test('schema: every tool schema the worker accepts compiles in the trainer grammar (xgrammar), edges included', async () => {
  const accepted = EDGES.map(prop).filter((s) => !callSchemaFault(s));
  assert.ok(accepted.length >= 40 && accepted.length < EDGES.length, `${accepted.length} of ${EDGES.length} accepted`);
  const tools = [
    ...accepted.map((parameters, i) => ({ type: 'function', function: { name: `t${i}`, parameters } })),
    ...(await targetTools()).flatMap((t) => t.tools),
  ];
  const script = `
import json, sys
import xgrammar as xgr
from trace_trainer.grammar import action_schema
for tool in json.load(sys.stdin):
    try:
        xgr.Grammar.from_json_schema(json.dumps(action_schema([tool])), any_whitespace=True)
    except Exception as e:
        print(json.dumps(tool["function"]["parameters"]), str(e).splitlines()[0][:160])
`;
  const r = await execa(path.join(PROJECT_ROOT, '.venv', 'bin', 'python'), ['-c', script], {
    cwd: path.join(PROJECT_ROOT, 'trainer'),
    input: JSON.stringify(tools),
    reject: false,
  });
  assert.equal(r.exitCode, 0, r.stderr.slice(-2000));
  assert.equal(r.stdout.trim(), '', `accepted by the worker, refused by xgrammar:\n${r.stdout}`);
});

test("schema: the worker's count of a tool's $ref expansion is the trainer's (rerun 26: 2^12 leaves passed validation and stopped training)", async () => {
  // Enum members are data, not schemas, but each value in them counts (rerun 41b), and their bytes (rerun 44b).
  const cases = [fanOut(11), fanOut(12), prop({ enum: Array.from({ length: 500 }, () => [[0]]) })];
  const worker = cases.map((s) => callSchemaFault(s) === undefined);
  const script = `
import json, sys
from trace_trainer.grammar import _parameters
out = []
for p in json.load(sys.stdin):
    try:
        _parameters({"function": {"name": "t", "parameters": p}})
        out.append(True)
    except ValueError:
        out.append(False)
print(json.dumps(out))
`;
  const r = await execa(path.join(PROJECT_ROOT, '.venv', 'bin', 'python'), ['-c', script], {
    cwd: path.join(PROJECT_ROOT, 'trainer'),
    input: JSON.stringify(cases),
  });
  assert.deepEqual(worker, JSON.parse(r.stdout));
  assert.deepEqual(worker, [true, false, true]);
});

test("schema: an object's optional properties are limited to what validation's grammar writes every subset of", () => {
  assert.equal(MAX_OPTIONAL_PROPERTIES, MAX_OPTIONAL_SUBSET);
  const props = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`p${i}`, { type: 'string' }]));
  assert.equal(callSchemaFault({ type: 'object', properties: props(8) }), undefined);
  assert.equal(callSchemaFault({ type: 'object', properties: props(9), required: ['p0'] }), undefined);
  assert.match(callSchemaFault({ type: 'object', properties: props(9) }) ?? '', /9 optional properties; at most 8/);
  // Merged as the grammar merges allOf (a $ref'd part too).
  const split = {
    type: 'object',
    properties: { a: {}, b: {}, c: {}, d: {}, e: {} },
    allOf: [{ $ref: '#/$defs/more' }],
    $defs: { more: { type: 'object', properties: { f: {}, g: {}, h: {}, i: {} } } },
  };
  assert.match(callSchemaFault(split) ?? '', /parameters: 9 optional properties/);
});

test('schema: string length bounds are counted once per distinct (minLength, maxLength)', () => {
  const same = { type: 'string', maxLength: 1000 };
  const bounds = lengthBounds(
    prop({ anyOf: [same, same, { type: 'string', minLength: 2 }, { type: 'string', minLength: 2, maxLength: 1000 }] }),
    new Set(),
  );
  assert.deepEqual([...bounds].sort(), ['0..1000', '2..', '2..1000']);
  assert.ok(MAX_LENGTH_BOUNDS >= 3);
});
