import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { importTau2Results, Tau2ImportError } from '../cli/import-tau2.js';
import { compactTrajectory } from '../core/compaction.js';

const fixture = readFileSync(new URL('./fixtures/tau2-results.json', import.meta.url), 'utf8');

test('tau2 results become trajectories: agent view only, ids paired, reward components and termination mapped', () => {
  const [a, b] = importTau2Results(fixture);
  assert.equal(a.id, 'sim-a');
  assert.equal(a.env, 'tau2-airline');
  assert.equal(a.taskId, '7');
  assert.equal(a.seed, 301);
  assert.equal(a.model, 'gpt-4.1-mini');
  assert.equal(a.success, true);
  assert.equal(a.termination, 'user_stop');
  assert.deepEqual(a.rewardInfo.components, { DB: 1, COMMUNICATE: 1 });
  assert.equal(a.durationMs, 30250);
  assert.deepEqual(a.usage, { promptTokens: 5400, completionTokens: 78, calls: 4 });
  assert.equal(a.steps, 6); // greeting, 2 + 1 tool calls, 2 more texts
  assert.deepEqual(a.messages[0], {
    role: 'system',
    content: '# Airline Agent Policy\nOnly cancel within 24h of booking.',
  });
  assert.deepEqual(
    a.messages.map((m) => m.role),
    [
      'system',
      'assistant',
      'user',
      'assistant',
      'tool',
      'tool',
      'assistant',
      'user',
      'assistant',
      'tool',
      'assistant',
      'user',
    ],
  );
  const call = a.messages[3];
  assert.ok(call.role === 'assistant' && call.tool_calls);
  assert.deepEqual(call.tool_calls[0], {
    id: 'call_2_0',
    type: 'function',
    function: { name: 'get_reservation_details', arguments: '{"reservation_id":"ABC123"}' },
  });
  assert.deepEqual(
    a.messages.filter((m) => m.role === 'tool').map((m) => m.role === 'tool' && m.tool_call_id),
    ['call_2_0', 'call_u', 'c9'],
  );
  assert.ok(
    !JSON.stringify(a.messages).includes('check_phone'),
    "the user's own tool calls are not in the agent's view",
  );

  assert.equal(b.taskId, '8');
  assert.equal(b.trial, 1);
  assert.equal(b.success, false);
  assert.equal(b.termination, 'max_errors');
  assert.deepEqual(b.rewardInfo.details, {
    tau2_termination_reason: 'too_many_errors',
    db_match: false,
    not_communicated: ['refund of 120'],
    missed_actions: ['send_certificate'],
  });
  assert.match(compactTrajectory(b, 2000), /not_communicated/);
});

test('bad input fails with an error naming the field', () => {
  const bad = (mutate: (d: any) => void) => {
    const d = JSON.parse(fixture);
    mutate(d);
    return () => importTau2Results(JSON.stringify(d));
  };
  assert.throws(
    bad((d) => (d.simulations[1].reward_info = null)),
    (e: Error) => e instanceof Tau2ImportError && /^tau2 results: simulations\.1\.reward_info: missing/.test(e.message),
  );
  assert.throws(
    bad((d) => (d.simulations[0].termination_reason = 'bored')),
    /simulations\.0\.termination_reason: expected one of/,
  );
  assert.throws(
    bad((d) => (d.simulations[0].messages[2].tool_calls[0].arguments = 'x')),
    /simulations\.0\.messages\.2/,
  );
  assert.throws(
    bad((d) => delete d.info.environment_info),
    /info\.environment_info/,
  );
  assert.throws(() => importTau2Results('{"simulations": ['), /not valid JSON/);
});

test('a single simulation file (dir format) imports when the env is named', () => {
  const sim = JSON.stringify(JSON.parse(fixture).simulations[1]);
  assert.throws(() => importTau2Results(sim), /pass the env name/);
  const [t] = importTau2Results(sim, { env: 'tau2-retail', model: 'm' });
  assert.equal(t.env, 'tau2-retail');
  assert.equal(t.model, 'm');
  assert.equal(t.messages[0].role, 'user');
});
