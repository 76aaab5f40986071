import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import type { Message } from '../core/messages.js';
import {
  getDomain,
  goldReplayLine,
  loadTasks,
  replayGold,
  replayGoldAll,
  type Tau2DomainName,
} from '../envs/tau2/index.js';
import { evaluateEnvironment } from '../envs/tau2/evaluator.js';
import { historyAsMessages, Tau2State } from '../envs/tau2/state.js';
import { pyJsonDumps } from '../envs/tau2/python-format.js';

const fixture = (name: string) => readFileSync(new URL(`./fixtures/tau2/${name}`, import.meta.url), 'utf8');
const SETS: [Tau2DomainName, 'current' | 'legacy'][] = [
  ['airline', 'current'],
  ['retail', 'current'],
  ['mock', 'current'],
  ['airline', 'legacy'],
  ['retail', 'legacy'],
];

test('initial DB hashes equal tau2-bench reference values', () => {
  assert.equal(
    Tau2State.initial(getDomain('airline')).db.hash(),
    '124e39a664b56402bcd09cb8a6a9cece6acb8462337c969799d5658e3250f263',
  );
  assert.equal(
    Tau2State.initial(getDomain('retail')).db.hash(),
    'b25c9cb211f5efcaee5dd646054a73c4a9f43f4f5acc32c10713cd9f9ac20e9c',
  );
});

for (const [domain, set] of SETS) {
  test(`gold replay of every ${domain} ${set} task is byte-identical to tau2-bench's own output`, () => {
    const expected = fixture(`gold-replay-${domain}-${set}.jsonl`).trimEnd().split('\n');
    const got = replayGoldAll(domain, set).map(goldReplayLine);
    assert.equal(got.length, expected.length);
    assert.equal(got.length, { airline: 50, retail: 114, mock: 10 }[domain]);
    for (let i = 0; i < got.length; i++) assert.equal(got[i], expected[i], `task line ${i + 1}`);
  });
}

test('tool-call probes (errors, pydantic validation, calculate, quirks) match tau2-bench output', () => {
  const probes = JSON.parse(fixture('probes.json')) as {
    domain: Tau2DomainName;
    id: string;
    calls: { name: string; arguments: Record<string, unknown>; requestor?: 'user' | 'assistant' }[];
  }[];
  const expected = fixture('probes-expected.jsonl').trimEnd().split('\n');
  probes.forEach((p, i) => {
    const s = Tau2State.initial(getDomain(p.domain));
    const calls = p.calls.map((c) => {
      const out = s.call(c.requestor ?? 'assistant', c.name, c.arguments);
      return { name: c.name, error: out.error, output: out.content };
    });
    const line = pyJsonDumps({ task_id: p.id, db_hash: s.db.hash(), user_db_hash: s.userDb?.hash() ?? null, calls });
    assert.equal(line, expected[i], `probe ${p.id}`);
  });
});

/** The gold actions as an agent trajectory: one tool call per action, followed by its output. */
function goldTrajectory(domain: Tau2DomainName, taskId: string, set: 'current' | 'legacy'): Message[] {
  const task = loadTasks(domain, set).find((t) => t.id === taskId)!;
  const replay = replayGold(domain, task);
  const messages: Message[] = historyAsMessages(task.initial_state?.message_history ?? []);
  (task.evaluation_criteria?.actions ?? []).forEach((a, i) => {
    if (a.requestor === 'user') return;
    messages.push({
      role: 'assistant',
      content: null,
      tool_calls: [
        { id: `c${i}`, type: 'function', function: { name: a.name, arguments: JSON.stringify(a.arguments) } },
      ],
    });
    messages.push({ role: 'tool', tool_call_id: `c${i}`, content: replay.calls[i].output });
  });
  return messages;
}

for (const [domain, set] of SETS) {
  test(`evaluating the gold trajectory of every ${domain} ${set} task gives DB reward 1`, () => {
    let checked = 0;
    for (const task of loadTasks(domain, set)) {
      if (task.evaluation_criteria?.actions == null) continue;
      const env = evaluateEnvironment({
        domain: getDomain(domain),
        task,
        messages: goldTrajectory(domain, task.id, set),
        termination: 'agent_stop',
      });
      assert.equal(env.dbReward, 1, `task ${task.id}`);
      assert.deepEqual(env.mismatches, [], `task ${task.id}`);
      checked++;
    }
    assert.ok(checked >= { airline: 50, retail: 114, mock: 8 }[domain], `checked ${checked}`);
  });
}
