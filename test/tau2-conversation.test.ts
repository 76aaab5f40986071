import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import OpenAI from 'openai';
import type { Message } from '../core/messages.js';
import type { Episode } from '../envs/environment.js';
import { createTau2Environment, GREETING, loadTasks, type Tau2DomainName } from '../envs/tau2/index.js';
import { startScriptedLlm, type ChatRequest, type ScriptedLlm } from './helpers/scripted-llm.js';

/**
 * Whole conversations: a scripted agent (this test) talks to tau2's user simulator, whose LLM is a
 * scripted OpenAI-compatible server on loopback; the same server plays the NL-assertion judge.
 */
let llm: ScriptedLlm;
const userRequests: ChatRequest[] = [];
before(async () => {
  llm = await startScriptedLlm((req) => {
    if (req.response_format) {
      const outcomes = [...String(req.messages[1].content).matchAll(/'([^']+)'/g)].map((m) => m[1]);
      return {
        content: JSON.stringify({
          results: outcomes.map((o) => ({ expectedOutcome: o, reasoning: 'ok', metExpectation: true })),
        }),
      };
    }
    userRequests.push(req);
    const agentTurns = req.messages.filter((m) => m.role === 'user').length;
    return { content: agentTurns === 1 ? 'Hi, I need help with my booking.' : 'Great, thank you! ###STOP###' };
  });
});
after(() => llm.close());

const client = () => new OpenAI({ baseURL: llm.baseURL, apiKey: 'test' });

async function converse(domain: Tau2DomainName, taskId: string, script: (ep: Episode) => Promise<Message[]>) {
  const env = createTau2Environment(domain, {
    userSimulator: { client: client(), model: 'user-sim', temperature: 0, seed: 300 },
    judge: { client: client(), model: 'judge' },
  });
  const ep = await env.reset({ taskId });
  const opening = ep.initialMessages();
  assert.deepEqual(opening[0], { role: 'assistant', content: GREETING });
  assert.deepEqual(opening[1], { role: 'user', content: 'Hi, I need help with my booking.' });
  const rest = await script(ep);
  return { ep, messages: [...opening, ...rest] };
}

/** Runs the task's gold actions as the agent's tool calls, then says `closing`; returns the messages. */
async function goldAgent(
  ep: Episode,
  domain: Tau2DomainName,
  taskId: string,
  closing: string,
): Promise<{ messages: Message[]; last: Awaited<ReturnType<Episode['step']>> }> {
  const task = loadTasks(domain).find((t) => t.id === taskId)!;
  const messages: Message[] = [];
  for (const [i, a] of (task.evaluation_criteria?.actions ?? []).entries()) {
    const call = {
      id: `call_${i}`,
      type: 'function' as const,
      function: { name: a.name, arguments: JSON.stringify(a.arguments) },
    };
    messages.push({ role: 'assistant', content: null, tool_calls: [call] });
    const r = await ep.step({ type: 'tool_call', call });
    assert.equal(r.done, false);
    messages.push(r.observation);
  }
  messages.push({ role: 'assistant', content: closing });
  const last = await ep.step({ type: 'message', content: closing });
  messages.push(last.observation);
  return { messages, last };
}

test('airline: the agent completes task 11 with the simulated user and scores 1', async () => {
  let last!: Awaited<ReturnType<Episode['step']>>;
  const { ep, messages } = await converse('airline', '11', async (e) => {
    const r = await goldAgent(
      e,
      'airline',
      '11',
      'Your flights are changed to basic economy; $5,244 will be refunded to your gift card.',
    );
    last = r.last;
    return r.messages;
  });
  assert.equal(last.done, true);
  assert.equal(last.termination, 'user_stop');
  const info = await ep.evaluate(messages, 'user_stop');
  assert.deepEqual(info.components, { DB: 1, COMMUNICATE: 1 });
  assert.equal(info.success, true);

  const sys = String(userRequests.at(-1)!.messages[0].content);
  assert.match(sys, /<scenario>\nInstructions:\n\tDomain: airline\n\tReason for call:\n/);
  assert.ok(sys.endsWith('</scenario>'));
  // Roles are flipped for the simulator: the agent speaks as `user`, the simulated user as `assistant`.
  const flipped = userRequests
    .at(-1)!
    .messages.slice(1)
    .map((m) => m.role);
  assert.deepEqual(flipped, ['user', 'assistant', 'user']);
  assert.equal(userRequests.at(-1)!.messages[1].content, GREETING);
  assert.deepEqual(
    [userRequests.at(-1)!.model, userRequests.at(-1)!.temperature, userRequests.at(-1)!.seed],
    ['user-sim', 0, 300],
  );
});

test('retail: the agent completes task 36 (DB + NL_ASSERTION judged over HTTP) and scores 1', async () => {
  const { ep, messages } = await converse(
    'retail',
    '36',
    async (e) =>
      (await goldAgent(e, 'retail', '36', 'The camera is the most expensive item, at $481.50. The items are modified.'))
        .messages,
  );
  const info = await ep.evaluate(messages, 'user_stop');
  assert.deepEqual(info.components, { DB: 1, NL_ASSERTION: 1 });
  assert.equal(info.reward, 1);
});

test('airline: an agent that cancels but never books fails task 14 on the DB check', async () => {
  const { ep, messages } = await converse('airline', '14', async (e) => {
    const call = {
      id: 'c0',
      type: 'function' as const,
      function: { name: 'cancel_reservation', arguments: JSON.stringify({ reservation_id: 'K1NW8N' }) },
    };
    const r = await e.step({ type: 'tool_call', call });
    assert.match(r.observation.content ?? '', /"status": "cancelled"/);
    const closing = 'Cancelled. Your refund totals: 327, 1000 and 1786.';
    const end = await e.step({ type: 'message', content: closing });
    assert.equal(end.termination, 'user_stop');
    return [
      { role: 'assistant', content: null, tool_calls: [call] },
      r.observation,
      { role: 'assistant', content: closing },
      end.observation,
    ];
  });
  const info = await ep.evaluate(messages, 'user_stop');
  assert.equal(info.reward, 0);
  assert.deepEqual(info.components, { DB: 0, COMMUNICATE: 1 });
  assert.deepEqual((info.details as { db_check: unknown }).db_check, {
    db_match: false,
    db_reward: 0,
    agent_db_match: false,
    user_db_match: true,
  });
});

test('fork gives an independent copy of the episode state', async () => {
  const env = createTau2Environment('airline');
  const ep = await env.reset({ taskId: '14' });
  assert.deepEqual(ep.initialMessages(), [{ role: 'assistant', content: GREETING }]);
  const copy = await ep.fork();
  const cancel = {
    id: 'c',
    type: 'function' as const,
    function: { name: 'cancel_reservation', arguments: '{"reservation_id": "K1NW8N"}' },
  };
  await ep.step({ type: 'tool_call', call: cancel });
  const get = {
    id: 'g',
    type: 'function' as const,
    function: { name: 'get_reservation_details', arguments: '{"reservation_id": "K1NW8N"}' },
  };
  const inCopy = await copy.step({ type: 'tool_call', call: get });
  const inOriginal = await ep.step({ type: 'tool_call', call: get });
  assert.match(inOriginal.observation.content ?? '', /"status": "cancelled"/);
  assert.match(inCopy.observation.content ?? '', /"status": null/);
  await assert.rejects(ep.step({ type: 'message', content: 'hello' }), /needs a user simulator/);
  const bad = await ep.step({
    type: 'tool_call',
    call: { id: 'b', type: 'function', function: { name: 'nope', arguments: '{}' } },
  });
  assert.deepEqual([bad.error, bad.observation.content], [true, "Error: Tool 'nope' not found."]);
});

test('listTasks carries the train/test split; the system prompt is tau2 instructions + policy', async () => {
  const env = createTau2Environment('retail');
  const tasks = await env.listTasks();
  assert.equal(tasks.length, 114);
  assert.deepEqual(new Set(tasks.map((t) => t.split)), new Set(['train', 'test']));
  assert.match(
    env.systemPrompt(),
    /^<instructions>\nYou are a customer service agent that helps the user according to the <policy> provided below\./,
  );
  assert.match(env.systemPrompt(), /<\/instructions>\n<policy>\n# Retail agent policy/);
  assert.equal(env.tools().length, 16);
  assert.equal((await createTau2Environment('airline', { taskSet: 'legacy' }).listTasks()).length, 50);
  await assert.rejects(env.reset({ taskId: 'nope' }), /taskId: 'nope'/);
});
