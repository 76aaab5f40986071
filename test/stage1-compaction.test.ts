import { test } from 'node:test';
import assert from 'node:assert/strict';
import { compactTrajectory, truncate } from '../core/compaction.js';
import type { Message } from '../core/messages.js';
import type { Trajectory } from '../core/trajectory.js';

function trajectory(messages: Message[]): Trajectory {
  return {
    id: 'env/task-1/t0',
    env: 'env',
    taskId: 'task-1',
    trial: 0,
    model: 'm',
    messages,
    reward: 0,
    rewardInfo: {
      reward: 0,
      components: { DB: 0, COMMUNICATE: 1 },
      success: false,
      details: { notCommunicated: ['57.50'] },
    },
    success: false,
    termination: 'max_errors',
    usage: { promptTokens: 0, completionTokens: 0, calls: 0 },
    steps: messages.length,
    durationMs: 1,
  };
}

function longConversation(turns: number): Message[] {
  const msgs: Message[] = [
    { role: 'system', content: 'POLICY '.repeat(500) },
    { role: 'user', content: 'Please cancel order O-1.' },
  ];
  for (let i = 0; i < turns; i++) {
    msgs.push({
      role: 'assistant',
      content: null,
      tool_calls: [
        {
          id: `c${i}`,
          type: 'function',
          function: { name: 'get_order', arguments: JSON.stringify({ order_id: 'O-1', note: 'x'.repeat(2000) }) },
        },
      ],
    });
    msgs.push({ role: 'tool', tool_call_id: `c${i}`, content: `result ${i} ` + 'y'.repeat(5000) });
  }
  msgs.push({ role: 'assistant', content: 'FINAL ANSWER: cannot cancel.' });
  return msgs;
}

test('a short trajectory is rendered whole, without the system prompt, with its outcome header', () => {
  const t = trajectory([
    { role: 'system', content: 'policy text' },
    { role: 'user', content: 'hi' },
    {
      role: 'assistant',
      content: null,
      tool_calls: [{ id: 'a', type: 'function', function: { name: 'f', arguments: '{"x":1}' } }],
    },
    { role: 'tool', tool_call_id: 'a', content: 'ok' },
    { role: 'assistant', content: 'done' },
  ]);
  const text = compactTrajectory(t, 5000);
  assert.equal(
    text,
    [
      'trajectory env/task-1/t0 (task task-1, trial 0)',
      'outcome: FAILURE; reward 0 (COMMUNICATE=1, DB=0); termination: max_errors; 5 steps',
      'evaluation details: {"notCommunicated":["57.50"]}',
      '[1] user: hi',
      '[2] assistant: → f({"x":1})',
      '[3] tool result: ok',
      '[4] assistant: done',
    ].join('\n'),
  );
});

test('long trajectories fit the budget, keep outcome, opening and last messages, and are deterministic', () => {
  const t = trajectory(longConversation(40));
  for (const budget of [3000, 8000, 20000]) {
    const a = compactTrajectory(t, budget);
    assert.ok(a.length <= budget, `${a.length} ≤ ${budget}`);
    assert.equal(a, compactTrajectory(structuredClone(t), budget));
    assert.match(a, /termination: max_errors/);
    assert.match(a, /notCommunicated/);
    assert.match(a, /\[1\] user: Please cancel order O-1\./);
    assert.match(a, /FINAL ANSWER: cannot cancel\.$/);
    assert.match(a, /…\[truncated \d+ chars\]/);
    assert.doesNotMatch(a, /POLICY/);
  }
  const small = compactTrajectory(t, 3000);
  assert.match(small, /\[… \d+ messages omitted …\]/);
  assert.match(small, /result 39 /, 'the latest tool result survives');
  assert.doesNotMatch(small, /result 0 /, 'the middle goes first');
});

test('truncate marks how much was cut', () => {
  assert.equal(truncate('abcdef', 10), 'abcdef');
  assert.equal(truncate('abcdef', 2), 'ab…[truncated 4 chars]');
});
