import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { parseConfig } from '../core/config.js';
import type { ValidationVerdict } from '../core/synthesis.js';
import { validateCandidate } from '../activities/synthesis/validate.js';
import { isolationIfAvailable } from '../envs/sandbox/isolation.js';
import { GOOD_MANIFEST, GOOD_SOURCE } from './fixtures/synthesis/scripts.js';

/** Stage-2 validation of generated modules through the sandbox (issue 13: budget, heartbeats, weak isolation). */

const config = (sandbox: Record<string, unknown> = {}) =>
  parseConfig({ env: { name: 'toy-orders' }, synthesis: { typecheck: false, sandbox } });

test('validation reports progress after every seed a check tries, not only between checks', async () => {
  const events: Record<string, unknown>[] = [];
  const { verdict } = await validateCandidate({
    source: GOOD_SOURCE,
    manifest: GOOD_MANIFEST,
    config: config(),
    onProgress: (d) => events.push(d),
  });
  assert.equal(verdict.failedCheck, 'calibration', verdict.reason); // no policy given: checks 1–4 pass
  for (const [check, seeds] of [
    ['determinism', 100],
    ['solvability', 50],
  ] as const) {
    const within = events.filter((e) => e.check === check && typeof e.seeds === 'number').map((e) => e.seeds);
    assert.deepEqual(
      within,
      Array.from({ length: seeds }, (_, i) => i + 1),
      check,
    );
  }
  // Checks 4 and 5 play in the trainer's batches (4 seeds × 16 copies by default): they report the
  // seeds finished after every batch.
  for (const [check, seeds] of [
    ['non_triviality', 16],
    ['verifier', 20],
  ] as const) {
    const within = events.filter((e) => e.check === check && typeof e.seeds === 'number').map((e) => e.seeds as number);
    assert.ok(within.length >= seeds / 4, `${check}: ${within.join(', ')}`);
    assert.deepEqual(
      within,
      [...within].sort((x, y) => x - y),
      `${check}: ${within.join(', ')}`,
    );
    assert.equal(within.at(-1), seeds, check);
  }
});

test('a module that answers every request slowly runs out of the validation budget, named by its config field', async () => {
  const slow = GOOD_SOURCE.replace(
    'generate(seed, rng) {',
    'generate(seed, rng) {\n    for (const until = Date.now() + 50; Date.now() < until; );',
  );
  assert.notEqual(slow, GOOD_SOURCE);
  const { verdict } = await validateCandidate({
    source: slow,
    manifest: GOOD_MANIFEST,
    config: config({ budgetMs: 2000 }),
  });
  assert.equal(verdict.passed, false);
  assert.match(verdict.reason!, /synthesis\.sandbox\.budgetMs = 2000/);
});

const run = promisify(execFile);
async function weakVerdict(allow: boolean): Promise<ValidationVerdict> {
  const { stdout } = await run(
    process.execPath,
    ['--import', 'tsx', 'test/fixtures/sandbox/validate-weak.ts', allow ? 'allow' : 'refuse'],
    {
      env: { ...process.env, TRACE_SANDBOX_ISOLATION: 'unshare-net' },
    },
  );
  return JSON.parse(stdout) as ValidationVerdict;
}

test('without bubblewrap, validation refuses to run generated code unless the config allows it, and then warns in the verdict', async (t) => {
  if (!(await isolationIfAvailable('unshare-net'))) return t.skip('unshare-net does not work here');
  const refused = await weakVerdict(false);
  assert.equal(refused.failedCheck, 'compile');
  assert.match(refused.reason!, /isolation level 'unshare-net'.*synthesis\.sandbox\.allowWeakIsolation/);
  const allowed = await weakVerdict(true);
  assert.equal(allowed.failedCheck, 'calibration', allowed.reason);
  assert.match(allowed.warnings?.[0] ?? '', /WARNING: generated code ran at sandbox isolation level 'unshare-net'/);
});

test('cancelling the validation activity kills its sandbox mid-check and throws, leaving no verdict', async () => {
  const { MockActivityEnvironment } = await import('@temporalio/testing');
  const activity = new MockActivityEnvironment();
  let cancelledAt: Record<string, unknown> | undefined;
  const events: Record<string, unknown>[] = [];
  const run = activity.run(() =>
    validateCandidate({
      source: GOOD_SOURCE,
      manifest: GOOD_MANIFEST,
      config: config(),
      onProgress: (d) => {
        events.push(d);
        // Cancel once the determinism check has tried 3 seeds (of 100): the sandbox is busy then.
        if (!cancelledAt && d.check === 'determinism' && d.seeds === 3) {
          cancelledAt = d;
          activity.cancel();
        }
      },
    }),
  );
  await assert.rejects(run, (e: Error) => e.name === 'CancelledFailure');
  assert.ok(cancelledAt, 'validation never reached the determinism check');
  // Without the signal the check ran on to seed 100 and validation went on to later checks.
  const after = events.slice(events.indexOf(cancelledAt) + 1);
  assert.ok(
    after.every((e) => e.check === 'determinism' && (e.seeds === undefined || (e.seeds as number) <= 4)),
    `ran on after the cancel: ${JSON.stringify(after)}`,
  );
});
