import assert from 'node:assert/strict';
import { test } from 'node:test';
import { z } from 'zod';
import { buildChatPrompt, parseAction } from '../infra/llm/chat-prompt.js';
import { BadRequestError, parseChatRequest } from '../infra/llm/chat-request.js';
import {
  jsonSchemasToGrammarSchemas,
  jsonSchemaToGrammarSchema,
  MAX_OPTIONAL_SUBSET,
  SchemaConversionError,
} from '../infra/llm/json-schema-grammar.js';

/** Pure parts of the LLM server: JSON Schema → grammar schema, request validation, prompt building. */

test('optional properties become a choice between required-only and all properties', () => {
  const g = jsonSchemaToGrammarSchema(z.toJSONSchema(z.object({ a: z.string(), b: z.number().optional() })));
  assert.deepEqual(g, {
    oneOf: [
      { type: 'object', properties: { a: { type: 'string' } }, additionalProperties: false },
      { type: 'object', properties: { a: { type: 'string' }, b: { type: 'number' } }, additionalProperties: false },
    ],
  });
});

test('every subset of the optional properties can be written, in declared order, up to MAX_OPTIONAL_SUBSET of them', () => {
  // The worker lets a generated env see any subset: one the base policy could not write would be paid in training only.
  const g = jsonSchemaToGrammarSchema({
    type: 'object',
    properties: { a: { type: 'string' }, b: { type: 'number' }, c: { type: 'boolean' } },
    required: ['a'],
  });
  assert.ok('oneOf' in g);
  assert.deepEqual(
    g.oneOf.map((o) => ('properties' in o ? Object.keys(o.properties ?? {}).join(',') : '?')),
    ['a', 'a,b', 'a,c', 'a,b,c'],
  );
  const many = Object.fromEntries(
    Array.from({ length: MAX_OPTIONAL_SUBSET + 1 }, (_, i) => [`p${i}`, { type: 'string' }]),
  );
  const wide = jsonSchemaToGrammarSchema({ type: 'object', properties: many });
  assert.equal('oneOf' in wide && wide.oneOf.length, 2, 'past the limit: none or all');
});

test('nullable, anyOf, enums, records and $refs map onto the grammar subset', () => {
  const Node = z.object({
    id: z.string().max(8),
    kind: z.enum(['x', 'y']),
    n: z.number().int().nullable(),
    tags: z.record(z.string(), z.boolean()),
  });
  const g = jsonSchemaToGrammarSchema({
    type: 'object',
    properties: {
      node: { $ref: '#/$defs/Node' },
      when: { type: 'string', format: 'date-time' },
      email: { type: 'string', format: 'email' },
    },
    required: ['node', 'when', 'email'],
    $defs: { Node: z.toJSONSchema(Node) },
  });
  assert.deepEqual(g, {
    type: 'object',
    properties: {
      node: {
        type: 'object',
        properties: {
          id: { type: 'string', maxLength: 8 },
          kind: { enum: ['x', 'y'] },
          n: { oneOf: [{ type: 'integer' }, { type: 'null' }] },
          tags: { type: 'object', properties: {}, additionalProperties: { type: 'boolean' } },
        },
        additionalProperties: false,
      },
      when: { type: 'string', format: 'date-time' },
      email: { type: 'string' },
    },
    additionalProperties: false,
  });
});

test('a recursive $ref becomes "any value" instead of recursing forever', () => {
  const g = jsonSchemaToGrammarSchema({
    $defs: { T: { type: 'object', properties: { child: { $ref: '#/$defs/T' } }, required: ['child'] } },
    $ref: '#/$defs/T',
  }) as unknown as { properties: { child: { oneOf: unknown[] } } };
  assert.equal(g.properties.child.oneOf.length, 3);
});

test('schemas that admit nothing or cannot be resolved are rejected naming the field', () => {
  assert.throws(
    () =>
      jsonSchemaToGrammarSchema({ type: 'object', properties: { a: { enum: [] } } }, 'tools[0].function.parameters'),
    (e: Error) => {
      return e instanceof SchemaConversionError && e.field === 'tools[0].function.parameters.properties.a';
    },
  );
  assert.throws(() => jsonSchemaToGrammarSchema({ $ref: '#/$defs/Missing' }), /does not resolve/);
  assert.throws(() => jsonSchemaToGrammarSchema('string'), /must be a JSON Schema object/);
});

test('schemas that expand past the grammar budget or nest too deep are refused at once (billion laughs)', () => {
  // 12 definitions, each eight $refs to the next: 8^12 inlined nodes (before the budget, two $refs
  // a level for 20 levels took 3.6 s, and each level more doubled it).
  const defs: Record<string, unknown> = { d12: { type: 'string' } };
  for (let i = 0; i < 12; i++) defs[`d${i}`] = { anyOf: Array(8).fill({ $ref: `#/$defs/d${i + 1}` }) };
  const laughs = { type: 'object', properties: { x: { $ref: '#/$defs/d0' } }, $defs: defs };
  assert.throws(
    () => jsonSchemaToGrammarSchema(laughs, 'tools[0].function.parameters'),
    (e: Error) =>
      e instanceof SchemaConversionError &&
      e.field === 'tools[0].function.parameters' &&
      /more than 20000 schema nodes/.test(e.reason),
  );
  // An optional property makes two alternatives that share the required one's converted schema: 2^30 uses.
  let nested: Record<string, unknown> = { type: 'string' };
  for (let i = 0; i < 30; i++)
    nested = { type: 'object', properties: { a: nested, b: { type: 'string' } }, required: ['a'] };
  assert.throws(() => jsonSchemaToGrammarSchema({ ...nested }), /more than 20000 schema nodes/);
  // 10,000 levels of items: refused by depth, not a stack overflow.
  let deep: Record<string, unknown> = { type: 'string' };
  for (let i = 0; i < 10_000; i++) deep = { type: 'array', items: deep };
  assert.throws(
    () => jsonSchemaToGrammarSchema(deep, 'p'),
    (e: Error) => e instanceof SchemaConversionError && /deeper than 32 schema levels/.test(e.reason),
  );
  // 16,000 properties against 60,000 required names: charged before the (once quadratic) work (rerun 15).
  const props = Object.fromEntries([...Array(16_000)].map((_, i) => [`p${i}`, {}]));
  const required = [...Array(60_000)].map((_, i) => `r${i}`);
  assert.throws(() => jsonSchemaToGrammarSchema({ type: 'object', properties: props, required }), /more than 20000/);
  // allOf naming one big definition 2,000 times: charged before each copy (rerun 16: 2.8 s).
  const big = { type: 'object', properties: Object.fromEntries([...Array(5000)].map((_, i) => [`p${i}`, {}])) };
  const allOf = Array(2000).fill({ $ref: '#/$defs/big' });
  assert.throws(() => jsonSchemaToGrammarSchema({ type: 'object', $defs: { big }, allOf }), /more than 20000/);
  // Schemas converted as one grammar (an env's tools in check 1) share the budget (rerun 72i: 256
  // tools, each just under it, held the worker's event loop 1.6–1.9 s).
  const fanned = { type: 'object', properties: { x: { $ref: '#/$defs/d8' } }, $defs: defs };
  const three = ['a', 'b', 'c'].map((field) => ({ schema: fanned, field }));
  assert.equal(jsonSchemasToGrammarSchemas(three.slice(0, 2), 'tools').length, 2);
  assert.throws(
    () => jsonSchemasToGrammarSchemas(three, 'tools'),
    (e: Error) =>
      e instanceof SchemaConversionError && e.field === 'c' && /together with the schemas before it/.test(e.reason),
  );
  // Objects of 8 optional properties are charged their 256 subsets before they are built, so the
  // first tool runs the budget out while it converts (rerun 72j: four tools of 294 such objects were
  // built whole, 0.6 s, before the size of the whole refused them).
  const optional8 = {
    type: 'object',
    properties: Object.fromEntries([...'abcdefgh'].map((c) => [c, { type: 'string' }])),
  };
  const many = {
    type: 'object',
    properties: Object.fromEntries([...Array(294)].map((_, i) => [`p${i}`, optional8])),
    required: [...Array(294)].map((_, i) => `p${i}`),
  };
  assert.throws(
    () =>
      jsonSchemasToGrammarSchemas(
        ['t0', 't1', 't2', 't3'].map((field) => ({ schema: many, field })),
        'tools',
      ),
    (e: Error) => e instanceof SchemaConversionError && e.field === 't0',
  );
  // Descriptions constrain nothing and are left out: copied into every optional-property subset, one
  // 30 000-character description reached through $refs made a 117 MiB grammar (rerun 72k).
  const described = {
    type: 'object',
    $defs: { D: { type: 'string', description: ' '.repeat(30_000) } },
    properties: {
      o: { type: 'object', description: 'x', properties: { a: { $ref: '#/$defs/D' }, b: { $ref: '#/$defs/D' } } },
    },
  };
  assert.equal(JSON.stringify(jsonSchemaToGrammarSchema(described)).includes('description'), false);
  // Many tools, each under the budget, that together pass it: the request names the tool where it ran out.
  const wide = {
    type: 'object',
    properties: Object.fromEntries([...Array(1200)].map((_, i) => [`p${i}`, { type: 'string' }])),
  };
  const tools = [...Array(20)].map((_, i) => ({ type: 'function', function: { name: `t${i}`, parameters: wide } }));
  assert.throws(
    () => buildChatPrompt(parseChatRequest({ messages: [{ role: 'user', content: 'x' }], tools })),
    (e: Error) =>
      e instanceof BadRequestError &&
      e.param === 'tools[8].function.parameters' &&
      /together with the schemas before it/.test(e.message),
  );
  // τ²-airline's largest tool schema expands to 41 nodes: ordinary schemas are far inside the budget.
  const wideOne = {
    type: 'object',
    properties: Object.fromEntries([...Array(200)].map((_, i) => [`p${i}`, { type: 'string' }])),
  };
  assert.equal((jsonSchemaToGrammarSchema(wideOne) as { oneOf: unknown[] }).oneOf.length, 2);
});

test('request validation names the field; tool results must answer an earlier tool call', () => {
  assert.throws(
    () => parseChatRequest({ messages: [] }),
    (e: Error) => e instanceof BadRequestError && e.param === 'messages',
  );
  assert.throws(
    () => parseChatRequest({ messages: [{ role: 'user', content: 'x' }], n: 2 }),
    (e: Error) => e instanceof BadRequestError && e.param === 'n',
  );
  assert.throws(
    () =>
      parseChatRequest({
        messages: [{ role: 'user', content: 'x' }],
        tools: [{ type: 'function', function: { name: 'bad name!' } }],
      }),
    (e: Error) => e instanceof BadRequestError && e.param === 'tools[0].function.name',
  );
  const ok = parseChatRequest({
    messages: [
      { role: 'user', content: [{ type: 'text', text: 'hi' }] },
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }],
      },
      { role: 'tool', tool_call_id: 'c1', content: 'done' },
    ],
    extra_field_from_some_client: true,
  });
  assert.equal(ok.messages.length, 3);
});

test('with tools, the prompt lists them and renders earlier tool calls and results in the action format', () => {
  const req = parseChatRequest({
    messages: [
      { role: 'system', content: 'Policy: be careful.' },
      { role: 'user', content: 'Cancel order 7' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: 'c1', type: 'function', function: { name: 'cancel', arguments: '{"order":7}' } }],
      },
      { role: 'tool', tool_call_id: 'c1', content: 'cancelled' },
    ],
    tools: [
      {
        type: 'function',
        function: {
          name: 'cancel',
          description: 'Cancel an order',
          parameters: { $schema: 'x', type: 'object', properties: { order: { type: 'integer' } }, required: ['order'] },
        },
      },
    ],
    tool_choice: 'required',
  });
  const { history, output } = buildChatPrompt(req);
  assert.equal(history[0].type, 'system');
  const system = history[0].type === 'system' ? String(history[0].text) : '';
  assert.ok(
    system.startsWith('Policy: be careful.') && system.includes('"name":"cancel"') && !system.includes('$schema'),
  );
  assert.ok(!system.includes('"type": "message"'), 'tool_choice required offers no plain reply');
  assert.deepEqual(history[2], {
    type: 'model',
    response: ['{"type":"tool_call","name":"cancel","arguments":{"order":7}}'],
  });
  assert.deepEqual(history[3], { type: 'user', text: 'Result of tool call cancel (c1):\ncancelled' });
  assert.deepEqual(history.at(-1), { type: 'model', response: [] });
  assert.deepEqual(output, {
    kind: 'action',
    schema: {
      type: 'object',
      properties: {
        type: { const: 'tool_call' },
        name: { const: 'cancel' },
        arguments: { type: 'object', properties: { order: { type: 'integer' } }, additionalProperties: false },
      },
    },
  });
  assert.deepEqual(parseAction('{"type":"tool_call","name":"cancel","arguments":{"order":7}}\n\n\n\n'), {
    type: 'tool_call',
    name: 'cancel',
    arguments: { order: 7 },
  });
  assert.equal(parseAction('{"type":"tool_call","name":"can'), undefined);
});

test('tool_choice none and response_format pick plain text or a JSON grammar', () => {
  const base = { messages: [{ role: 'user', content: 'x' }], tools: [{ type: 'function', function: { name: 'f' } }] };
  assert.deepEqual(buildChatPrompt(parseChatRequest({ ...base, tool_choice: 'none' })).output, { kind: 'text' });
  assert.deepEqual(
    buildChatPrompt(parseChatRequest({ messages: base.messages, response_format: { type: 'json_object' } })).output,
    { kind: 'json', schema: undefined },
  );
});
