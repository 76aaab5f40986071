import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { decodeTimeoutType } from '@temporalio/common';
import { DefaultLogger, NativeConnection, Runtime, Worker } from '@temporalio/worker';
import { execa } from 'execa';
import { parseConfig } from '../core/config.js';
import type { Environment, Episode } from '../envs/environment.js';
import { serveEnvironment } from '../envs/protocol/server.js';
import { PROJECT_ROOT } from '../infra/temporal.js';
import type { TrainAdapterResult } from '../activities/training.js';
import { sleep, startTestTemporal, tempDir } from './helpers/temporal.js';

/**
 * kill -9 of the GPU worker (workers/gpu.ts as its own process) while trainAdapter is training a
 * tiny model under a real dev server: the trainer it started dies with it, the activity is retried
 * after its heartbeat timeout on a fresh worker, resumes from the last checkpoint, and redoes at
 * most one checkpoint interval of iterations.
 */

const PYTHON = path.join(PROJECT_ROOT, '.venv', 'bin', 'python');
const WORKFLOW_QUEUE = 'train-kill-workflows';
const ITERATIONS = 10;
const CHECKPOINT_EVERY = 2;
/** Per episode reset: paces an iteration (2 groups × 4 rollouts) at about a second on 2 CPU cores. */
const RESET_DELAY_MS = 100;

/** One turn: reward 1 for saying the requested word, so groups have reward variance to learn from. */
function sayWordEnv(): Environment {
  let n = 0;
  return {
    info: { name: 'say-word', kind: 'synthetic', description: 'say the requested word', capability: 'instruction_following' },
    tools: () => [],
    systemPrompt: () => 'say',
    listTasks: async () => [],
    async reset(req) {
      await sleep(RESET_DELAY_MS);
      const seed = 'seed' in req ? req.seed : 0;
      const target = seed % 2 ? 'red' : 'blue';
      const episode: Episode = {
        id: `e${++n}`,
        taskId: `seed-${seed}`,
        initialMessages: () => [{ role: 'user', content: `say ${target}` }],
        step: async () => ({ observation: { role: 'user', content: 'bye' }, error: false, done: true, termination: 'agent_stop' as const }),
        async evaluate(messages) {
          const word = (messages.find((m) => m.role === 'assistant')?.content ?? '').trim();
          const reward = word === target ? 1 : 0;
          return { reward, components: { word: reward }, success: reward === 1 };
        },
        fork: async () => episode,
        close: async () => {},
      };
      return episode;
    },
  };
}

interface GpuWorker {
  pid: number;
  ready: Promise<void>;
  kill9(): Promise<void>;
  stop(): Promise<void>;
}

/** workers/gpu.ts, the production trace-gpu entry point, as a child process that can be SIGKILLed. */
function spawnGpuWorker(address: string): GpuWorker {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(PROJECT_ROOT, 'workers', 'gpu.ts')], {
    cwd: PROJECT_ROOT,
    env: { ...process.env, TEMPORAL_ADDRESS: address, TEMPORAL_NAMESPACE: 'default', TRACE_GPU_COUNT: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const ready = new Promise<void>((resolve, reject) => {
    const onData = (d: Buffer) => {
      out = (out + d).slice(-20_000);
      if (/\[worker\] trace-gpu on/.test(out)) resolve();
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    exited.then(() => reject(new Error(`gpu worker exited before polling: ${out.slice(-2000)}`)));
  });
  ready.catch(() => {});
  return {
    pid: child.pid!,
    ready,
    async kill9() {
      child.kill('SIGKILL');
      await exited;
    },
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const t = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(t);
    },
  };
}

async function procStatus(pid: number): Promise<Record<string, string> | undefined> {
  const text = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => undefined);
  if (!text) return undefined;
  return Object.fromEntries(text.split('\n').map((l) => [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 1).trim()]));
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

test('reliability: kill -9 of the GPU worker mid-training; the retry resumes from the last checkpoint and redoes at most one checkpoint interval', { timeout: 300_000 }, async (t) => {
  const tmp = await tempDir('trace-trainkill-');
  const served = await serveEnvironment(sayWordEnv());
  const temporal = await startTestTemporal({ dbFile: path.join(tmp.dir, 'temporal.db') });
  const gpuWorkers: GpuWorker[] = [];
  const connection = await Connection.connect({ address: temporal.address });
  Runtime.install({ logger: new DefaultLogger('WARN') });
  const workerConnection = await NativeConnection.connect({ address: temporal.address });
  // The workflow side runs in this process; only the GPU worker is the one that gets killed.
  const workflowWorker = await Worker.create({
    connection: workerConnection,
    taskQueue: WORKFLOW_QUEUE,
    workflowsPath: path.join(PROJECT_ROOT, 'test', 'helpers', 'train-adapter-workflow.ts'),
  });
  const workflowsRunning = workflowWorker.run();
  t.after(async () => {
    for (const w of gpuWorkers) await w.stop();
    workflowWorker.shutdown();
    await workflowsRunning;
    await workerConnection.close();
    await connection.close();
    await temporal.stop();
    await served.close();
    await tmp.cleanup();
  });

  const words = ['say', 'bye', 'red', 'blue'];
  const model = path.join(tmp.dir, 'model');
  await execa(PYTHON, ['-m', 'trace_trainer', 'tiny', '--out', model, '--words', words.join(',')], {
    cwd: PROJECT_ROOT,
    env: { PYTHONPATH: path.join(PROJECT_ROOT, 'trainer') },
  });
  const storeDir = path.join(tmp.dir, 'artifacts');
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
    Math.max(0, ...(await readdir(path.join(adapterDir, 'trajectories')).catch(() => [] as string[])).map((f) => Number(/^iter-(\d+)\.jsonl$/.exec(f)?.[1] ?? 0)));

  const w1 = spawnGpuWorker(temporal.address);
  gpuWorkers.push(w1);
  await w1.ready;
  const client = new Client({ connection });
  const handle = await client.workflow.start('trainAdapterWorkflow', {
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
  const trainers = await trainerChildren(w1.pid);
  assert.equal(trainers.length, 1, 'the GPU worker runs one trainer process');
  const serverDetails = (await handle.describe()).raw.pendingActivities?.[0]?.heartbeatDetails?.payloads?.[0]?.data;
  await w1.kill9();
  // TRACE_EXIT_WITH_PARENT: the orphaned trainer notices within a second and exits.
  await waitFor('the orphaned trainer to exit', async () => ((await Promise.all(trainers.map(stopped))).every(Boolean) ? true : undefined), 10_000);
  const checkpointAtKill = await latestCheckpoint();
  const doneAtKill = await iterationsDone();
  assert.ok(checkpointAtKill >= 2 * CHECKPOINT_EVERY && doneAtKill < ITERATIONS, `the kill came mid-training (checkpoint ${checkpointAtKill}, ${doneAtKill} of ${ITERATIONS} done)`);

  const w2 = spawnGpuWorker(temporal.address);
  gpuWorkers.push(w2);
  await w2.ready;
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
  assert.equal(resumedAt, checkpointAtKill, `resumed from iteration ${resumedAt}, not the last checkpoint (${checkpointAtKill})`);
  // Iterations past the last checkpoint, counting one whose trajectories were written but whose checkpoint was not.
  assert.ok(redone <= CHECKPOINT_EVERY, `${redone} iterations redone (checkpoint every ${CHECKPOINT_EVERY})`);

  // The retry was the heartbeat timeout of the killed attempt, on attempt 2.
  const history = await handle.fetchHistory();
  const started = history.events!.filter((e) => e.activityTaskStartedEventAttributes).map((e) => e.activityTaskStartedEventAttributes!);
  assert.equal(started.length, 1);
  assert.equal(started[0].attempt, 2);
  assert.equal(decodeTimeoutType(started[0].lastFailure?.timeoutFailureInfo?.timeoutType), 'HEARTBEAT');
});
