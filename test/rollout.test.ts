import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createLlm } from '../llm/client.js';
import { runEpisode, runEpisodes } from '../agent/rollout.js';
import { openEnvironment } from '../envs/registry.js';
import { startScriptedLlm, type ChatRequest, type ScriptedReply } from './helpers/scripted-llm.js';
import { testConfig } from './helpers/stage1-fixtures.js';

const call = (name: string, args: unknown) => ({
  name,
  arguments: typeof args === 'string' ? args : JSON.stringify(args),
});
const turn = (req: ChatRequest) => req.messages.filter((m) => m.role === 'assistant').length;

async function setup(
  script: (req: ChatRequest) => ScriptedReply | Promise<ScriptedReply>,
  opts: { maxRetries?: number; timeoutMs?: number } = {},
) {
  const server = await startScriptedLlm((req) => script(req));
  const config = testConfig(server.baseURL, '/tmp/unused');
  if (opts.timeoutMs) config.llm.policy.timeoutMs = opts.timeoutMs;
  const env = await openEnvironment(config.env, { config });
  const llm = createLlm(config, 'policy', { maxRetries: opts.maxRetries });
  return { server, config, env, llm };
}

const base = { maxSteps: 30, maxErrors: 10, timeoutMs: 10_000, temperature: 0 };

test('an episode with tool errors, bad JSON, an unknown tool and parallel calls completes and scores', async () => {
  const script: ScriptedReply[] = [
    { content: 'Sure. What is your email address?' },
    { toolCalls: [call('find_customer_by_email', { email: 'bo@example.com' })] },
    { toolCalls: [call('get_order', '{order_id: O-1002')] },
    { toolCalls: [call('delete_everything', {})] },
    { toolCalls: [call('get_order', { order: 'O-1002' })] },
    { content: 'What is the reason for the cancellation?' },
    {
      toolCalls: [
        call('cancel_order', { order_id: 'O-1002', reason: 'ordered_by_mistake' }),
        call('get_order', { order_id: 'O-1002' }),
      ],
    },
    { content: 'Done: order O-1002 is cancelled.' },
  ];
  const { server, env, llm } = await setup((req) => script[turn(req)]);
  try {
    const t = await runEpisode({ ...base, env, llm, taskId: 'cancel_pending', trial: 2 });
    assert.equal(t.id, 'toy-orders/cancel_pending/t2');
    assert.equal(t.termination, 'user_stop');
    assert.equal(t.success, true);
    assert.equal(t.reward, 1);
    assert.deepEqual(t.rewardInfo.components, { DB: 1, COMMUNICATE: 1 });
    assert.equal(t.steps, 9); // 6 tool calls + 3 messages
    assert.equal(t.usage.calls, 8);
    assert.equal(t.model, 'scripted-model');
    const tools = t.messages.filter((m) => m.role === 'tool');
    assert.equal(tools.length, 6);
    assert.match(tools[1].content, /^Error: arguments are not valid JSON/);
    assert.match(tools[2].content, /^Error: unknown tool 'delete_everything'/);
    assert.match(tools[3].content, /^Error: unexpected argument 'order'/);
    // Every tool_call id is answered, in order (tau2 executes every call of one message).
    const ids = t.messages.flatMap((m) => (m.role === 'assistant' ? (m.tool_calls ?? []).map((c) => c.id) : []));
    assert.deepEqual(
      ids,
      tools.map((m) => m.tool_call_id),
    );
    assert.equal(t.messages[0].role, 'system');
    assert.deepEqual(t.messages.at(-1), { role: 'user', content: "Thanks, that's all. ###STOP###" });
    // The policy saw the tools and the whole conversation so far.
    assert.equal(server.requests[0].tools?.length, 5);
    assert.equal(server.requests[7].messages.length, t.messages.length - 2);
  } finally {
    await server.close();
  }
});

test('a wrong action fails the verifier: DB mismatch and a value not communicated', async () => {
  const script: ScriptedReply[] = [
    { toolCalls: [call('update_shipping_address', { order_id: 'O-1004', address: 'Nowhere 1' })] },
    { content: 'I changed it.' },
  ];
  const { server, env, llm } = await setup((req) => script[turn(req)]);
  try {
    const t = await runEpisode({ ...base, env, llm, taskId: 'change_address' });
    assert.equal(t.success, false);
    assert.deepEqual(t.rewardInfo.components, { DB: 0, COMMUNICATE: 1 });
    const s = await runEpisode({ ...base, env, llm, taskId: 'cancel_shipped' });
    assert.equal(s.success, false);
    assert.deepEqual(s.rewardInfo.details?.notCommunicated, ['shipped']);
  } finally {
    await server.close();
  }
});

test('max steps, max errors and the wall-clock timeout end episodes with their reason', async () => {
  const { server, env, llm } = await setup((req) =>
    req.messages[1].content?.includes('O-1001')
      ? { toolCalls: [call('get_order', { order_id: 'O-1001' })] }
      : { toolCalls: [call('nope', {})] },
  );
  try {
    const steps = await runEpisode({ ...base, env, llm, taskId: 'order_total', maxSteps: 3 });
    assert.equal(steps.termination, 'max_steps');
    assert.equal(steps.steps, 3);
    const errors = await runEpisode({ ...base, env, llm, taskId: 'order_status', maxErrors: 2 });
    assert.equal(errors.termination, 'max_errors');
    assert.equal(errors.steps, 2);
  } finally {
    await server.close();
  }
  const hung = await setup(() => ({ hang: true }), { timeoutMs: 60_000 });
  try {
    const t0 = Date.now();
    const t = await runEpisode({ ...base, env: hung.env, llm: hung.llm, taskId: 'order_total', timeoutMs: 400 });
    assert.equal(t.termination, 'timeout');
    assert.equal(t.success, false);
    assert.ok(Date.now() - t0 < 3_000, 'the timeout cut the hung call');
  } finally {
    await hung.server.close();
  }
});

test('an LLM that keeps failing ends the episode with termination error, not a crash', async () => {
  const { server, env, llm } = await setup(() => ({ status: 500 }), { maxRetries: 1 });
  try {
    const t = await runEpisode({ ...base, env, llm, taskId: 'order_total' });
    assert.equal(t.termination, 'error');
    assert.match(String(t.rewardInfo.details?.runnerNote), /500/);
    assert.equal(server.requests.length, 2);
  } finally {
    await server.close();
  }
});

test('runEpisodes bounds concurrency and keeps task order', async () => {
  let inFlight = 0;
  let peak = 0;
  const { server, env, llm } = await setup(async () => {
    inFlight++;
    peak = Math.max(peak, inFlight);
    await new Promise((r) => setTimeout(r, 30));
    inFlight--;
    return { content: 'Goodbye.' };
  });
  try {
    const seen: number[] = [];
    const ts = await runEpisodes({
      ...base,
      env,
      llm,
      concurrency: 2,
      tasks: [
        { taskId: 'order_total', trial: 0 },
        { taskId: 'order_status', trial: 0 },
        { seed: 9, trial: 1 },
        { taskId: 'order_total', trial: 1 },
      ],
      onEpisode: (_t, i) => void seen.push(i),
    });
    assert.deepEqual(
      ts.map((t) => t.id),
      ['toy-orders/order_total/t0', 'toy-orders/order_status/t0', 'toy-orders/seed-9/t1', 'toy-orders/order_total/t1'],
    );
    assert.equal(ts[2].seed, 9);
    assert.deepEqual([...seen].sort(), [0, 1, 2, 3]);
    assert.ok(peak <= 2);
    assert.ok(ts.every((t) => t.termination === 'user_stop'));
  } finally {
    await server.close();
  }
});
