import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  decidePromotion,
  emptyLineage,
  promotedChain,
  recordOutcome,
  PromotionPolicySchema,
  type AgentSpec,
  type LineageRecord,
} from '../core/promotion.js';

const agent = (id: string): AgentSpec => ({ id, kind: 'trace', adapters: [] });
const policy = PromotionPolicySchema.parse({ margin: 0.05 });

test('promotes only when the candidate beats the current agent by the margin', () => {
  const current = { agent: agent('base'), passRate: 0.4, tasks: 20 };
  assert.equal(
    decidePromotion({ agent: agent('a'), passRate: 0.45, tasks: 20 }, current, policy).promote,
    true,
    'exactly the margin counts',
  );
  const below = decidePromotion({ agent: agent('a'), passRate: 0.44, tasks: 20 }, current, policy);
  assert.equal(below.promote, false);
  assert.match(below.reason, /below margin/);
  assert.equal(
    decidePromotion(
      { agent: agent('a'), passRate: 0.4, tasks: 20 },
      current,
      PromotionPolicySchema.parse({ margin: 0 }),
    ).promote,
    false,
    'a tie never promotes',
  );
  assert.equal(decidePromotion({ agent: agent('a'), passRate: 0.9, tasks: 0 }, current, policy).promote, false);
});

test('significance, when required, needs the delta interval above zero', () => {
  const strict = PromotionPolicySchema.parse({ margin: 0.05, requireSignificant: true });
  const current = { agent: agent('base'), passRate: 0.4, tasks: 20 };
  const cand = { agent: agent('a'), passRate: 0.6, tasks: 20 };
  assert.equal(
    decidePromotion(cand, current, strict, { estimate: 0.2, low: -0.01, high: 0.4, method: 'bootstrap', n: 20 })
      .promote,
    false,
  );
  assert.equal(
    decidePromotion(cand, current, strict, { estimate: 0.2, low: 0.02, high: 0.4, method: 'bootstrap', n: 20 }).promote,
    true,
  );
  assert.equal(decidePromotion(cand, current, strict).promote, false);
});

test('lineage: current changes only on promotion; re-recording a run is idempotent', () => {
  const rec = (runId: string, promoted: boolean, parent: string | null): LineageRecord => ({
    runId,
    agent: agent(`${runId}:trace`),
    parentAgentId: parent,
    passRate: 0.5,
    parentPassRate: 0.4,
    promoted,
    reason: 'test',
    at: '2026-11-29T21:00:00Z',
  });
  let l = recordOutcome(emptyLineage(), rec('r1', true, 'base'));
  assert.equal(l.current?.id, 'r1:trace');
  l = recordOutcome(l, rec('r2', false, 'r1:trace'));
  assert.equal(l.current?.id, 'r1:trace');
  l = recordOutcome(l, rec('r2', true, 'r1:trace'));
  assert.equal(l.records.length, 2);
  l = recordOutcome(l, rec('r3', true, 'r1:trace'));
  assert.equal(l.current?.id, 'r3:trace');
  assert.deepEqual(
    promotedChain(l).map((r) => r.runId),
    ['r1', 'r3'],
  );
});
