import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { loadTrajectories } from '../activities/stage1.js';
import { isTempName } from '../store/base.js';
import { openStore } from '../store/index.js';
import { TASK_QUEUE_CPU, type PipelineInput, type PipelineResult } from '../workflows/types.js';
import {
  FAST_TIMEOUTS,
  VERIFY,
  itemOf,
  pipelineConfig,
  oneAtATimeRoles,
  sleep,
  slowPipelineReply,
  startHarness,
  startsPerItem,
} from './helpers/temporal.js';

/**
 * kill -9 of the worker process in the middle of rollouts and again in the middle of labeling:
 * the run completes, work persisted before a kill is not redone, in-flight work is redone at most
 * once, and every artifact verifies and parses.
 */

async function waitUntil(what: string, cond: () => boolean, timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

async function walk(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(dir, { withFileTypes: true }).catch(() => [])) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) out.push(...(await walk(p)));
    else out.push(p);
  }
  return out;
}

/** Items whose result was persisted (rollout parts, label items), read back from the store dir. */
async function persisted(runDir: string): Promise<{ openings: Set<string>; labels: Set<string> }> {
  const openings = new Set<string>();
  const labels = new Set<string>();
  for (const f of await walk(runDir)) {
    if (isTempName(path.basename(f))) continue;
    if (/\.parts\/\d+\.json$/.test(f)) {
      const t = JSON.parse(await readFile(f, 'utf8')) as { messages: { role: string; content: string }[] };
      openings.add(t.messages.find((m) => m.role === 'user')!.content);
    }
    const pass = /pass-(\d+)\.items\/[^/]+\.json$/.exec(f);
    if (pass) {
      const rec = JSON.parse(await readFile(f, 'utf8')) as { trajectoryId: string };
      labels.add(`pass${Number(pass[1])}:${rec.trajectoryId}`);
    }
  }
  return { openings, labels };
}

test('reliability: kill -9 of the worker mid-rollouts and mid-labeling; the run completes without redoing finished work', async (t) => {
  // Slow replies keep several items in flight when the worker dies.
  const { dir, llm, client, spawnWorker } = await startHarness(
    t,
    slowPipelineReply((req) => (itemOf(req).kind === 'label' ? 400 : 250)),
    { prefix: 'trace-kill-', workers: 0 },
  );
  const storeDir = path.join(dir, 'artifacts');
  const runDir = path.join(storeDir, 'runs', 'kill-run');
  const config = pipelineConfig(llm.baseURL, storeDir, {
    rollouts: { trialsPerTask: 1, batchSize: 2, maxConcurrentBatches: 2, maxSteps: 6 },
    llm: oneAtATimeRoles(llm.baseURL),
    stages: { synthesis: false, training: false, gate: false, evaluation: false },
  });

  const w1 = await spawnWorker();
  const input: PipelineInput = { runId: 'kill-run', config, timeouts: FAST_TIMEOUTS };
  const handle = await client.workflow.start('tracePipeline', {
    taskQueue: TASK_QUEUE_CPU,
    workflowId: 'kill-run',
    args: [input],
  });

  // Kill 1: some episodes done, others in flight.
  await waitUntil('rollouts under way', () => startsPerItem(llm.requests, 'policy').size >= 3);
  await w1.kill9();
  const atKill1 = await persisted(runDir);
  assert.ok(atKill1.openings.size < 6, 'the kill came before all rollouts finished');

  // Kill 2: in the middle of labeling.
  const w2 = await spawnWorker();
  await waitUntil('labeling under way', () => startsPerItem(llm.requests, 'label').size >= 8);
  await w2.kill9();
  const atKill2 = await persisted(runDir);
  assert.ok(
    atKill2.labels.size >= 1 && atKill2.labels.size < 18,
    `kill 2 came mid-labeling (${atKill2.labels.size} of 18 labels persisted)`,
  );

  await spawnWorker();
  const result = (await handle.result()) as PipelineResult;

  assert.equal(result.rollouts.trajectories, 6);
  assert.deepEqual(result.analysis.selected, [VERIFY]);
  assert.equal(result.analysis.labels.length, 3);

  const rolloutStarts = startsPerItem(llm.requests, 'policy');
  const labelStarts = startsPerItem(llm.requests, 'label');
  assert.equal(rolloutStarts.size, 6);
  assert.equal(labelStarts.size, 18);
  for (const opening of atKill1.openings)
    assert.equal(rolloutStarts.get(opening), 1, `finished episode redone: ${opening}`);
  for (const key of atKill2.labels) assert.equal(labelStarts.get(key), 1, `finished label redone: ${key}`);
  for (const [k, n] of [...rolloutStarts, ...labelStarts]) assert.ok(n <= 2, `${k} started ${n} times`);
  assert.ok(
    [...rolloutStarts.values()].some((n) => n === 2) || [...labelStarts.values()].some((n) => n === 2),
    'some in-flight item was redone (the kills interrupted real work)',
  );

  // No duplicate or corrupt artifacts: refs verify, trajectories are unique, every file parses.
  const store = openStore(config.store);
  const trajectories = await loadTrajectories(store, result.rollouts.refs);
  assert.equal(new Set(trajectories.map((x) => x.id)).size, 6);
  for (const ref of [...result.analysis.labels, result.analysis.selection!, result.analysis.dictionary!, result.report])
    await store.get(ref);
  for (const f of await walk(runDir)) {
    if (isTempName(path.basename(f))) continue;
    const text = await readFile(f, 'utf8');
    if (f.endsWith('.jsonl'))
      text
        .trim()
        .split('\n')
        .forEach((l) => JSON.parse(l));
    else if (f.endsWith('.json')) JSON.parse(text);
  }
});
