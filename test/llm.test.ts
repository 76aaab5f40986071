import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MockActivityEnvironment } from '@temporalio/testing';
import { z } from 'zod';
import { createLlm, InvalidLlmOutputError, jsonSchemaFor, parseJsonReply, unfence } from '../llm/client.js';
import { startScriptedLlm, type ScriptedReply } from './helpers/scripted-llm.js';
import { testConfig } from './helpers/stage1-fixtures.js';

const ok = (content: string): ScriptedReply => ({ content });
const Answer = z.object({ answer: z.enum(['yes', 'no']) });

async function withServer(
  replies: ScriptedReply[] | ((i: number) => ScriptedReply),
  fn: (baseURL: string, requests: () => number, bodies: () => unknown[]) => Promise<void>,
) {
  const llm = await startScriptedLlm((_req, i) =>
    typeof replies === 'function' ? replies(i) : replies[Math.min(i, replies.length - 1)],
  );
  try {
    await fn(
      llm.baseURL,
      () => llm.requests.length,
      () => llm.requests,
    );
  } finally {
    await llm.close();
  }
}

test('5xx responses are retried with backoff, then the reply is returned and usage counted', async () => {
  await withServer([{ status: 500 }, { status: 503 }, ok('hello')], async (baseURL, n) => {
    const llm = createLlm(testConfig(baseURL, '/tmp/unused'), 'policy');
    const res = await llm.chat({ messages: [{ role: 'user', content: 'hi' }] });
    assert.equal(res.choices[0].message.content, 'hello');
    assert.equal(n(), 3);
    assert.deepEqual(llm.usage(), { promptTokens: 10, completionTokens: 5, calls: 1 });
  });
});

test('429 with Retry-After is honoured before the retry', async () => {
  await withServer([{ status: 429, headers: { 'retry-after': '1' } }, ok('later')], async (baseURL, n) => {
    const llm = createLlm(testConfig(baseURL, '/tmp/unused'), 'policy');
    const t0 = Date.now();
    const res = await llm.chat({ messages: [{ role: 'user', content: 'hi' }] });
    assert.equal(res.choices[0].message.content, 'later');
    assert.equal(n(), 2);
    assert.ok(Date.now() - t0 >= 950, `waited ${Date.now() - t0} ms, Retry-After asked 1000`);
  });
});

test('a hung request times out and is retried', async () => {
  await withServer([{ hang: true }, ok('back')], async (baseURL, n) => {
    const config = testConfig(baseURL, '/tmp/unused');
    config.llm.policy.timeoutMs = 300;
    const llm = createLlm(config, 'policy');
    const res = await llm.chat({ messages: [{ role: 'user', content: 'hi' }] });
    assert.equal(res.choices[0].message.content, 'back');
    assert.equal(n(), 2);
  });
});

test('persistent 500s end in a typed error after the bounded retries, not a hang', async () => {
  await withServer([{ status: 500 }], async (baseURL, n) => {
    const llm = createLlm(testConfig(baseURL, '/tmp/unused'), 'policy', { maxRetries: 1 });
    await assert.rejects(
      llm.chat({ messages: [{ role: 'user', content: 'hi' }] }),
      (e: Error & { status?: number }) => e.status === 500,
    );
    assert.equal(n(), 2);
  });
});

test('structured: invalid JSON and schema violations are repaired by a re-ask naming the error', async () => {
  await withServer(
    [ok('not json {'), ok('{"answer": "maybe"}'), ok('```json\n{"answer": "yes"}\n```')],
    async (baseURL, n, bodies) => {
      const llm = createLlm(testConfig(baseURL, '/tmp/unused'), 'analyst');
      const out = await llm.structured([{ role: 'user', content: 'yes or no?' }], Answer, 'answer');
      assert.deepEqual(out, { answer: 'yes' });
      assert.equal(n(), 3);
      const reqs = bodies() as {
        messages: { role: string; content: string }[];
        response_format: { type: string; json_schema: { name: string; schema: { properties: object } } };
      }[];
      assert.equal(reqs[0].response_format.type, 'json_schema');
      assert.equal(reqs[0].response_format.json_schema.name, 'answer');
      assert.ok('answer' in reqs[0].response_format.json_schema.schema.properties);
      assert.match(reqs[1].messages.at(-1)!.content, /not valid JSON/);
      assert.match(reqs[2].messages.at(-1)!.content, /answer: Invalid option/);
      assert.equal(llm.usage().calls, 3);
    },
  );
});

test('structured: output that stays invalid ends in InvalidLlmOutputError after maxRepairAttempts', async () => {
  await withServer([ok('garbage')], async (baseURL, n) => {
    const config = testConfig(baseURL, '/tmp/unused', { analysis: { maxRepairAttempts: 2 } });
    const llm = createLlm(config, 'analyst');
    await assert.rejects(llm.structured([{ role: 'user', content: 'q' }], Answer, 'answer'), (e) => {
      assert.ok(e instanceof InvalidLlmOutputError);
      assert.equal(e.attempts, 3);
      assert.equal(e.lastContent, 'garbage');
      return true;
    });
    assert.equal(n(), 3);
  });
});

test('a role without a model uses the first model the endpoint lists', async () => {
  await withServer([ok('hi')], async (baseURL, _n, bodies) => {
    const config = testConfig(baseURL, '/tmp/unused');
    delete config.llm.policy.model;
    const llm = createLlm(config, 'policy');
    assert.equal(await llm.model(), 'scripted-model');
    await llm.chat({ messages: [{ role: 'user', content: 'x' }] });
    assert.equal((bodies()[0] as { model: string }).model, 'scripted-model');
  });
});

test('concurrency per role is bounded', async () => {
  let inFlight = 0;
  let peak = 0;
  const server = await startScriptedLlm(async () => {
    inFlight++;
    peak = Math.max(peak, inFlight);
    await new Promise((r) => setTimeout(r, 60));
    inFlight--;
    return { content: 'x' };
  });
  try {
    const config = testConfig(server.baseURL, '/tmp/unused');
    config.llm.judge = { ...config.llm.policy, concurrency: 2 };
    const llm = createLlm(config, 'judge');
    await Promise.all(Array.from({ length: 6 }, () => llm.chat({ messages: [{ role: 'user', content: 'x' }] })));
    assert.equal(server.requests.length, 6);
    assert.equal(peak, 2);
  } finally {
    await server.close();
  }
});

test('the wire schema drops string length bounds (rejected by strict mode) but keeps fields named like them', () => {
  const s = jsonSchemaFor(
    z.object({
      name: z
        .string()
        .min(3)
        .max(9)
        .regex(/^[a-z]+$/),
      minLength: z.number(),
    }),
  );
  assert.deepEqual(s, {
    type: 'object',
    properties: { name: { type: 'string', pattern: '^[a-z]+$' }, minLength: { type: 'number' } },
    required: ['name', 'minLength'],
    additionalProperties: false,
  });
});

/** Waits for `cond`, failing (not hanging) after `ms`. */
async function until(cond: () => boolean, what: string, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

test('inside an activity a slow call heartbeats on a timer, and cancellation aborts the request within one heartbeat', async () => {
  const server = await startScriptedLlm(() => ({ hang: true }));
  try {
    const HEARTBEAT_MS = 200;
    const llm = createLlm(testConfig(server.baseURL, '/tmp/unused'), 'policy', {
      maxRetries: 0,
      heartbeatMs: HEARTBEAT_MS,
    });
    const env = new MockActivityEnvironment();
    // As on a real worker, a cancellation request reaches the activity in a heartbeat's answer.
    let requestedAt: number | undefined;
    let beats = 0;
    env.on('heartbeat', () => {
      beats++;
      if (requestedAt !== undefined) env.cancel();
    });
    const call = env.run(() => llm.chat({ messages: [{ role: 'user', content: 'a long answer please' }] }));
    await until(() => beats >= 2, 'heartbeats while the call waits', 30_000);
    assert.equal(server.requests.length, 1, 'the request is in flight while the activity heartbeats');
    assert.equal(server.disconnects.length, 0);
    requestedAt = Date.now();
    await assert.rejects(call);
    await until(() => server.disconnects.length > 0, 'the server to see the client go');
    const latency = server.disconnects[0].at - requestedAt;
    // The scripted call never answers: an abort at all is the behaviour; the bound only rules out
    // "when something else times out" and is loose enough for a busy 2-core machine.
    assert.ok(
      latency <= 50 * HEARTBEAT_MS,
      `aborted ${latency} ms after the cancel request (heartbeat every ${HEARTBEAT_MS} ms)`,
    );
    assert.equal(server.requests.length, 1, 'a cancelled call is not retried');
  } finally {
    await server.close();
  }
});

test("outside an activity the caller's signal still aborts the request", async () => {
  const server = await startScriptedLlm(() => ({ hang: true }));
  try {
    const llm = createLlm(testConfig(server.baseURL, '/tmp/unused'), 'policy', { maxRetries: 0 });
    const ac = new AbortController();
    const call = llm.chat({ messages: [{ role: 'user', content: 'hi' }] }, { signal: ac.signal });
    await until(() => server.requests.length > 0, 'the request');
    ac.abort();
    await assert.rejects(call);
    await until(() => server.disconnects.length > 0, 'the server to see the client go');
  } finally {
    await server.close();
  }
});

test('a fenced JSON reply is unfenced; a fence followed by a flood of whitespace is read in one pass', () => {
  assert.equal(unfence('```json\n{"a":1}\n```'), '{"a":1}');
  assert.equal(unfence('  ```\n[1, 2]\n```  \n'), '[1, 2]');
  assert.equal(unfence('{"a":1}'), '{"a":1}');
  assert.equal(unfence('```json\n{"a":1}\n``` and a remark'), '```json\n{"a":1}\n``` and a remark');
  // A reply a looping model writes: an opening fence, then whitespace without end (the regex this
  // replaced backtracked quadratically on it: 64,000 newlines took 7.7 s of the event loop).
  const flood = '```json' + '\n'.repeat(200_000) + 'x';
  assert.equal(unfence(flood), flood);
  assert.equal(parseJsonReply(flood), undefined);
});
