import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import type { Message } from '../core/messages.js';
import { createTau2Environment, loadTasks, type Tau2DomainName } from '../envs/tau2/index.js';
import { judgeMessages } from '../envs/tau2/nl-judge.js';
import { userSimulatorSystemPrompt } from '../envs/tau2/user-simulator.js';

/** Prompts recorded from tau2-bench itself (test/fixtures/tau2/generate_prompts.py). */
const expected = JSON.parse(
  readFileSync(new URL('./fixtures/tau2/prompts-expected.json', import.meta.url), 'utf8'),
) as {
  agent: Record<Tau2DomainName, string>;
  user: Record<string, string>;
  judge: { role: string; content: string }[];
};

test("agent system prompts equal tau2's LLMAgent.system_prompt", () => {
  for (const d of ['airline', 'retail', 'mock'] as const)
    assert.equal(createTau2Environment(d).systemPrompt(), expected.agent[d], d);
});

test("user simulator system prompts equal tau2's UserSimulator.system_prompt", () => {
  for (const [key, prompt] of Object.entries(expected.user)) {
    const [domain, id] = key.split('/') as [Tau2DomainName, string];
    const task = loadTasks(domain).find((t) => t.id === id)!;
    assert.equal(userSimulatorSystemPrompt(task, domain === 'mock'), prompt, key);
  }
});

test("NL-assertion judge messages equal tau2's", () => {
  const trajectory: Message[] = [
    { role: 'assistant', content: 'Hi! How can I help you today?' },
    { role: 'user', content: 'I\'d like a refund, it\'s "urgent".' },
    {
      role: 'assistant',
      content: null,
      tool_calls: [
        { id: '1', type: 'function', function: { name: 'get_user_details', arguments: '{"user_id": "u"}' } },
      ],
    },
    { role: 'tool', tool_call_id: '1', content: '{"user_id": "u"}' },
    { role: 'assistant', content: 'Done.' },
  ];
  assert.deepEqual(judgeMessages(trajectory, ['Agent refunds $5', 'Agent\'s tone is "polite"']), expected.judge);
});
