import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { decodeTimeoutType } from '@temporalio/common';
import { parseConfig } from '../core/config.js';
import { serveEnvironment } from '../envs/protocol/server.js';
import { PROJECT_ROOT } from '../infra/temporal.js';
import type { TrainAdapterResult } from '../activities/training.js';
import { sleep, startHarness } from './helpers/temporal.js';
import { sayWordEnv } from './helpers/trainer.js';

/**
 * kill -9 of the GPU worker (workers/gpu.ts as its own process) while trainAdapter is training a
 * tiny model under a real dev server: the trainer it started dies with it, the activity is retried
 * after its heartbeat timeout on a fresh worker, resumes from the last checkpoint, and redoes at
 * most one checkpoint interval of iterations.
 */

const WORKFLOW_QUEUE = 'train-kill-workflows';
const ITERATIONS = 10;
const CHECKPOINT_EVERY = 2;
/** Per episode reset: paces an iteration (2 groups × 4 rollouts) at about a second on 2 CPU cores. */
const RESET_DELAY_MS = 100;
/** workers/gpu.ts, the production trace-gpu entry point, as a child process that can be SIGKILLed. */
const GPU_WORKER = { entry: 'gpu', env: { TRACE_GPU_COUNT: '1' } } as const;

async function procStatus(pid: number): Promise<Record<string, string> | undefined> {
  const text = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => undefined);
  if (!text) return undefined;
  return Object.fromEntries(
    text.split('\n').map((l) => [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 1).trim()]),
  );
}

/** `python -m trace_trainer grpo` processes whose parent is `ppid`. */
async function trainerChildren(ppid: number): Promise<number[]> {
  const pids: number[] = [];
  for (const name of await readdir('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const status = await procStatus(Number(name));
    if (status?.PPid !== String(ppid)) continue;
    const cmdline = (await readFile(`/proc/${name}/cmdline`, 'utf8').catch(() => '')).split('\0');
    if (cmdline.includes('trace_trainer') && cmdline.includes('grpo')) pids.push(Number(name));
  }
  return pids;
}

/** Gone, or a zombie waiting to be reaped: either way it runs no more. */
async function stopped(pid: number): Promise<boolean> {
  const state = (await procStatus(pid))?.State;
  return state === undefined || state.startsWith('Z');
}

async function waitFor<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

const iterationOf = (checkpointUri: string) => Number(/iter-(\d{6})$/.exec(checkpointUri)?.[1] ?? NaN);

test(
  'reliability: kill -9 of the GPU worker mid-training; the retry resumes from the last checkpoint and redoes at most one checkpoint interval',
  { timeout: 300_000 },
  async (t) => {
    const words = ['say', 'bye', 'red', 'blue'];
    // The workflow side runs in this process; only the GPU worker (a process of its own) gets killed.
    const h = await startHarness(t, null, {
      prefix: 'trace-trainkill-',
      workers: 0,
      model: { words },
      testWorkflows: {
        taskQueue: WORKFLOW_QUEUE,
        workflowsPath: path.join(PROJECT_ROOT, 'test', 'helpers', 'train-adapter-workflow.ts'),
      },
    });
    const served = await serveEnvironment(sayWordEnv({ resetDelayMs: RESET_DELAY_MS }));
    t.after(() => served.close());
    const { model } = h;
    const storeDir = path.join(h.dir, 'artifacts');
    const config = parseConfig({
      env: { name: 'say-word' },
      store: { kind: 'local', dir: storeDir },
      training: {
        model,
        iterations: ITERATIONS,
        checkpointEvery: CHECKPOINT_EVERY,
        groupsPerIteration: 2,
        rolloutsPerGroup: 4,
        maxNewTokens: 1,
        maxTurns: 1,
        lr: 0.05,
      },
    });
    const adapterDir = path.join(storeDir, 'runs', 'trainkill', 'adapters', 'say_word');
    const latestCheckpoint = async () => {
      const text = await readFile(path.join(adapterDir, 'checkpoints', 'latest.json'), 'utf8').catch(() => undefined);
      return text === undefined ? 0 : (JSON.parse(text) as { iteration: number }).iteration;
    };
    // The trainer writes iteration i's trajectories when i is done, before it may checkpoint i.
    const iterationsDone = async () =>
      Math.max(
        0,
        ...(await readdir(path.join(adapterDir, 'trajectories')).catch(() => [] as string[])).map((f) =>
          Number(/^iter-(\d+)\.jsonl$/.exec(f)?.[1] ?? 0),
        ),
      );

    const w1 = await h.spawnWorker(GPU_WORKER);
    const handle = await h.client.workflow.start('trainAdapterWorkflow', {
      taskQueue: WORKFLOW_QUEUE,
      workflowId: 'trainkill',
      args: [
        {
          runId: 'trainkill',
          config,
          capability: { name: 'say_word' },
          envUrl: served.url,
          // A heartbeat timeout above the activity's 5 s keepalive, short enough for a quick retry.
          timeouts: { heartbeatMs: 10_000, trainingMs: 240_000, maximumAttempts: 3 },
        },
      ],
    });

    // Kill in the middle of an interval, after at least two checkpoints: work past the last one is lost.
    // Two iterations short of the end: the orphan's last second cannot finish the run.
    await waitFor(
      'a checkpoint at iteration ≥ 4 and an iteration past it',
      async () => {
        const [ckpt, done] = [await latestCheckpoint(), await iterationsDone()];
        return ckpt >= 2 * CHECKPOINT_EVERY && done > ckpt && done <= ITERATIONS - 2 ? true : undefined;
      },
      150_000,
    );
    const trainers = await trainerChildren(w1.child.pid!);
    assert.equal(trainers.length, 1, 'the GPU worker runs one trainer process');
    const serverDetails = (await handle.describe()).raw.pendingActivities?.[0]?.heartbeatDetails?.payloads?.[0]?.data;
    await w1.kill9();
    // TRACE_EXIT_WITH_PARENT: the orphaned trainer notices within a second and exits.
    await waitFor(
      'the orphaned trainer to exit',
      async () => ((await Promise.all(trainers.map(stopped))).every(Boolean) ? true : undefined),
      10_000,
    );
    const checkpointAtKill = await latestCheckpoint();
    const doneAtKill = await iterationsDone();
    assert.ok(
      checkpointAtKill >= 2 * CHECKPOINT_EVERY && doneAtKill < ITERATIONS,
      `the kill came mid-training (checkpoint ${checkpointAtKill}, ${doneAtKill} of ${ITERATIONS} done)`,
    );

    await h.spawnWorker(GPU_WORKER);
    const result = (await handle.result()) as TrainAdapterResult;

    assert.equal(result.iterations, ITERATIONS);
    assert.equal(result.curve.length, ITERATIONS, 'metrics of the killed attempt are kept');
    assert.equal(iterationOf(result.checkpointUri), ITERATIONS);
    assert.ok(result.resumedFrom, 'the retry resumed from a checkpoint');
    const resumedAt = iterationOf(result.resumedFrom);
    const redone = doneAtKill - resumedAt;
    t.diagnostic(
      `kill after ${doneAtKill} iterations (checkpoint ${checkpointAtKill}); resumed from ${resumedAt}; redone ${redone}; ` +
        `server-side heartbeat details at kill: ${serverDetails ? Buffer.from(serverDetails).toString('utf8') : 'none'}`,
    );
    assert.equal(
      resumedAt,
      checkpointAtKill,
      `resumed from iteration ${resumedAt}, not the last checkpoint (${checkpointAtKill})`,
    );
    // Iterations past the last checkpoint, counting one whose trajectories were written but whose checkpoint was not.
    assert.ok(redone <= CHECKPOINT_EVERY, `${redone} iterations redone (checkpoint every ${CHECKPOINT_EVERY})`);

    // The retry was the heartbeat timeout of the killed attempt, on attempt 2.
    const history = await handle.fetchHistory();
    const started = history
      .events!.filter((e) => e.activityTaskStartedEventAttributes)
      .map((e) => e.activityTaskStartedEventAttributes!);
    assert.equal(started.length, 1);
    assert.equal(started[0].attempt, 2);
    assert.equal(decodeTimeoutType(started[0].lastFailure?.timeoutFailureInfo?.timeoutType), 'HEARTBEAT');
  },
);
