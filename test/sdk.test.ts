import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { actionMessage } from '../envs/environment.js';
import { callSchemaFault, callShapeViolation } from '../envs/sdk/schema.js';
import { toolsFault } from '../envs/sandbox/index.js';
import {
  Rng,
  gen,
  canonicalJson,
  stableHash,
  schemaViolation,
  inspectInstance,
  communicated,
  calledWith,
  toolCallsOf,
  weighted,
  type SyntheticEnvironment,
  type AgentAction,
  type Message,
} from '#env-sdk';

const root = path.resolve(import.meta.dirname, '..');

/** The README's example module, written into the repo so `#env-sdk` resolves as in real modules. */
async function readmeExample(): Promise<SyntheticEnvironment> {
  const readme = readFileSync(path.join(root, 'envs/sdk/README.md'), 'utf8');
  const code = /```ts\n([\s\S]*?)```/.exec(readme)?.[1];
  assert.ok(code, 'README has a ts example');
  const dir = path.join(root, '.trace/tmp/sdk-test');
  mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `readme-example-${process.pid}.ts`);
  writeFileSync(file, code);
  return (await import(file)).default as SyntheticEnvironment;
}

async function play(env: SyntheticEnvironment, seed: number, actions: AgentAction[]) {
  const ep = await env.reset({ seed });
  const messages: Message[] = ep.initialMessages();
  let termination: 'agent_stop' | 'user_stop' | 'max_steps' = 'agent_stop';
  for (const a of actions) {
    messages.push(actionMessage(a));
    const r = await ep.step(a);
    messages.push(r.observation);
    if (r.done) {
      termination = r.termination as typeof termination;
      break;
    }
  }
  return { ep, messages, result: await ep.evaluate(messages, termination) };
}

test('Rng is deterministic per seed and draws stay in range', () => {
  const a = new Rng(7);
  const b = new Rng(7);
  const xs = Array.from({ length: 50 }, () => a.int(1, 6));
  assert.deepEqual(
    xs,
    Array.from({ length: 50 }, () => b.int(1, 6)),
  );
  assert.ok(xs.every((x) => x >= 1 && x <= 6));
  assert.equal(new Set(xs).size, 6);
  assert.notDeepEqual(
    xs,
    Array.from(
      { length: 50 },
      (
        (r) => () =>
          r.int(1, 6)
      )(new Rng(8)),
    ),
  );
  assert.equal(new Set(new Rng(1).sample([1, 2, 3, 4], 4)).size, 4);
  const d = gen.date(new Rng(3), '2024-05-01', '2024-05-03');
  assert.ok(['2024-05-01', '2024-05-02', '2024-05-03'].includes(d));
  assert.match(gen.locator(new Rng(3)), /^[A-Z2-9]{6}$/);
});

test('canonical JSON sorts keys and the hash ignores key order; non-JSON is rejected', () => {
  assert.equal(
    canonicalJson({ b: 1, a: { d: [1, { z: 1, y: 2 }], c: null } }),
    '{"a":{"c":null,"d":[1,{"y":2,"z":1}]},"b":1}',
  );
  assert.equal(stableHash({ x: 1, y: 2 }), stableHash({ y: 2, x: 1 }));
  assert.notEqual(stableHash({ x: 1 }), stableHash({ x: 2 }));
  assert.throws(() => canonicalJson({ a: Number.NaN }), /\$\.a is NaN/);
  assert.throws(() => canonicalJson({ d: new Date(0) }), /\$\.d is a Date/);
});

test('schemaViolation names the bad field', () => {
  const s = {
    type: 'object',
    properties: {
      id: { type: 'string' },
      n: { type: 'integer', minimum: 0 },
      cabin: { enum: ['economy', 'business'] },
      xs: { type: 'array', items: { type: 'object', properties: { a: { type: 'string' } }, required: ['a'] } },
    },
    required: ['id'],
    additionalProperties: false,
  };
  assert.equal(schemaViolation(s, { id: 'x', n: 2, cabin: 'economy', xs: [{ a: 'q' }] }), undefined);
  assert.equal(schemaViolation(s, {}), 'arguments.id is required');
  assert.equal(schemaViolation(s, { id: 3 }), 'arguments.id must be string, got number');
  assert.equal(schemaViolation(s, { id: 'x', n: 1.5 }), 'arguments.n must be integer, got number');
  assert.equal(schemaViolation(s, { id: 'x', n: -1 }), 'arguments.n must be ≥ 0');
  assert.match(schemaViolation(s, { id: 'x', cabin: 'first' }) ?? '', /arguments\.cabin must be one of/);
  assert.equal(schemaViolation(s, { id: 'x', xs: [{}] }), 'arguments.xs[0].a is required');
  assert.equal(schemaViolation(s, { id: 'x', extra: 1 }), 'arguments.extra is not an allowed property');
  // Lengths in code points, as JSON Schema counts them: one emoji is one character, not two UTF-16 units.
  const code = { type: 'string', minLength: 2, maxLength: 2 };
  assert.equal(schemaViolation(code, '😀'), 'arguments must have ≥ 2 characters');
  assert.equal(schemaViolation(code, '😀😀'), undefined);
});

test('callShapeViolation charges every key and KiB it walks: an allOf of 19 000 parts over a 6 000-key call or a 60 KB string is refused, not walked for seconds (reruns 22, 23)', () => {
  const wide = {
    type: 'object',
    allOf: [...Array.from({ length: 19_000 }, () => ({})), { additionalProperties: true }],
  };
  const call = Object.fromEntries(Array.from({ length: 6000 }, (_, i) => [`k${i}`, 0]));
  assert.match(callShapeViolation(wide, call) ?? '', /too costly to check/);
  // Rerun 23: a 64 KiB string counted at each of 19 000 parts (2.2 s for one call).
  const counted = { type: 'string', allOf: Array.from({ length: 19_000 }, () => ({ minLength: 0 })) };
  assert.match(callShapeViolation(counted, 'x'.repeat(60_000)) ?? '', /too costly to check/);
  const map = { type: 'object', additionalProperties: { type: 'integer' } };
  const big = Object.fromEntries(Array.from({ length: 1000 }, (_, i) => [`k${i}`, i]));
  assert.equal(callShapeViolation(map, big), undefined, 'an ordinary schema still checks a 1 000-key call through');
});

test("a `required` list reached through many $refs counts each name: refused at the tool check, charged at the call check (rerun 41b: 23 s of the worker's CPU at start, 1.5 s per call)", () => {
  // 70 × 70 $refs to a list of 14 000 names was 69 M names walked; here 10 × 10 to 300 is 30 000.
  const bomb = {
    type: 'object',
    properties: { a: { type: 'integer' } },
    required: ['a'],
    allOf: Array.from({ length: 10 }, () => ({ $ref: '#/$defs/A' })),
    $defs: {
      A: { allOf: Array.from({ length: 10 }, () => ({ $ref: '#/$defs/B' })) },
      B: { required: Array.from({ length: 300 }, () => 'a') },
    },
  };
  assert.match(callSchemaFault(bomb) ?? '', /expands to more than 20000 schema nodes/);
  assert.match(callShapeViolation(bomb, { a: 1 }) ?? '', /too costly to check/);
  // So does a list of types, walked at each visit.
  const types = { ...bomb, required: [], $defs: { ...bomb.$defs, B: { type: Array(300).fill('object') } } };
  assert.match(callShapeViolation(types, { a: 1 }) ?? '', /too costly to check/);
  // An enum reached so is as many values in the trainer's grammar.
  const enums = { ...bomb, $defs: { ...bomb.$defs, B: { enum: Array.from({ length: 300 }, (_, i) => i) } } };
  assert.match(
    callSchemaFault(enums) ?? '',
    /expands to more than 20000 schema nodes|enum and const values and property names come to/,
  );
  // And every character of its strings and names: 30 000 characters reached 60 times are 1.8 MB (rerun 42b: 206 MiB in the trainer).
  const text = { ...bomb, $defs: { ...bomb.$defs, A: { $ref: '#/$defs/B' }, B: { description: 'x'.repeat(30_000) } } };
  text.allOf = Array.from({ length: 60 }, () => ({ $ref: '#/$defs/A' }));
  assert.match(callSchemaFault(text) ?? '', /expands to more than 1048576 characters/);
  const fewer = { ...bomb, $defs: { ...bomb.$defs, B: { required: ['a'] } } };
  assert.equal(callSchemaFault(fewer), undefined);
  assert.equal(callShapeViolation(fewer, { a: 1 }), undefined);
});

test("enum and const values are bounded per tool and per env, as inlined (rerun 43b: two 30 000-character members took the trainer's grammar 136 s)", () => {
  const tool = (members: string[]) => ({
    type: 'object',
    properties: { a: { type: 'string', enum: members } },
    required: ['a'],
  });
  const long = tool(['0' + 'x'.repeat(30_000), '1' + 'x'.repeat(30_000)]);
  assert.match(callSchemaFault(long) ?? '', /enum and const values and property names come to more than 4096 bytes/);
  // Members that are objects or arrays count as written, and in UTF-8 bytes (rerun 44b: 118 s; CJK 9× the cost).
  const x = (i: number) => `${i}${'x'.repeat(30_000)}`;
  for (const a of [
    { type: 'object', enum: [{ k: x(0) }, { k: x(1) }] },
    { type: 'array', items: { type: 'string' }, enum: [[x(0)], [x(1)]] },
    { anyOf: [{ const: { k: x(0) } }, { const: { k: x(1) } }] },
  ])
    assert.match(
      callSchemaFault({ type: 'object', properties: { a }, required: ['a'] }) ?? '',
      /enum and const values/,
    );
  assert.match(callSchemaFault(tool(['\u4e00'.repeat(1000), '\u4e01'.repeat(1000)])) ?? '', /enum and const values/);
  // DEL is six bytes in the grammar (rerun 45b: 4.6 s for two members of 1 000 counted as half the limit).
  assert.match(
    callSchemaFault(tool(['0' + '\x7f'.repeat(1000), '1' + '\x7f'.repeat(1000)])) ?? '',
    /enum and const values/,
  );
  const countries = tool(Array.from({ length: 250 }, (_, i) => `Country ${i}`));
  assert.equal(callSchemaFault(countries), undefined, 'a list of 250 names is an ordinary enum');
  const fn = (name: string, parameters: Record<string, unknown>) => ({
    type: 'function' as const,
    function: { name, parameters },
  });
  const four = tool(Array.from({ length: 4 }, (_, i) => `${i}${'y'.repeat(999)}`));
  assert.equal(toolsFault([fn('a', four), fn('b', four)]), undefined);
  // A tool's description is the prompt's in the native format: half a UTF-16 pair there stops the tokenizer (rerun 46b).
  const described = { type: 'function' as const, function: { name: 'd', description: 'x\ud800', parameters: four } };
  assert.match(toolsFault([described]) ?? '', /description holds a lone surrogate/);
  assert.match(
    toolsFault(['a', 'b', 'c', 'd', 'e'].map((n) => fn(n, four))) ?? '',
    /come to 20\d{3} bytes; at most 16384/,
  );
  // Property names are literals of both grammars too (rerun 47b: 8 optional names of 7 000
  // characters in 12 tools took the trainer's grammar 23.6 s and validation's 87 MB of grammar).
  const named = (n: number, length: number) => ({
    type: 'object',
    properties: Object.fromEntries(
      Array.from({ length: n }, (_, i) => [`${i}${'p'.repeat(length)}`, { type: 'string' }]),
    ),
  });
  assert.match(callSchemaFault(named(8, 7000)) ?? '', /property names come to more than 4096 bytes/);
  assert.equal(callSchemaFault(named(8, 400)), undefined);
  assert.match(
    toolsFault(Array.from({ length: 6 }, (_, i) => fn(`t${i}`, named(8, 400)))) ?? '',
    /property names come to \d+ bytes; at most 16384/,
  );
  // Parameters that expand through $refs to 2 349 nodes: eight tools of them fit the env's 20 000,
  // nine do not (rerun 72i: 256 tools, each just under 20 000, cost the worker 1–2 s at every start and reset).
  const defs: Record<string, unknown> = { d0: { type: 'string' } };
  for (let i = 1; i <= 3; i++) defs[`d${i}`] = { anyOf: Array(8).fill({ $ref: `#/$defs/d${i - 1}` }) };
  const fanned = { type: 'object', properties: { a: { $ref: '#/$defs/d3' } }, $defs: defs };
  assert.equal(toolsFault(Array.from({ length: 8 }, (_, i) => fn(`t${i}`, fanned))), undefined);
  assert.equal(
    toolsFault(Array.from({ length: 9 }, (_, i) => fn(`t${i}`, fanned))),
    'tool t8: parameters: expands to more than 20000 schema nodes through $refs together with the tools before it',
  );
  // What resolving $refs reads counts too, used or not (rerun 72j: 1 560 $refs to a definition of
  // 8 150 required names, eight tools of them, took the worker 1.1 s at every start and reset).
  const unused = {
    type: 'object',
    properties: {},
    $defs: {
      U: { anyOf: Array.from({ length: 1560 }, () => ({ $ref: '#/$defs/D' })) },
      D: { required: Array(8150).fill('a') },
    },
  };
  assert.equal(toolsFault([fn('t', unused)]), 'tool t: parameters: more than 20000 schema nodes');
  // A definition's name is at most 128 characters (rerun 72k: one of 30 000 reached 3 249 times cost
  // the LLM server's conversion 300 ms a request).
  const named128 = (n: number) => ({
    type: 'object',
    properties: { x: { $ref: `#/$defs/${'d'.repeat(n)}` } },
    $defs: { ['d'.repeat(n)]: { type: 'string' } },
  });
  assert.equal(callSchemaFault(named128(128)), undefined);
  assert.match(callSchemaFault(named128(129)) ?? '', /1–128 letters/);
});

test('verifier helpers: communicated values, partial argument match, weighted credit', () => {
  const msgs: Message[] = [
    {
      role: 'assistant',
      content: null,
      tool_calls: [
        { id: '1', type: 'function', function: { name: 'f', arguments: '{"a":"X","b":{"c":[1,2]},"d":9}' } },
      ],
    },
    { role: 'assistant', content: 'Your total is $1,234.50 and the locator is abc123.' },
  ];
  assert.deepEqual(communicated(msgs, [1234.5, 'ABC123']), { ok: true, missing: [] });
  assert.deepEqual(communicated(msgs, [1234.51, 'zzz']), { ok: false, missing: ['1234.51', 'zzz'] });
  const calls = toolCallsOf(msgs);
  assert.ok(calledWith(calls, 'f', { a: 'x', b: { c: [1, 2] } }));
  assert.ok(!calledWith(calls, 'f', { b: { c: [1] } }));
  assert.ok(!calledWith(calls, 'g'));
  assert.deepEqual(weighted({ action: [0.6, true], communication: [0.4, false] }), {
    reward: 0.6,
    components: { action: 1, communication: 0 },
    details: undefined,
  });
});

test('defineEnvironment: the README example steps tools, reports argument errors, scores gold 1 and stopping 0', async () => {
  const env = await readmeExample();
  assert.equal(env.info.kind, 'synthetic');
  assert.equal(env.tools()[0].function.name, 'get_user_details');
  const view = env.inspect(5);
  assert.equal(view.instance, env.inspect(5).instance);
  assert.notEqual(view.instance, env.inspect(6).instance);
  assert.deepEqual(await inspectInstance(env, 5), JSON.parse(JSON.stringify(view)));

  const gold = await play(env, 5, view.gold);
  assert.equal(gold.result.reward, 1);
  assert.equal(gold.result.success, true);
  assert.equal((await play(env, 5, [{ type: 'message', content: '###STOP###' }])).result.reward, 0);

  const ep = await env.reset({ seed: 5 });
  const bad = async (name: string, args: string) =>
    ep.step({ type: 'tool_call', call: { id: 'c', type: 'function', function: { name, arguments: args } } });
  assert.match((await bad('nope', '{}')).observation.content as string, /^Error: unknown tool 'nope'/);
  assert.match((await bad('get_user_details', '{oops')).observation.content as string, /not valid JSON/);
  const r = await bad('get_user_details', '{"user_id": 5}');
  assert.equal(r.error, true);
  assert.match(r.observation.content as string, /arguments\.user_id must be string/);
  assert.match(
    (await bad('get_user_details', '{"user_id": "ghost"}')).observation.content as string,
    /^Error: User not found/,
  );

  // A fork replays independently; the scripted user stops after the agent's message.
  const fork = await ep.fork();
  const done = await fork.step({ type: 'message', content: 'hello' });
  assert.deepEqual([done.done, done.termination], [true, 'user_stop']);
  assert.equal((await ep.step({ type: 'message', content: 'hi' })).termination, 'user_stop');
});

test("airline tools keep τ²'s upstream schemas, resolving $ref passengers", async () => {
  const { airlineTools, AIRLINE_TOOL_SCHEMAS, airlineUser, Rng: R } = await import('#env-sdk');
  const upstream = AIRLINE_TOOL_SCHEMAS.find((s) => s.function.name === 'update_reservation_passengers')!;
  assert.deepEqual(airlineTools.update_reservation_passengers.parameters, upstream.function.parameters);
  const withRef = {
    type: 'object',
    $defs: { P: { type: 'object', properties: { dob: { type: 'string' } }, required: ['dob'] } },
    properties: { ps: { type: 'array', items: { $ref: '#/$defs/P' } } },
  };
  assert.equal(schemaViolation(withRef, { ps: [{ dob: '2000-01-01' }] }), undefined);
  assert.equal(schemaViolation(withRef, { ps: [{}] }), 'arguments.ps[0].dob is required');
  assert.match(schemaViolation({ $ref: '#/$defs/Nope' }, 1) ?? '', /cannot be resolved/);
  const db = airlineUser(new R(4), { reservations: 2 });
  const user = Object.values(db.users)[0];
  assert.equal(user.reservations.length, 2);
  assert.ok(user.reservations.every((id) => db.reservations[id].user_id === user.user_id));
  const rid = user.reservations[0];
  const passengers = db.reservations[rid].passengers.map(({ dob: _d, ...rest }) => rest);
  assert.throws(
    () =>
      airlineTools.update_reservation_passengers.run(
        { reservation_id: rid, passengers },
        { state: db, instance: null },
      ),
    /passengers\[0\] needs string first_name, last_name and dob/,
  );
});

test("llmUser plays the user from the agent's side of the conversation and stops after maxTurns", async () => {
  const { llmUser } = await import('#env-sdk');
  const seen: { role: string; content: string }[][] = [];
  const user = llmUser<unknown, { userGoal: string }>({
    instructions: (i) => `Your goal: ${i.userGoal}`,
    complete: async (msgs) => {
      seen.push(msgs);
      return 'My order id is 42.';
    },
    maxTurns: 1,
  });
  const messages: Message[] = [
    { role: 'user', content: 'I need help' },
    { role: 'assistant', content: 'What is your order id?' },
  ];
  assert.equal(
    await user({ instance: { userGoal: 'refund order 42' }, state: {}, messages, turn: 0 }),
    'My order id is 42.',
  );
  assert.deepEqual(
    seen[0].map((m) => m.role),
    ['system', 'assistant', 'user'],
  );
  assert.match(seen[0][0].content, /Your goal: refund order 42[\s\S]*###STOP###/);
  assert.equal(await user({ instance: { userGoal: 'x' }, state: {}, messages, turn: 1 }), '###STOP###');
});

test('a successful call to an endsEpisode tool ends the episode; a failed one is an error observation', async () => {
  const { defineEnvironment, defineTool, ToolError, call } = await import('#env-sdk');
  type S = { done: string[] };
  const env = defineEnvironment<S, { initialState: S; userGoal: string; gold: AgentAction[] }>({
    metadata: {
      name: 'ends-test',
      capability: 'x',
      targetEnv: 't',
      transferRationale: 'only for this test of endsEpisode',
      description: 'ends-test env',
    },
    systemPrompt: 'test',
    tools: [
      defineTool<S, { id: string }>({
        name: 'finish',
        description: 'finish',
        parameters: { type: 'object', properties: { id: { type: 'string' } }, required: ['id'] },
        endsEpisode: true,
        run: ({ id }, { state }) => {
          if (id !== 'ok') throw new ToolError(`no item ${id}`);
          state.done.push(id);
          return 'finished';
        },
      }),
    ],
    generate: () => ({ initialState: { done: [] }, userGoal: 'finish ok', gold: [call('finish', { id: 'ok' })] }),
    evaluate: ({ state }) => ({ reward: state.done.length ? 1 : 0, components: {} }),
  });
  const ep = await env.reset({ seed: 1 });
  const bad = await ep.step(call('finish', { id: 'nope' }));
  assert.deepEqual(
    { error: bad.error, done: bad.done, content: bad.observation.content },
    { error: true, done: false, content: 'Error: no item nope' },
  );
  const ok = await ep.step(call('finish', { id: 'ok' }));
  assert.deepEqual(
    { error: ok.error, done: ok.done, termination: ok.termination },
    { error: false, done: true, termination: 'agent_stop' },
  );
  await assert.rejects(ep.step(call('finish', { id: 'ok' })), /is finished/);
  assert.equal((await ep.evaluate([], 'agent_stop')).reward, 1);
});
