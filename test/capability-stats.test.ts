import { test } from 'node:test';
import assert from 'node:assert/strict';
import { capabilityStats, exampleFailures, meanStd, passStat, type PassInput } from '../core/capability-stats.js';
import type { Label, Outcome } from '../core/capability.js';

const T = { delta: 0.2, coverage: 0.1, minPassesSelected: 2 };
const caps = (...names: string[]) => names.map((name) => ({ name, description: `${name} description long enough.` }));

function pass(pass: number, labels: Record<string, Record<string, Label>>): PassInput {
  return { pass, items: Object.entries(labels).map(([trajectoryId, l]) => ({ trajectoryId, labels: l })) };
}

const outcomes: Outcome[] = [
  { trajectoryId: 's1', success: true },
  { trajectoryId: 's2', success: true },
  { trajectoryId: 'f1', success: false },
  { trajectoryId: 'f2', success: false },
  { trajectoryId: 'f3', success: false },
];
const y = new Map(outcomes.map((o) => [o.trajectoryId, o.success]));

test('per-pass ER⁺, ER⁻, Δ and Cov match a hand computation', () => {
  const p = pass(0, {
    s1: { c: 'PRESENT' },
    s2: { c: 'LACKING' },
    f1: { c: 'LACKING' },
    f2: { c: 'LACKING' },
    f3: { c: 'NA' },
  });
  const s = passStat('c', p, y, T);
  assert.equal(s.erPlus, 0.5); // 1 LACKING of 2 applicable successes
  assert.equal(s.erMinus, 1); // 2 LACKING of 2 applicable failures
  assert.equal(s.delta, 0.5);
  assert.equal(s.coverage, 2 / 3); // 2 LACKING failures of 3 failures (NA counts in the denominator)
  assert.equal(s.selected, true);
  assert.equal(s.reason, undefined);
  assert.deepEqual(s.counts, {
    lackingSuccess: 1,
    applicableSuccess: 2,
    lackingFailure: 2,
    applicableFailure: 2,
    failures: 3,
    successes: 2,
  });
});

test('a large gap with too little coverage is not selected, and a negative gap is reported as such', () => {
  const p = pass(0, {
    s1: { c: 'PRESENT', d: 'LACKING' },
    s2: { c: 'PRESENT', d: 'LACKING' },
    f1: { c: 'LACKING', d: 'PRESENT' },
    f2: { c: 'NA', d: 'NA' },
    f3: { c: 'NA', d: 'NA' },
  });
  const c = passStat('c', p, y, { ...T, coverage: 0.5 });
  assert.equal(c.delta, 1);
  assert.equal(c.coverage, 1 / 3);
  assert.equal(c.selected, false);
  const d = passStat('d', p, y, T);
  assert.equal(d.delta, -1);
  assert.equal(d.selected, false);
});

test('edge cases are null with a reason, never NaN or a division by zero', () => {
  const allNa = passStat(
    'c',
    pass(0, { s1: { c: 'NA' }, s2: { c: 'NA' }, f1: { c: 'NA' }, f2: { c: 'NA' }, f3: { c: 'NA' } }),
    y,
    T,
  );
  assert.equal(allNa.erPlus, null);
  assert.equal(allNa.erMinus, null);
  assert.equal(allNa.delta, null);
  assert.equal(allNa.coverage, 0);
  assert.equal(allNa.selected, false);
  assert.equal(allNa.reason, 'all NA on successes; all NA on failures');

  const onlyFailures = new Map([
    ['f1', false],
    ['f2', false],
  ]);
  const noSucc = passStat('c', pass(0, { f1: { c: 'LACKING' }, f2: { c: 'PRESENT' } }), onlyFailures, T);
  assert.equal(noSucc.erPlus, null);
  assert.equal(noSucc.erMinus, 0.5);
  assert.equal(noSucc.delta, null);
  assert.equal(noSucc.coverage, 0.5);
  assert.equal(noSucc.selected, false);
  assert.equal(noSucc.reason, 'no successes');

  const onlySuccesses = new Map([['s1', true]]);
  const noFail = passStat('c', pass(0, { s1: { c: 'LACKING' } }), onlySuccesses, T);
  assert.equal(noFail.erPlus, 1);
  assert.equal(noFail.erMinus, null);
  assert.equal(noFail.coverage, null);
  assert.equal(noFail.reason, 'no failures');

  const empty = passStat('c', pass(0, {}), y, T);
  assert.equal(empty.reason, 'no successes; no failures');
  assert.equal(empty.selected, false);
});

test('a missing label counts as NA and an unlabeled item is left out of the denominators', () => {
  // f3's labeling failed in this pass (absent); s2 has no label for c (counts as NA).
  const s = passStat('c', pass(0, { s1: { c: 'PRESENT' }, s2: {}, f1: { c: 'LACKING' }, f2: { c: 'PRESENT' } }), y, T);
  assert.equal(s.counts.failures, 2);
  assert.equal(s.counts.applicableSuccess, 1);
  assert.equal(s.coverage, 0.5);
  assert.equal(s.erMinus, 0.5);
});

test('thresholds are inclusive despite floating point (0.3 − 0.1 ≥ 0.2)', () => {
  const outs = new Map<string, boolean>();
  const labels: Record<string, Record<string, Label>> = {};
  for (let i = 0; i < 10; i++) {
    outs.set(`s${i}`, true);
    outs.set(`f${i}`, false);
    labels[`s${i}`] = { c: i < 1 ? 'LACKING' : 'PRESENT' };
    labels[`f${i}`] = { c: i < 3 ? 'LACKING' : 'PRESENT' };
  }
  const s = passStat('c', pass(0, labels), outs, { delta: 0.2, coverage: 0.3, minPassesSelected: 1 });
  assert.ok(s.delta! < 0.2, 'the raw difference is below 0.2 in binary floating point');
  assert.equal(s.selected, true);
});

test('K-of-R selection, mean and population std over passes, ranking by mean Δ', () => {
  const strong = (lackS2: boolean): Record<string, Record<string, Label>> => ({
    s1: { a: 'PRESENT', b: 'PRESENT' },
    s2: { a: lackS2 ? 'LACKING' : 'PRESENT', b: 'PRESENT' },
    f1: { a: 'LACKING', b: 'LACKING' },
    f2: { a: 'LACKING', b: 'PRESENT' },
    f3: { a: 'PRESENT', b: 'PRESENT' },
  });
  // a: Δ per pass = 2/3 − 0 = 0.667 (passes 0, 2) and 2/3 − 1/2 = 0.167 (pass 1, below δ).
  // b: Δ = 1/3 each pass, Cov = 1/3: selected in all 3 passes.
  const passes = [pass(0, strong(false)), pass(1, strong(true)), pass(2, strong(false))];
  const stats = capabilityStats(caps('b', 'a', 'z'), outcomes, passes, T);
  assert.deepEqual(
    stats.map((s) => s.name),
    ['a', 'b', 'z'],
  );
  const [a, b, z] = stats;
  assert.deepEqual(
    a.passes.map((p) => p.selected),
    [true, false, true],
  );
  assert.equal(a.passesSelected, 2);
  assert.equal(a.selected, true); // K = 2 of R = 3
  const deltas = [2 / 3, 2 / 3 - 1 / 2, 2 / 3];
  const mean = (2 / 3 + 2 / 3 + 1 / 6) / 3;
  assert.ok(Math.abs(a.meanDelta! - mean) < 1e-12);
  const std = Math.sqrt(deltas.reduce((s, d) => s + (d - mean) ** 2, 0) / 3);
  assert.ok(Math.abs(a.stdDelta! - std) < 1e-12);
  assert.ok(Math.abs(a.stdDelta! - Math.sqrt(2) / 6) < 1e-12); // hand value: deviations 1/6, 1/6, −1/3
  assert.equal(b.passesSelected, 3);
  assert.ok(Math.abs(b.meanDelta! - 1 / 3) < 1e-12);
  assert.equal(b.stdDelta, 0);
  assert.equal(z.meanDelta, null); // never labeled: all NA
  assert.equal(z.selected, false);
  assert.deepEqual(z.notes, ['all NA on successes in 3 of 3 passes', 'all NA on failures in 3 of 3 passes']);

  const strict = capabilityStats(caps('a'), outcomes, passes, { ...T, minPassesSelected: 3 });
  assert.equal(strict[0].selected, false);
});

test('meanStd is numpy-compatible (ddof = 0) and null for no values', () => {
  assert.deepEqual(meanStd([]), { mean: null, std: null });
  const r = meanStd([1, 2, 3, 4]);
  assert.equal(r.mean, 2.5);
  assert.ok(Math.abs(r.std! - Math.sqrt(1.25)) < 1e-12);
});

test('example failures are the most frequently LACKING, ties by id, successes never', () => {
  const passes = [
    pass(0, { s1: { c: 'LACKING' }, f1: { c: 'LACKING' }, f2: { c: 'LACKING' }, f3: { c: 'PRESENT' } }),
    pass(1, { s1: { c: 'LACKING' }, f1: { c: 'PRESENT' }, f2: { c: 'LACKING' }, f3: { c: 'LACKING' } }),
    pass(2, { f1: { c: 'LACKING' }, f2: { c: 'LACKING' }, f3: { c: 'NA' } }),
  ];
  assert.deepEqual(exampleFailures('c', outcomes, passes, 5), [
    { trajectoryId: 'f2', lackingPasses: 3 },
    { trajectoryId: 'f1', lackingPasses: 2 },
    { trajectoryId: 'f3', lackingPasses: 1 },
  ]);
  assert.deepEqual(
    exampleFailures('c', outcomes, passes, 1).map((e) => e.trajectoryId),
    ['f2'],
  );
});

test('notes count each edge case over the passes it occurred in', () => {
  const onlyFailures: Outcome[] = [
    { trajectoryId: 'f1', success: false },
    { trajectoryId: 'f2', success: false },
  ];
  const passes = [pass(0, { f1: { c: 'LACKING' }, f2: { c: 'NA' } }), pass(1, { f1: { c: 'NA' }, f2: { c: 'NA' } })];
  const [c] = capabilityStats(caps('c'), onlyFailures, passes, T);
  assert.deepEqual(c.notes, ['no successes in 2 of 2 passes', 'all NA on failures in 1 of 2 passes']);
  assert.equal(c.meanCoverage, 0.25);
  assert.equal(c.stdCoverage, 0.25);
  assert.equal(c.meanDelta, null);
});
