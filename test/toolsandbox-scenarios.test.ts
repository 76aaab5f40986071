import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadPack, loadScenarios } from '../envs/toolsandbox/scenarios.js';

/** The scenario data (data/toolsandbox/scenarios.json) loads, validates and has upstream's shape. */
test('129 base scenarios, 8 variants each; 38 need the network (RapidAPI)', () => {
  const all = loadScenarios();
  const base = all.filter((s) => s.variant === 'base');
  assert.equal(base.length, 129);
  assert.equal(all.length, 129 * 8);
  assert.equal(new Set(all.map((s) => s.name)).size, all.length);
  assert.equal(base.filter((s) => s.needsNetwork).length, 38);
  const count = (c: string) => base.filter((s) => s.categories.includes(c)).length;
  // Category sizes of the paper's Table 2 (a scenario can be in several).
  assert.deepEqual(
    {
      single_tool: count('SINGLE_TOOL_CALL'),
      multi_tool: count('MULTIPLE_TOOL_CALL'),
      single_turn: count('SINGLE_USER_TURN'),
      multi_turn: count('MULTIPLE_USER_TURN'),
      state: count('STATE_DEPENDENCY'),
      canon: count('CANONICALIZATION'),
      insufficient: count('INSUFFICIENT_INFORMATION'),
    },
    { single_tool: 19, multi_tool: 82, single_turn: 73, multi_turn: 28, state: 24, canon: 59, insufficient: 28 },
  );
});

test("a starting context opens with the shared prompts and the scenario's first user message", () => {
  const s = loadScenarios().find((x) => x.name === 'cellular_off')!;
  const ctx = s.startingContext();
  const user = ctx
    .getDatabase('SANDBOX', { allHistory: true, keepIndex: true })
    .filter((r) => r.sender === 'USER' && r.visible_to === null);
  assert.equal(user.at(-1)!.content, 'Turn off cellular');
  assert.equal(ctx.firstUserSandboxMessageIndex, user.at(-1)!.sandbox_message_index);
  assert.equal(ctx.getDatabase('SETTING')[0].cellular, true);
  assert.equal(s.evaluation.milestones.length, 2);
  // Every variant keeps its base scenario's evaluation.
  assert.ok(
    loadScenarios()
      .filter((x) => x.base === 'cellular_off')
      .every((x) => x.evaluation === s.evaluation),
  );
  assert.ok(Object.keys(loadPack().tool_modules).includes('set_cellular_service_status'));
});
