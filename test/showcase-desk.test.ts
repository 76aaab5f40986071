import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Message } from '../core/messages.js';
import type { Termination } from '../core/trajectory.js';
import { actionMessage, type AgentAction, type Environment } from '../envs/environment.js';
import { parseConfig } from '../core/config.js';
import { openEnvironment } from '../envs/registry.js';
import { CONFIRM, createShowcaseDeskEnv, DESK_TASKS } from '../envs/showcase/desk.js';

const act = (name: string, args: Record<string, unknown>): AgentAction => ({
  type: 'tool_call',
  call: { id: `c_${name}`, type: 'function', function: { name, arguments: JSON.stringify(args) } },
});

/** Plays actions from a fresh episode of `taskId` until done; returns the reward and each step's result. */
async function play(env: Environment, taskId: string, actions: AgentAction[]) {
  const ep = await env.reset({ taskId });
  const messages: Message[] = ep.initialMessages();
  const steps = [];
  let termination: Termination = 'agent_stop';
  for (const a of actions) {
    messages.push(actionMessage(a));
    const r = await ep.step(a);
    messages.push(r.observation);
    steps.push(r);
    if (r.done) {
      termination = r.termination ?? 'agent_stop';
      break;
    }
  }
  return { steps, info: await ep.evaluate(messages, termination) };
}

test('showcase-desk: ≥ 40 tasks, a fixed 20/24 train/test split, the same on every build', async () => {
  const a = await createShowcaseDeskEnv().listTasks();
  const b = await createShowcaseDeskEnv().listTasks();
  assert.deepEqual(a, b);
  assert.ok(a.length >= 40);
  assert.equal(a.filter((t) => t.split === 'train').length, 20);
  assert.equal(a.filter((t) => t.split === 'test').length, 24);
  assert.equal(new Set(a.map((t) => t.id)).size, a.length);
  for (const split of ['train', 'test']) {
    const kinds = DESK_TASKS.filter((t) => t.split === split).map((t) => t.kind);
    assert.equal(kinds.filter((k) => k === 'by_name').length, kinds.length / 2, `${split}: half by name, half by code`);
  }
  // Pinned so a change to the generator (and with it every measured number) is deliberate.
  assert.equal(DESK_TASKS[0].opening, 'Cancel my booking ZU4SK, thanks.');
  assert.equal(DESK_TASKS[43].opening, "Cancel Fatima Hernandez's booking, thanks.");
  const env = await openEnvironment(parseConfig({ env: { name: 'showcase-desk' } }).env, {
    config: parseConfig({ env: { name: 'showcase-desk' } }),
  });
  assert.equal(env.info.kind, 'target');
  assert.deepEqual(
    env.tools().map((t) => t.function.name),
    ['find_booking', 'cancel_booking'],
  );
});

test('showcase-desk: gold replay scores 1 on every task and ends at the cancellation', async () => {
  const env = createShowcaseDeskEnv();
  for (const t of DESK_TASKS) {
    const { steps, info } = await play(env, t.id, t.gold);
    assert.equal(info.reward, 1, t.id);
    assert.equal(info.success, true);
    assert.equal(steps.length, t.gold.length);
    assert.deepEqual(
      { done: steps.at(-1)!.done, termination: steps.at(-1)!.termination },
      { done: true, termination: 'agent_stop' },
    );
  }
});

test('showcase-desk: wrong or missing actions score 0', async () => {
  const env = createShowcaseDeskEnv();
  const byName = DESK_TASKS.find((t) => t.kind === 'by_name')!;
  const target = JSON.parse((byName.gold[1] as Extract<AgentAction, { type: 'tool_call' }>).call.function.arguments)
    .booking_code as string;
  const other = Object.keys(byName.initialState.bookings).find((c) => c !== target)!;
  assert.equal(
    (await play(env, byName.id, [act('cancel_booking', { booking_code: other })])).info.reward,
    0,
    'another guest cancelled',
  );
  assert.equal(
    (await play(env, byName.id, [{ type: 'message', content: 'Your booking is cancelled.' }])).info.reward,
    0,
    'claimed without acting',
  );
  assert.equal(
    (
      await play(env, byName.id, [
        act('find_booking', { guest: 'Nobody Here' }),
        act('find_booking', { guest: 'x' }),
        act('find_booking', { guest: 'y' }),
        act('find_booking', { guest: 'z' }),
      ])
    ).info.reward,
    0,
  );
  const msg = await play(env, byName.id, [
    byName.gold[0],
    { type: 'message', content: 'Found it. Shall I cancel?' },
    { type: 'message', content: 'Bye.' },
  ]);
  assert.deepEqual(
    msg.steps.slice(1).map((r) => [r.observation.content, r.done, r.termination]),
    [
      [CONFIRM, false, undefined],
      ['###STOP###', true, 'user_stop'],
    ],
    'the first message is confirmed, the second ends it',
  );
  assert.equal(msg.info.reward, 0, 'looked up but did not cancel');
  const asked = await play(env, byName.id, [
    byName.gold[0],
    { type: 'message', content: 'Shall I cancel it?' },
    byName.gold[1],
  ]);
  assert.equal(asked.info.reward, 1, 'asking before acting is fine');
});

test('showcase-desk: tool errors are observations, and the episode is capped at 4 actions', async () => {
  const env = createShowcaseDeskEnv();
  const t = DESK_TASKS[0];
  const ep = await env.reset({ taskId: t.id });
  const cases: [AgentAction, RegExp][] = [
    [act('cancel_booking', { booking_code: '12345' }), /^Error: no booking with code '12345'/],
    [
      {
        type: 'tool_call',
        call: { id: 'c', type: 'function', function: { name: 'cancel_booking', arguments: '{"booking_code":' } },
      },
      /^Error: arguments of cancel_booking are not valid JSON/,
    ],
    [
      act('delete_everything', {}),
      /^Error: unknown tool 'delete_everything'. Available tools: find_booking, cancel_booking/,
    ],
  ];
  for (const [a, re] of cases) {
    const r = await ep.step(a);
    assert.equal(r.error, true);
    assert.equal(r.done, false);
    assert.equal(r.observation.role, 'tool');
    assert.match(r.observation.content as string, re);
  }
  const last = await ep.step(act('find_booking', { name: 'typo' }));
  assert.match(last.observation.content as string, /^Error: invalid arguments for find_booking/);
  assert.deepEqual({ done: last.done, termination: last.termination }, { done: true, termination: 'max_steps' });
  assert.equal((await ep.evaluate([], 'max_steps')).reward, 0);
  await assert.rejects(env.reset({ taskId: 'desk-99' }), /showcase-desk: unknown taskId 'desk-99'/);
});

test('showcase-desk: fork copies the state; the original is unaffected', async () => {
  const env = createShowcaseDeskEnv();
  const t = DESK_TASKS.find((x) => x.kind === 'by_code')!;
  const ep = await env.reset({ taskId: t.id });
  const copy = await ep.fork();
  await copy.step(t.gold[0]);
  assert.equal((await copy.evaluate([], 'agent_stop')).reward, 1);
  assert.equal((await ep.evaluate([], 'agent_stop')).reward, 0);
});
