import { test } from 'node:test';
import assert from 'node:assert/strict';
import { capabilitiesToTrain } from '../core/capability.js';
import { parseConfig } from '../core/config.js';

const describe = (name: string) => ({ name, description: `${name} described in at least twenty characters.` });

test('capabilitiesToTrain: stage 1 selection first, then requested ones it did not select, each once and marked', () => {
  const selected = [describe('verify_preconditions')];
  const requested = [
    describe('tool_calling_precision'),
    describe('verify_preconditions'),
    describe('tool_calling_precision'),
  ];
  assert.deepEqual(
    capabilitiesToTrain(selected, requested).map((c) => [c.name, c.requestedByConfig]),
    [
      ['verify_preconditions', false],
      ['tool_calling_precision', true],
    ],
  );
  assert.deepEqual(capabilitiesToTrain([], []), []);
});

test('analysis.requestedCapabilities defaults to none and names a bad entry', () => {
  assert.deepEqual(parseConfig({ env: { name: 'toy-orders' } }).analysis.requestedCapabilities, []);
  assert.throws(
    () =>
      parseConfig({
        env: { name: 'toy-orders' },
        analysis: { requestedCapabilities: [{ name: 'Tool Calling', description: 'too short' }] },
      }),
    /analysis\.requestedCapabilities\.0\.name: must be snake_case/,
  );
});
