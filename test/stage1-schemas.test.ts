import { test } from 'node:test';
import assert from 'node:assert/strict';
import { discoveryOutputSchema, labelOutputSchema, sentenceCount } from '../core/capability.js';
import { canonicalDictionary, pickForDiscovery } from '../activities/stage1.js';
import type { Trajectory } from '../core/trajectory.js';

const desc = 'Checks what an action depends on before acting. LACKING when it acts blindly.';

test('discovery output: snake_case general names and 2–3 sentence descriptions', () => {
  const s = discoveryOutputSchema(['cancel_order', 'get']);
  assert.ok(s.safeParse({ capabilities: [{ name: 'verify_preconditions', description: desc }] }).success);
  const issues = (caps: unknown) => {
    const r = s.safeParse({ capabilities: caps });
    return r.success ? [] : r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
  };
  const fixed = s.parse({
    capabilities: [
      { name: ' Verify Preconditions', description: desc },
      { name: 'errorRecovery', description: desc },
    ],
  });
  assert.deepEqual(
    fixed.capabilities.map((c) => c.name),
    ['verify_preconditions', 'error_recovery'],
  );
  assert.match(issues([{ name: '9 lives', description: desc }])[0], /^capabilities\.0\.name: must be snake_case/);
  assert.match(issues([{ name: '!!!', description: desc }])[0], /^capabilities\.0\.name: must be snake_case/);
  assert.match(issues([{ name: 'cancel_order_rules', description: desc }])[0], /names the tool 'cancel_order'/);
  // Tool names shorter than 4 chars are too generic to forbid ('get' is in 'target_...').
  assert.deepEqual(issues([{ name: 'get_targets_right', description: desc }]), []);
  assert.match(
    issues([{ name: 'a_b', description: 'One sentence only, but long enough.' }])[0],
    /must be 2–3 sentences, got 1/,
  );
  assert.match(issues([{ name: 'a_b', description: 'One. Two. Three. Four sentences.' }]).join(), /got 4/);
  assert.deepEqual(issues([]), ['capabilities: Too small: expected array to have >=1 items']);
  assert.equal(sentenceCount('Does X well! Or not? Yes.'), 3);
});

test('label output must name every capability exactly once, with a known label', () => {
  const s = labelOutputSchema([
    { name: 'a_b', description: desc },
    { name: 'c_d', description: desc },
  ]);
  assert.ok(s.safeParse({ labels: { a_b: 'NA', c_d: 'LACKING' } }).success);
  assert.equal(s.safeParse({ labels: { a_b: 'NA' } }).success, false);
  assert.equal(s.safeParse({ labels: { a_b: 'NA', c_d: 'PRESENT', e_f: 'NA' } }).success, false);
  assert.equal(s.safeParse({ labels: { a_b: 'NA', c_d: 'maybe' } }).success, false);
});

test('the canonical dictionary dedupes by name in the analyst order and caps the size', () => {
  const c = (name: string) => ({ name, description: ` ${desc} ` });
  assert.deepEqual(canonicalDictionary([c('x_a'), c('y_b'), c('x_a'), c('z_c')], 2), [
    { name: 'x_a', description: desc },
    { name: 'y_b', description: desc },
  ]);
});

test('discovery shows failures and successes two to one within the budget', () => {
  const t = (id: string, success: boolean) => ({ id, success }) as Trajectory;
  const f = ['f1', 'f2', 'f3', 'f4'].map((id) => t(id, false));
  const s = ['s1', 's2'].map((id) => t(id, true));
  const all = pickForDiscovery(f, s, 100_000);
  assert.deepEqual(
    all.failures.map((x) => x.id),
    ['f1', 'f2', 'f3', 'f4'],
  );
  assert.deepEqual(
    all.successes.map((x) => x.id),
    ['s1', 's2'],
  );
  assert.equal(all.budget, Math.floor(100_000 / 6));
  const few = pickForDiscovery(f, s, 2_400); // room for three at 800 chars each
  assert.deepEqual(
    [...few.failures, ...few.successes].map((x) => x.id),
    ['f1', 'f2', 's1'],
  );
  assert.equal(few.budget, 800);
});
