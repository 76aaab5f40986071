import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execa } from 'execa';

/** The whole TypeScript tree type-checks: tsx strips types at run time, so only this catches drift. */
test('tsc --noEmit passes for the project', { timeout: 300_000 }, async () => {
  const r = await execa('npx', ['tsc', '--noEmit', '-p', '.'], { reject: false, all: true });
  assert.equal(r.exitCode, 0, r.all);
});
