import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseConfig } from '../core/config.js';

test('config defaults follow the paper', () => {
  const c = parseConfig({ env: { name: 'tau2-airline' } });
  assert.equal(c.analysis.delta, 0.2);
  assert.equal(c.analysis.coverage, 0.1);
  assert.equal(c.analysis.passes, 10);
  assert.equal(c.analysis.minPassesSelected, 8);
  assert.equal(c.rollouts.maxSteps, 50);
  assert.equal(c.llm.policy.concurrency, 2);
});

test('a bad config names the field in one line', () => {
  assert.throws(
    () => parseConfig({ env: { name: 'x' }, analysis: { delta: 3 } }, 'run.yaml'),
    (e: Error) => {
      assert.match(e.message, /^run\.yaml: analysis\.delta: /);
      assert.equal(e.message.split('\n').length, 1);
      return true;
    },
  );
  assert.throws(() => parseConfig({ env: { name: 'x' }, analysis: { passes: 3 } }), /analysis\.minPassesSelected/);
  assert.throws(() => parseConfig({}), /env/);
});

test('GRPO needs a positive sampling temperature; constrained decoding defaults to auto', () => {
  assert.throws(
    () => parseConfig({ env: { name: 'x' }, training: { temperature: 0 } }, 'run.yaml'),
    (e: Error) => /^run\.yaml: training\.temperature: /.test(e.message),
  );
  const c = parseConfig({ env: { name: 'x' } });
  assert.equal(c.training.constrainedDecoding, 'auto');
  assert.equal(
    parseConfig({ env: { name: 'x' }, training: { constrainedDecoding: false } }).training.constrainedDecoding,
    false,
  );
  assert.throws(
    () => parseConfig({ env: { name: 'x' }, training: { constrainedDecoding: 'yes' } }),
    /training\.constrainedDecoding/,
  );
});

test('synthesis.maxAttempts 0 uses the reference library and needs the fallback allowed', () => {
  assert.equal(
    parseConfig({ env: { name: 'x' }, synthesis: { maxAttempts: 0, allowReferenceFallback: true } }).synthesis
      .maxAttempts,
    0,
  );
  assert.throws(
    () => parseConfig({ env: { name: 'x' }, synthesis: { maxAttempts: 0 } }),
    (e: Error) => /synthesis\.maxAttempts: is 0/.test(e.message),
  );
});
