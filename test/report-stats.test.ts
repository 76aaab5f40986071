import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  bootstrapMeanInterval,
  newcombeDifference,
  normalQuantile,
  passHatKForTask,
  studentTQuantile,
  tInterval,
  wilsonInterval,
} from '../core/stats.js';

const close = (a: number | null, b: number, eps = 1e-4) => {
  assert.ok(a !== null && Math.abs(a - b) < eps, `${a} ≉ ${b}`);
};

test('normal and t quantiles match published tables', () => {
  close(normalQuantile(0.975), 1.959964, 1e-6);
  close(normalQuantile(0.005), -2.575829, 1e-6);
  close(studentTQuantile(0.975, 1), 12.7062);
  close(studentTQuantile(0.975, 4), 2.7764);
  close(studentTQuantile(0.975, 10), 2.2281);
  close(studentTQuantile(0.975, 30), 2.0423);
  close(studentTQuantile(0.025, 5), -2.5706);
});

test('Wilson interval matches hand-computed values, including 0/n and n/n', () => {
  const half = wilsonInterval(5, 10);
  close(half.estimate, 0.5);
  close(half.low, 0.2366);
  close(half.high, 0.7634);
  const zero = wilsonInterval(0, 10);
  assert.equal(zero.low, 0);
  close(zero.high, 0.2775);
  const all = wilsonInterval(10, 10);
  close(all.low, 0.7225);
  assert.equal(all.high, 1);
  const none = wilsonInterval(0, 0);
  assert.equal(none.estimate, null);
  assert.equal(none.low, null);
  assert.throws(() => wilsonInterval(3, 2), /successes/);
});

test('t interval over trials; a single trial has no interval rather than a zero-width one', () => {
  const ci = tInterval([0.4, 0.5, 0.6]);
  close(ci.estimate, 0.5);
  // sd = 0.1, se = 0.1/sqrt(3), t(0.975, 2) = 4.3027
  close(ci.low, 0.5 - (4.3027 * 0.1) / Math.sqrt(3));
  close(ci.high, 0.5 + (4.3027 * 0.1) / Math.sqrt(3));
  const one = tInterval([0.7]);
  assert.equal(one.estimate, 0.7);
  assert.equal(one.low, null);
  assert.equal(tInterval([]).estimate, null);
});

test('Newcombe difference reproduces the published example (56/70 vs 48/80)', () => {
  const d = newcombeDifference(56, 70, 48, 80);
  close(d.estimate, 0.2);
  close(d.low, 0.0524);
  close(d.high, 0.3339);
});

test('bootstrap is deterministic for a seed and brackets the mean', () => {
  const values = [1, 0, 1, 1, 0, 0, 1, 0, 1, 1, 0, 1];
  const a = bootstrapMeanInterval(values, { seed: 7 });
  const b = bootstrapMeanInterval(values, { seed: 7 });
  assert.deepEqual(a, b);
  assert.ok(a.low! < a.estimate! && a.estimate! < a.high!);
  const c = bootstrapMeanInterval(values, { seed: 8 });
  assert.notDeepEqual(a, c);
  const flat = bootstrapMeanInterval([1, 1, 1]);
  assert.equal(flat.low, 1);
  assert.equal(flat.high, 1);
});

test('pass^k follows tau2: C(c,k)/C(n,k)', () => {
  close(passHatKForTask(2, 4, 1), 0.5);
  close(passHatKForTask(2, 4, 2), 1 / 6);
  close(passHatKForTask(4, 4, 4), 1);
  close(passHatKForTask(3, 4, 4), 0);
  assert.throws(() => passHatKForTask(1, 2, 3), /k must be/);
});
