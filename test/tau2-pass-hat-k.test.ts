import assert from 'node:assert/strict';
import { test } from 'node:test';
import { binomial, passHatK } from '../core/pass-hat-k.js';

test('binomial coefficients', () => {
  assert.equal(binomial(5, 2), 10);
  assert.equal(binomial(4, 0), 1);
  assert.equal(binomial(3, 4), 0);
});

test('pass^k is C(c,k)/C(n,k) averaged over tasks', () => {
  const trials = { a: [true, true, false, true], b: [false, false, false, false], c: [true, true, true, true] };
  // a: C(3,1)/C(4,1)=0.75, C(3,2)/C(4,2)=0.5 ; b: 0 ; c: 1
  assert.ok(Math.abs(passHatK(trials, 1) - (0.75 + 0 + 1) / 3) < 1e-12);
  assert.ok(Math.abs(passHatK(trials, 2) - (0.5 + 0 + 1) / 3) < 1e-12);
  assert.ok(Math.abs(passHatK(trials, 4) - (0 + 0 + 1) / 3) < 1e-12);
});

test('pass^k rejects k larger than the trials of a task', () => {
  assert.throws(() => passHatK({ a: [true] }, 2), /fewer than k=2/);
  assert.throws(() => passHatK({}, 1), /no tasks/);
});
