import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import OpenAI from 'openai';
import { z } from 'zod';
import { startLlmServer, type LlmServer } from '../infra/llm-server.js';

/**
 * Smoke test of the embedded LLM server with the real SmolLM2-135M GGUF (fetched by
 * scripts/setup.sh), driven through the `openai` client exactly as the pipeline drives it. The
 * model is tiny, so the assertions are about the wire path and constrained decoding: tool calls
 * name a real tool with arguments that parse and validate, JSON-schema replies parse and validate.
 */
let server: LlmServer;
let client: OpenAI;

before(async () => {
  server = await startLlmServer({ port: 0, parallel: 2, contextSize: 2048 });
  client = new OpenAI({ baseURL: server.baseURL, apiKey: 'unused', maxRetries: 0, timeout: 120_000 });
});
after(async () => {
  await server?.close();
});

const WeatherArgs = z.object({ city: z.string(), unit: z.enum(['celsius', 'fahrenheit']).optional() }).strict();
const tools: OpenAI.Chat.Completions.ChatCompletionTool[] = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'Current weather for a city',
      parameters: z.toJSONSchema(WeatherArgs) as Record<string, unknown>,
    },
  },
  {
    type: 'function',
    function: {
      name: 'book_flight',
      description: 'Book a flight between two airports',
      parameters: {
        type: 'object',
        properties: { from: { type: 'string' }, to: { type: 'string' } },
        required: ['from', 'to'],
      },
    },
  },
];

test('GET /v1/models lists the served model', async () => {
  const models = await client.models.list();
  assert.deepEqual(
    models.data.map((m) => m.id),
    ['smollm2-135m-instruct-q4_1'],
  );
  assert.equal(server.model, 'smollm2-135m-instruct-q4_1');
});

test('plain chat returns text and token usage', async () => {
  const r = await client.chat.completions.create({
    model: server.model,
    messages: [
      { role: 'system', content: 'You are a concise assistant.' },
      { role: 'user', content: 'Name one colour.' },
    ],
    max_tokens: 16,
    temperature: 0,
  });
  const choice = r.choices[0];
  assert.equal(choice.message.role, 'assistant');
  assert.equal(typeof choice.message.content, 'string');
  assert.ok(choice.message.content!.length > 0);
  assert.ok(['stop', 'length'].includes(choice.finish_reason));
  assert.ok(r.usage!.prompt_tokens > 5 && r.usage!.completion_tokens > 0 && r.usage!.completion_tokens <= 16);
  assert.equal(r.usage!.total_tokens, r.usage!.prompt_tokens + r.usage!.completion_tokens);
});

test('tool_choice required yields a tool call naming a real tool with valid JSON arguments; a tool result continues the turn', async () => {
  const messages: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [
    { role: 'system', content: 'You help with travel. Use the tools.' },
    { role: 'user', content: 'What is the weather in Paris?' },
  ];
  const r = await client.chat.completions.create({
    model: server.model,
    messages,
    tools,
    tool_choice: 'required',
    max_tokens: 48,
    temperature: 0,
  });
  const choice = r.choices[0];
  assert.equal(choice.finish_reason, 'tool_calls');
  const call = choice.message.tool_calls?.[0];
  assert.ok(call && call.type === 'function', 'a function tool call');
  assert.ok(['get_weather', 'book_flight'].includes(call.function.name));
  const args = JSON.parse(call.function.arguments);
  if (call.function.name === 'get_weather') WeatherArgs.parse(args);
  else z.object({ from: z.string(), to: z.string() }).strict().parse(args);

  const next = await client.chat.completions.create({
    model: server.model,
    messages: [...messages, choice.message, { role: 'tool', tool_call_id: call.id, content: '{"temperature_c": 21}' }],
    tools,
    max_tokens: 48,
    temperature: 0,
  });
  const m = next.choices[0].message;
  assert.ok(m.tool_calls?.length || typeof m.content === 'string', 'either another tool call or a reply');
  const again = m.tool_calls?.[0];
  if (again) assert.ok(again.type === 'function' && ['get_weather', 'book_flight'].includes(again.function.name));
});

test('response_format json_schema output parses and validates against the schema', async () => {
  const Verdict = z.object({
    capability: z.string().max(40),
    label: z.enum(['NA', 'PRESENT', 'LACKING']),
    confidence: z.number(),
    notes: z.string().max(60).optional(),
  });
  const r = await client.chat.completions.create({
    model: server.model,
    messages: [{ role: 'user', content: 'Did the agent verify the booking before cancelling? Answer as JSON.' }],
    response_format: {
      type: 'json_schema',
      json_schema: { name: 'verdict', schema: z.toJSONSchema(Verdict) as Record<string, unknown> },
    },
    // Room for the longest object the schema allows: a seeded sample at 80 tokens ended inside a
    // string on one machine and not on another (the CPU's kernels decide the draws).
    max_tokens: 200,
    temperature: 0.7,
    seed: 7,
  });
  assert.equal(r.choices[0].finish_reason, 'stop');
  Verdict.parse(JSON.parse(r.choices[0].message.content!));

  const obj = await client.chat.completions.create({
    model: server.model,
    messages: [{ role: 'user', content: 'Reply with a JSON object describing a cat.' }],
    response_format: { type: 'json_object' },
    max_tokens: 60,
    temperature: 0,
  });
  if (obj.choices[0].finish_reason === 'stop')
    assert.equal(typeof JSON.parse(obj.choices[0].message.content!), 'object');
  else assert.equal(obj.choices[0].finish_reason, 'length');
});

test('malformed requests get a 400 naming the bad field', async () => {
  const post = async (body: unknown) => {
    const res = await fetch(`${server.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as { error: { message: string; param: string } } };
  };
  const cases: [unknown, string][] = [
    [{ model: 'm' }, 'messages'],
    [{ messages: [{ role: 'robot', content: 'hi' }] }, 'messages[0].role'],
    [{ messages: [{ role: 'user', content: 'hi' }], temperature: 5 }, 'temperature'],
    [{ messages: [{ role: 'tool', tool_call_id: 'nope', content: 'x' }] }, 'messages[0].tool_call_id'],
    [
      {
        messages: [{ role: 'user', content: 'hi' }],
        tools: [
          {
            type: 'function',
            function: { name: 'f', parameters: { type: 'object', properties: { a: { $ref: 'http://x' } } } },
          },
        ],
      },
      'tools[0].function.parameters.properties.a',
    ],
    [
      {
        messages: [{ role: 'user', content: 'hi' }],
        tool_choice: { type: 'function', function: { name: 'ghost' } },
        tools,
      },
      'tool_choice.function.name',
    ],
    [{ messages: [{ role: 'user', content: 'hi' }], stream: true }, 'stream'],
  ];
  for (const [body, param] of cases) {
    const r = await post(body);
    assert.equal(r.status, 400, JSON.stringify(body));
    assert.equal(r.body.error.param, param);
    assert.ok(r.body.error.message.startsWith(`${param}: `), r.body.error.message);
  }
  const notJson = await fetch(`${server.baseURL}/chat/completions`, { method: 'POST', body: '{not json' });
  assert.equal(notJson.status, 400);
});

test('requests beyond the parallel sequences queue and all complete', async () => {
  const ask = (i: number) =>
    client.chat.completions.create({
      model: server.model,
      messages: [{ role: 'user', content: `Count to ${i}.` }],
      max_tokens: 8,
      temperature: 0,
    });
  const rs = await Promise.all([1, 2, 3, 4].map(ask));
  for (const r of rs) assert.ok(r.usage!.completion_tokens > 0);
});

test('a client that disconnects mid-generation frees its sequence: the server goes idle', async () => {
  const health = async () =>
    (await (await fetch(`${server.baseURL.replace(/\/v1$/, '')}/health`)).json()) as { busy: number; queued: number };
  const ac = new AbortController();
  const call = client.chat.completions.create(
    {
      model: server.model,
      messages: [{ role: 'user', content: 'Write a very long story about a lighthouse.' }],
      max_tokens: 1500,
      temperature: 1,
    },
    { signal: ac.signal },
  );
  call.catch(() => undefined);
  let h = await health();
  for (let i = 0; i < 200 && h.busy === 0; i++) h = await new Promise((r) => setTimeout(r, 25)).then(health);
  assert.equal(h.busy, 1, 'the long generation is running');
  ac.abort();
  await assert.rejects(call);
  const abortedAt = Date.now();
  for (h = await health(); h.busy > 0 && Date.now() - abortedAt < 5_000;)
    h = await new Promise((r) => setTimeout(r, 25)).then(health);
  assert.deepEqual([h.busy, h.queued], [0, 0], `still generating ${Date.now() - abortedAt} ms after the client left`);
});

test('the sequences are split over two single-threaded contexts: concurrent greedy answers equal one context answering alone', async () => {
  const prompts = ['Name a colour.', 'Say hello to Ada.'];
  const ask = (c: OpenAI, model: string, content: string) =>
    c.chat.completions
      .create({ model, messages: [{ role: 'user', content }], max_tokens: 12, temperature: 0 })
      .then((r) => r.choices[0].message.content);
  // `server` holds 2 sequences in 2 contexts (the default): each request decodes in its own context.
  const together = await Promise.all(prompts.map((p) => ask(client, server.model, p)));
  const alone = await startLlmServer({ port: 0, parallel: 1, contexts: 1, contextSize: 2048 });
  try {
    const c = new OpenAI({ baseURL: alone.baseURL, apiKey: 'unused', maxRetries: 0, timeout: 120_000 });
    const oneByOne: (string | null)[] = [];
    for (const p of prompts) oneByOne.push(await ask(c, alone.model, p));
    assert.deepEqual(together, oneByOne);
    assert.ok(together.every((t) => (t ?? '').length > 0));
  } finally {
    await alone.close();
  }
});
