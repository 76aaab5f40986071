import assert from 'node:assert/strict';
import { test } from 'node:test';
import OpenAI from 'openai';
import type { AgentAction, Episode } from '../envs/environment.js';
import { openEnvironment } from '../envs/registry.js';
import { createToolSandboxEnvironment } from '../envs/toolsandbox/environment.js';
import { parseConfig } from '../core/config.js';
import { startScriptedLlm, type ChatRequest, type ScriptedReply } from './helpers/scripted-llm.js';

/**
 * ToolSandbox as an Environment with a scripted user simulator on the OpenAI protocol: one scenario
 * completed with similarity 1, one failed for the reason its minefield names, and what the user
 * simulator is shown (upstream's prompt, few-shot dialogue, roles flipped, end_conversation).
 */
const call = (name: string, args: object, id = `call_${name}`): AgentAction => ({
  type: 'tool_call',
  call: { id, type: 'function', function: { name, arguments: JSON.stringify(args) } },
});
const say = (content: string): AgentAction => ({ type: 'message', content });

async function play(ep: Episode, actions: AgentAction[]) {
  const results = [];
  for (const a of actions) {
    const r = await ep.step(a);
    results.push(r);
    if (r.done) break;
  }
  return results;
}

async function withUser(
  replies: ScriptedReply[],
  fn: (requests: ChatRequest[], user: { client: OpenAI; model: string }) => Promise<void>,
) {
  const llm = await startScriptedLlm((_req, i) => replies[Math.min(i, replies.length - 1)]);
  try {
    await fn(llm.requests, { client: new OpenAI({ baseURL: llm.baseURL, apiKey: 'test' }), model: 'scripted-model' });
  } finally {
    await llm.close();
  }
}

test('toolsandbox: offline base scenarios listed, RapidAPI ones skipped with a count; each episode shows its own allow list', async () => {
  const env = createToolSandboxEnvironment();
  const tasks = await env.listTasks();
  assert.equal(env.info.name, 'toolsandbox');
  assert.match(env.info.description, /skipped \d+ \(.*38 need RapidAPI \(network\)/);
  assert.ok(tasks.length >= 80 && tasks.length <= 91, String(tasks.length));
  assert.ok(
    !tasks.some((t) => t.id.includes('weather') || t.id.includes('stock')),
    'a RapidAPI scenario is offered offline',
  );
  const ep = await env.reset({ taskId: 'cellular_off' });
  assert.deepEqual(
    ep.tools!().map((t) => t.function.name),
    ['set_cellular_service_status'],
  );
  assert.deepEqual(ep.initialMessages(), [{ role: 'user', content: 'Turn off cellular' }]);
  assert.equal(
    env.systemPrompt(),
    "Don't make assumptions about what values to plug into functions. Ask for clarification if a user request is ambiguous.",
  );
  // A category env keeps only that category's scenarios; the registry opens both names.
  const single = await openEnvironment(parseConfig({ env: { name: 'toolsandbox-single_tool_call' } }).env, {
    config: parseConfig({ env: { name: 'toolsandbox-single_tool_call' } }),
  });
  const singleTasks = await single.listTasks();
  assert.ok(singleTasks.length > 0 && singleTasks.length < tasks.length);
  assert.ok(singleTasks.some((t) => t.id === 'cellular_off'));
  await assert.rejects(
    () => env.reset({ taskId: 'search_weather_around_lat_lon' }),
    /not a toolsandbox scenario|cannot run offline/,
  );
  assert.throws(() => createToolSandboxEnvironment({ category: 'nope' }), /unknown category 'nope'/);
});

test('toolsandbox: a scripted conversation completes cellular_off with similarity 1; the user ends it with end_conversation', async () => {
  await withUser([{ toolCalls: [{ name: 'end_conversation', arguments: '{}' }] }], async (requests, user) => {
    const env = createToolSandboxEnvironment({ userSimulator: user });
    const ep = await env.reset({ taskId: 'cellular_off' });
    const rs = await play(ep, [
      call('set_cellular_service_status', { on: false }),
      say('Cellular service is turned off'),
    ]);
    assert.equal(rs[0].observation.content, 'None');
    assert.equal(rs[0].error, false);
    assert.equal(rs.at(-1)!.done, true);
    assert.equal(rs.at(-1)!.termination, 'user_stop');
    const info = await ep.evaluate([], 'user_stop');
    assert.equal(info.reward, 1);
    assert.equal(info.success, true);
    // What the user simulator saw: its few-shot system prompt and dialogue, the scenario's prompt,
    // its own first turn as `assistant`, the agent's reply as `user`, and end_conversation as its tool.
    const req = requests[0];
    assert.equal(req.messages[0].role, 'system');
    assert.equal(req.messages[1].content, 'I want to send a message to someone.');
    const scenarioPrompt = req.messages.map((m) => m.role).lastIndexOf('system');
    assert.match(String(req.messages[scenarioPrompt].content), /Turn off cellular service$/);
    assert.deepEqual(req.messages.slice(scenarioPrompt + 1), [
      { role: 'assistant', content: 'Turn off cellular' },
      { role: 'user', content: 'Cellular service is turned off' },
    ]);
    assert.deepEqual(
      req.tools?.map((t) => t.function.name),
      ['end_conversation'],
    );
  });
});

test('toolsandbox: the same conversation without the tool call scores below 1 (the SETTING milestone is unmet)', async () => {
  await withUser([{ toolCalls: [{ name: 'end_conversation', arguments: '{}' }] }], async (_r, user) => {
    const ep = await createToolSandboxEnvironment({ userSimulator: user }).reset({ taskId: 'cellular_off' });
    await play(ep, [say('Cellular service is turned off')]);
    const info = await ep.evaluate([], 'user_stop');
    assert.ok(info.reward < 1, String(info.reward));
    assert.equal(info.success, false);
    assert.equal(info.components.minefield_similarity, 0);
  });
});

test('toolsandbox: removing a contact without being able to look it up hits the minefield, so similarity is 0', async () => {
  await withUser(
    [{ content: 'Yes, go ahead.' }, { toolCalls: [{ name: 'end_conversation', arguments: '{}' }] }],
    async (_r, user) => {
      const env = createToolSandboxEnvironment({ userSimulator: user });
      const id = 'remove_contact_by_phone_no_search_contacts_insufficient_information';
      // The honest answer (no tool can find the contact's id) scores 1: the scenario has no milestone to miss.
      const honest = await env.reset({ taskId: id });
      await play(honest, [say("I can't look contacts up by phone number, so I cannot remove it.")]);
      assert.equal((await honest.evaluate([], 'user_stop')).reward, 1);
      // Guessing an id and calling remove_contact is what the minefield forbids: 0 whatever else happened.
      const ep = await env.reset({ taskId: id });
      const rs = await play(ep, [
        call('remove_contact', { person_id: '9e137f06-916a-5310-8174-cf0b7e9f7054' }),
        say('Done, removed.'),
      ]);
      assert.equal(rs[0].observation.content, 'None');
      const info = await ep.evaluate([], 'user_stop');
      assert.equal(info.components.minefield_similarity, 1);
      assert.equal(info.reward, 0);
      assert.equal(info.success, false);
    },
  );
});

test('toolsandbox: a tool outside the scenario allow list and unparsable arguments are errors the agent sees', async () => {
  const ep = await createToolSandboxEnvironment().reset({ taskId: 'cellular_off' });
  const r = await ep.step(call('set_wifi_status', { on: false }));
  assert.equal(r.error, true);
  assert.match(r.observation.content ?? '', /is not a known allowed tool/);
  const bad = await ep.step({
    type: 'tool_call',
    call: { id: 'c2', type: 'function', function: { name: 'set_cellular_service_status', arguments: '{on: false' } },
  });
  assert.equal(bad.error, true);
  const fork = await ep.fork();
  await fork.step(call('set_cellular_service_status', { on: false }));
  // The fork's change does not reach the original episode.
  const cellular = (e: Episode) =>
    (e as unknown as { context(): { getDatabase(ns: string): Record<string, unknown>[] } })
      .context()
      .getDatabase('SETTING')[0].cellular;
  assert.equal(cellular(fork), false);
  assert.equal(cellular(ep), true);
  await assert.rejects(() => ep.step(say('hello')), /needs the user simulator/);
});

test("toolsandbox: a step's signal aborts the user simulator's request in flight", async () => {
  const llm = await startScriptedLlm(() => ({ hang: true }));
  try {
    const user = {
      client: new OpenAI({ baseURL: llm.baseURL, apiKey: 'test', maxRetries: 0 }),
      model: 'scripted-model',
    };
    const ep = await createToolSandboxEnvironment({ userSimulator: user }).reset({ taskId: 'cellular_off' });
    const ac = new AbortController();
    const step = ep.step(say('Cellular service is turned off'), { signal: ac.signal });
    step.catch(() => undefined);
    // Guards against hanging (before, nothing aborted the request), not latency bounds.
    for (let i = 0; i < 3000 && llm.requests.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
    assert.equal(llm.requests.length, 1, 'the user simulator was asked');
    ac.abort(new Error('episode cancelled'));
    for (let i = 0; i < 3000 && llm.disconnects.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
    assert.equal(llm.disconnects.length, 1, 'the endpoint saw its client go');
    await assert.rejects(step, /abort|cancel/i);
  } finally {
    await llm.close();
  }
});

test('toolsandbox over the env protocol: the episode still shows its own allow list', async () => {
  const { serveEnvironment } = await import('../envs/protocol/server.js');
  const { HttpEnvironment } = await import('../envs/protocol/client.js');
  const served = await serveEnvironment(createToolSandboxEnvironment());
  try {
    const env = await HttpEnvironment.connect(served.url);
    const ep = await env.reset({ taskId: 'cellular_off' });
    assert.deepEqual(
      ep.tools?.().map((t) => t.function.name),
      ['set_cellular_service_status'],
    );
    assert.ok(env.tools().length > 10, 'the env-wide union is larger');
    assert.deepEqual(
      (await ep.fork()).tools?.().map((t) => t.function.name),
      ['set_cellular_service_status'],
    );
    await env.close();
  } finally {
    await served.close();
  }
});

test('toolsandbox-<variant>: an augmented variant opens through the registry; name scrambling reaches the agent and calls run the real tool', async () => {
  const name = 'toolsandbox-3_distraction_tools_tool_name_scrambled';
  const env = await openEnvironment(parseConfig({ env: { name } }).env, { config: parseConfig({ env: { name } }) });
  assert.equal(env.info.name, name);
  const ep = await env.reset({ taskId: 'cellular_off_3_distraction_tools_tool_name_scrambled' });
  const names = ep.tools!().map((t) => t.function.name);
  assert.ok(names.length === 4 && names.every((n) => /^setting_\d+$/.test(n)), names.join(', '));
  // The agent-facing name of set_cellular_service_status, from the data's scrambling map.
  const scrambled = (
    JSON.parse(
      (await import('node:fs')).readFileSync(
        new URL('../data/toolsandbox/derived/tools_openai_schema.json', import.meta.url),
        'utf8',
      ),
    ) as { scrambled_names: Record<string, string> }
  ).scrambled_names.set_cellular_service_status;
  const r = await ep.step(call(scrambled, { on: false }));
  assert.equal(r.error, false);
  assert.equal(
    (await ep.step(call('set_cellular_service_status', { on: false }))).error,
    true,
    'the execution-facing name is not offered',
  );
  assert.equal((await ep.evaluate([], 'agent_stop')).components.milestone_similarity > 0, true);
});
