import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from '@temporalio/worker';
import { buildWorkflowBundle } from '../workers/run.js';

/**
 * Replays recorded histories of real runs (test/histories/*.json, re-recorded by
 * test/histories/record.ts) against the current workflow code: a change that would break running
 * workflows (non-determinism) fails here.
 *
 * Versioning (2026-12-01, issue 12): every history was retired and re-recorded. tracePipeline no
 * longer asks the workers which activities they implement (the `pipelinePlan` activity and the
 * capability child's `plan` input are gone; config.stages is the only switch), and the CPU
 * `evaluateRun` / `writeRunReport` fallbacks are deleted, so a run started by the older code would
 * not replay. No patched(): the old branches existed only for checkouts without a stage's module,
 * and keeping them behind a patch would keep exactly that scaffolding. Drain (or let finish) runs
 * started before this change before upgrading workers.
 *
 * Versioning (2026-12-02, issue 12, validation "gates" renamed "checks"): no history retired or
 * re-recorded, no patched(). The only workflow-code change is the validateEnvironment activity's
 * UI summary ("(gates 1–5)" → "(checks 1–6)"); activity types, ids, inputs and the command sequence
 * are unchanged, and a summary is user metadata, which replay does not match, so the recorded
 * histories (which still carry the old summary) replay as they are: this test is the proof. The
 * verdict's fields did change (gates/failedGate/gate → checks/failedCheck/check), but no workflow
 * reads a verdict (activities return {ok, reason, verdictRef}); a synthesis activity of a run in
 * flight across the upgrade would not read its earlier attempts' stored verdicts, so drain runs
 * first, as above.
 */
const DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), 'histories');

test('workflow replay: recorded histories replay deterministically against the current workflow code', async () => {
  const files = (await readdir(DIR)).filter((f) => f.endsWith('.json')).sort();
  assert.ok(files.length >= 2, `histories present in ${DIR}`);
  const histories = await Promise.all(
    files.map(
      async (f) => JSON.parse(await readFile(path.join(DIR, f), 'utf8')) as { workflowId: string; history: unknown },
    ),
  );
  const bundle = await buildWorkflowBundle();
  const results: { id: string; error?: unknown }[] = [];
  for await (const r of Worker.runReplayHistories({ workflowBundle: bundle }, histories))
    results.push({ id: r.workflowId, error: r.error });
  assert.equal(results.length, files.length);
  for (const r of results)
    assert.equal(r.error, undefined, `${r.id}: ${String((r.error as Error | undefined)?.message)}`);
});
