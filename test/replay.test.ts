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
 */
const DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), 'histories');

test('workflow replay: recorded histories replay deterministically against the current workflow code', async () => {
  const files = (await readdir(DIR)).filter((f) => f.endsWith('.json')).sort();
  assert.ok(files.length >= 2, `histories present in ${DIR}`);
  const histories = await Promise.all(
    files.map(async (f) => JSON.parse(await readFile(path.join(DIR, f), 'utf8')) as { workflowId: string; history: unknown }),
  );
  const bundle = await buildWorkflowBundle();
  const results: { id: string; error?: unknown }[] = [];
  for await (const r of Worker.runReplayHistories({ workflowBundle: bundle }, histories)) results.push({ id: r.workflowId, error: r.error });
  assert.equal(results.length, files.length);
  for (const r of results) assert.equal(r.error, undefined, `${r.id}: ${String((r.error as Error | undefined)?.message)}`);
});
