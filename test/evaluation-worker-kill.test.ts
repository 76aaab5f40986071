import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { toyTasks } from './helpers/toy-policy.js';
import { TASK_QUEUE_CPU, type PipelineInput, type PipelineResult } from '../workflows/types.js';
import type { ChatRequest } from './helpers/scripted-llm.js';
import {
  FAST_TIMEOUTS,
  itemOf,
  oneAtATimeRoles,
  pipelineConfig,
  sleep,
  slowPipelineReply,
  startHarness,
} from './helpers/temporal.js';

/**
 * kill -9 of the worker in the middle of evaluation, then a new worker: the run completes, and no
 * evaluation episode that had finished (its record stored) is run again.
 */
const heldOut = new Set(toyTasks.filter((t) => t.split === 'test').map((t) => t.opening));

async function storedEpisodes(runDir: string): Promise<string[]> {
  const out: string[] = [];
  for (const variant of await readdir(path.join(runDir, 'evaluation')).catch(() => [])) {
    const files = await readdir(path.join(runDir, 'evaluation', variant, 'episodes')).catch(() => []);
    out.push(...files.filter((f) => f.endsWith('.json')).map((f) => `${variant}/${f}`));
  }
  return out;
}

/** First-turn policy requests on held-out tasks: one per evaluation episode started. */
const evaluationStarts = (requests: readonly ChatRequest[]) =>
  requests.filter((r) => {
    const it = itemOf(r);
    return it.kind === 'policy' && it.firstTurn && heldOut.has(it.key);
  }).length;

test('reliability: kill -9 of the worker mid-evaluation redoes nothing that finished', async (t) => {
  const { dir, llm, client, spawnWorker } = await startHarness(
    t,
    slowPipelineReply((req) => (itemOf(req).kind === 'policy' ? 200 : 0)),
    { prefix: 'trace-evalkill-', workers: 0 },
  );
  const storeDir = path.join(dir, 'artifacts');
  const runDir = path.join(storeDir, 'runs', 'evalkill');
  // 2 held-out tasks × 3 trials × (base, prompt-only) = 12 episodes, one at a time.
  const config = pipelineConfig(llm.baseURL, storeDir, {
    rollouts: { trialsPerTask: 1, batchSize: 3, maxConcurrentBatches: 2, maxSteps: 6 },
    llm: oneAtATimeRoles(llm.baseURL),
    evaluation: { maxTasks: 2, trials: 3, temperature: 1, promptOnly: true },
  });
  const w1 = await spawnWorker();
  const input: PipelineInput = { runId: 'evalkill', config, timeouts: FAST_TIMEOUTS };
  const handle = await client.workflow.start('tracePipeline', {
    taskQueue: TASK_QUEUE_CPU,
    workflowId: 'evalkill',
    args: [input],
  });

  const deadline = Date.now() + 240_000;
  while ((await storedEpisodes(runDir)).length < 3) {
    assert.ok(Date.now() < deadline, 'evaluation did not get under way');
    await sleep(50);
  }
  await w1.kill9();
  const atKill = await storedEpisodes(runDir);
  const startsAtKill = evaluationStarts(llm.requests);
  assert.ok(atKill.length >= 3 && atKill.length < 12, `the kill came mid-evaluation (${atKill.length} of 12 stored)`);

  await spawnWorker();
  const result = (await handle.result()) as PipelineResult;
  const evaluation = result.evaluation as { variants: { name: string; n: number; passRate: number | null }[] };
  assert.deepEqual(
    evaluation.variants.map((v) => [v.name, v.n]),
    [
      ['base', 6],
      ['prompt_only', 6],
    ],
  );
  assert.equal((await storedEpisodes(runDir)).length, 12);

  // Every episode ran once, except at most the one in flight at the kill (concurrency 1).
  const starts = evaluationStarts(llm.requests);
  assert.ok(starts >= 12 && starts <= 13, `${starts} evaluation episodes started for 12 results`);
  assert.ok(startsAtKill - atKill.length <= 1, 'at most one episode was in flight at the kill');
  const stillStored = new Set(await storedEpisodes(runDir));
  for (const e of atKill) assert.ok(stillStored.has(e));
});
