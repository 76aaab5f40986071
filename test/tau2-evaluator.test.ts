import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import OpenAI from 'openai';
import type { Message } from '../core/messages.js';
import { evaluateTau2, getDomain, loadTasks, type Tau2DomainName } from '../envs/tau2/index.js';
import { Tau2State } from '../envs/tau2/state.js';
import { startScriptedLlm, type ChatRequest, type ScriptedLlm } from './helpers/scripted-llm.js';

const task = (domain: Tau2DomainName, id: string, set: 'current' | 'legacy' = 'current') => {
  const t = loadTasks(domain, set).find((x) => x.id === id);
  assert.ok(t, `${domain} task ${id}`);
  return t;
};
let n = 0;
/** A tool call and its real output (run on a scratch env so outputs are what the episode would show). */
function toolTurn(state: Tau2State, name: string, args: Record<string, unknown>): Message[] {
  const id = `call_${n++}`;
  const out = state.call('assistant', name, args);
  return [
    {
      role: 'assistant',
      content: null,
      tool_calls: [{ id, type: 'function', function: { name, arguments: JSON.stringify(args) } }],
    },
    { role: 'tool', tool_call_id: id, content: out.content },
  ];
}
const say = (content: string): Message => ({ role: 'assistant', content });
const eval_ = (
  domain: Tau2DomainName,
  id: string,
  messages: Message[],
  extra: Partial<Parameters<typeof evaluateTau2>[0]> = {},
) => evaluateTau2({ domain: getDomain(domain), task: task(domain, id), messages, termination: 'user_stop', ...extra });

function goldTurns(domain: Tau2DomainName, id: string): Message[] {
  const t = task(domain, id);
  const state = Tau2State.forTask(getDomain(domain), t);
  return (t.evaluation_criteria?.actions ?? []).flatMap((a) => toolTurn(state, a.name, a.arguments));
}

test('premature termination scores 0 whatever the trajectory', async () => {
  for (const termination of ['max_steps', 'max_errors', 'timeout', 'error'] as const) {
    const info = await eval_('airline', '11', [...goldTurns('airline', '11'), say('refund 5244')], { termination });
    assert.equal(info.reward, 0);
    assert.equal(info.success, false);
    assert.match(String(info.details?.note), new RegExp(`terminated prematurely.*${termination}`));
  }
});

test('DB + COMMUNICATE: gold actions and the communicated value give 1; each missing part gives 0', async () => {
  const full = await eval_('airline', '11', [...goldTurns('airline', '11'), say('You will get a refund of $5,244.')]);
  assert.deepEqual(full.components, { DB: 1, COMMUNICATE: 1 });
  assert.equal(full.reward, 1);
  assert.equal(full.success, true);

  const silent = await eval_('airline', '11', [...goldTurns('airline', '11'), say('All done.')]);
  assert.deepEqual(silent.components, { DB: 1, COMMUNICATE: 0 });
  assert.equal(silent.reward, 0);

  const scratch = Tau2State.forTask(getDomain('airline'), task('airline', '11'));
  const wrong = toolTurn(scratch, 'update_reservation_flights', {
    reservation_id: 'GV1N64',
    cabin: 'economy',
    flights: [
      { flight_number: 'HAT003', date: '2024-05-19' },
      { flight_number: 'HAT290', date: '2024-05-20' },
    ],
    payment_id: 'gift_card_1642017',
  });
  const wrongDb = await eval_('airline', '11', [...wrong, say('refund 5244')]);
  assert.deepEqual(wrongDb.components, { DB: 0, COMMUNICATE: 1 });
  assert.equal(wrongDb.success, false);
});

test('COMMUNICATE is a case-insensitive substring test after removing commas, on agent messages only', async () => {
  const t = task('airline', '14');
  const infos = t.evaluation_criteria!.communicate_info!;
  const gold = goldTurns('airline', '14');
  const ok = await eval_('airline', '14', [
    ...gold,
    say(`Totals: ${infos.map((x) => Number(x).toLocaleString('en-US')).join(' / ')}`),
  ]);
  assert.equal(ok.components.COMMUNICATE, 1);
  const userSaid = await eval_('airline', '14', [...gold, { role: 'user', content: infos.join(' ') }, say('ok')]);
  assert.equal(userSaid.components.COMMUNICATE, 0);
});

test('READ calls do not change the DB: a trajectory of reads only fails a task whose gold writes', async () => {
  const state = Tau2State.forTask(getDomain('airline'), task('airline', '11'));
  const info = await eval_('airline', '11', [
    ...toolTurn(state, 'get_reservation_details', { reservation_id: 'GV1N64' }),
    say('5244'),
  ]);
  assert.equal(info.components.DB, 0);
  const readOnlyTask = await eval_('airline', '3', [
    ...toolTurn(state, 'get_user_details', { user_id: 'anya_garcia_5901' }),
    say('you may bring 4 bags'),
  ]);
  assert.deepEqual(readOnlyTask.components, { DB: 1, COMMUNICATE: 1 });
});

test('legacy tasks default to reward_basis [DB, COMMUNICATE]', async () => {
  const t = task('airline', '0', 'legacy');
  assert.deepEqual(t.evaluation_criteria!.reward_basis, ['DB', 'COMMUNICATE']);
  const info = await evaluateTau2({
    domain: getDomain('airline'),
    task: t,
    messages: [say('I cannot cancel that.')],
    termination: 'agent_stop',
  });
  assert.deepEqual(info.components, { DB: 1, COMMUNICATE: 1 });
});

test('ACTION: gold actions must appear as tool calls (compare_args [] matches any arguments)', async () => {
  const state = Tau2State.forTask(getDomain('mock'), task('mock', 'impossible_task_1'));
  const transferred = await eval_(
    'mock',
    'impossible_task_1',
    toolTurn(state, 'transfer_to_human_agents', { summary: 'anything' }),
  );
  assert.deepEqual(transferred.components, { DB: 1, ACTION: 1 });
  const not = await eval_('mock', 'impossible_task_1', [say('I cannot do that.')]);
  assert.deepEqual(not.components, { DB: 1, ACTION: 0 });
});

test('ENV_ASSERTION: assertions run on the predicted environment (message history included)', async () => {
  const t = task('mock', 'update_task_with_history_and_env_assertions');
  const state = Tau2State.forTask(getDomain('mock'), t);
  const history = (await import('../envs/tau2/state.js')).historyAsMessages(t.initial_state!.message_history!);
  const done = await eval_('mock', t.id, [
    ...history,
    ...toolTurn(state, 'update_task_status', { task_id: 'task_2', status: 'completed' }),
  ]);
  assert.deepEqual(done.components, { ENV_ASSERTION: 1 });
  const notDone = await eval_('mock', t.id, history);
  assert.deepEqual(notDone.components, { ENV_ASSERTION: 0 });
});

let llm: ScriptedLlm;
const judgeRequests: ChatRequest[] = [];
let verdict = true;
before(async () => {
  llm = await startScriptedLlm((req) => {
    judgeRequests.push(req);
    const outcomes = [...String(req.messages[1].content).matchAll(/'([^']+)'/g)].map((m) => m[1]);
    return {
      content: JSON.stringify({
        results: outcomes.map((o) => ({ expectedOutcome: o, reasoning: 'scripted', metExpectation: verdict })),
      }),
    };
  }, 'judge-model');
});
after(() => llm.close());

test('NL_ASSERTION: the judge LLM grades every assertion (structured output); all must hold', async () => {
  const judge = { client: new OpenAI({ baseURL: llm.baseURL, apiKey: 'test' }), model: 'judge-model' };
  const messages = [...goldTurns('retail', '36'), say('The most expensive item is the camera at $481.50.')];
  verdict = true;
  const yes = await eval_('retail', '36', messages, { judge });
  assert.deepEqual(yes.components, { DB: 1, NL_ASSERTION: 1 });
  assert.equal(yes.success, true);
  verdict = false;
  const no = await eval_('retail', '36', messages, { judge });
  assert.deepEqual(no.components, { DB: 1, NL_ASSERTION: 0 });
  const req = judgeRequests.at(-1)!;
  assert.equal(req.model, 'judge-model');
  assert.equal(req.response_format?.type, 'json_schema');
  assert.match(String(req.messages[0].content), /^\n {8}TASK\n/);
  assert.match(String(req.messages[1].content), /conversation:\n {8}assistant: None\ntool: /);
  assert.match(
    String(req.messages[1].content),
    /expectedOutcomes:\n {8}\['Agent should tell the user the most expensive item in the order is the camera\.', /,
  );
  await assert.rejects(eval_('retail', '36', messages), /NL_ASSERTION but no judge/);
});
