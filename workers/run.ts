import path from 'node:path';
import {
  bundleWorkflowCode,
  DefaultLogger,
  NativeConnection,
  Runtime,
  Worker,
  type LogLevel,
  type WorkflowBundleWithSourceMap,
} from '@temporalio/worker';
import { trainerSlots } from '../infra/cpu-share.js';
import { connectionOptions, PROJECT_ROOT, temporalSettings, type TemporalSettings } from '../infra/temporal.js';
import { TASK_QUEUE_CPU, TASK_QUEUE_GPU } from '../workflows/types.js';
import { createCpuActivities, createGpuActivities, type Queue } from './activities.js';

/**
 * Worker construction shared by workers/cpu.ts, workers/gpu.ts, workers/embedded.ts and
 * `trace worker`. The Temporal runtime turns SIGINT/SIGTERM into a graceful shutdown: polling
 * stops, running activities are cancelled and given `shutdownGraceTime` to checkpoint.
 */
export const WORKFLOWS_PATH = path.join(PROJECT_ROOT, 'workflows', 'index.ts');

let bundle: Promise<WorkflowBundleOption> | undefined;
type WorkflowBundleOption = WorkflowBundleWithSourceMap | { codePath: string };
/**
 * The workflow bundle, built once per process (webpack; seconds), or the prebuilt file named by
 * TRACE_WORKFLOW_BUNDLE (tests that restart workers build it once).
 */
export function workflowBundle(): Promise<WorkflowBundleOption> {
  const prebuilt = process.env.TRACE_WORKFLOW_BUNDLE;
  bundle ??= prebuilt ? Promise.resolve({ codePath: prebuilt }) : buildWorkflowBundle();
  return bundle;
}

export function buildWorkflowBundle(): Promise<WorkflowBundleWithSourceMap> {
  return bundleWorkflowCode({ workflowsPath: WORKFLOWS_PATH, logger: quietBundlerLogger });
}

const quietBundlerLogger = {
  log() {},
  trace() {},
  debug() {},
  info() {},
  warn(message: string) {
    console.warn(message);
  },
  error(message: string) {
    console.error(message);
  },
};

export interface WorkerOptions {
  queues: Queue[];
  settings?: TemporalSettings;
  /** Concurrent CPU activities (rollout batches, labeling passes); default 8. */
  cpuConcurrency?: number;
  shutdownGraceMs?: number;
}

export interface RunningWorkers {
  workers: Worker[];
  connection: NativeConnection;
  /** Resolves when every worker has shut down (after a signal or `shutdown()`). */
  done: Promise<void>;
  shutdown(): Promise<void>;
}

let runtimeInstalled = false;
/** SDK logs at TRACE_WORKER_LOG_LEVEL (default WARN): state changes at INFO drown the useful lines. */
export function installRuntime(): void {
  if (runtimeInstalled) return;
  runtimeInstalled = true;
  try {
    Runtime.install({ logger: new DefaultLogger((process.env.TRACE_WORKER_LOG_LEVEL ?? 'WARN') as LogLevel) });
  } catch {
    // Already instantiated by an earlier worker or connection in this process: keep it.
  }
}

export async function startWorkers(opts: WorkerOptions): Promise<RunningWorkers> {
  installRuntime();
  const settings = opts.settings ?? temporalSettings();
  const connection = await NativeConnection.connect(connectionOptions(settings));
  const shutdownGraceTime = opts.shutdownGraceMs ?? 30_000;
  const workers: Worker[] = [];
  for (const queue of opts.queues) {
    const common = { connection, namespace: settings.namespace, shutdownGraceTime };
    workers.push(
      queue === 'cpu'
        ? await Worker.create({
            ...common,
            taskQueue: TASK_QUEUE_CPU,
            workflowBundle: await workflowBundle(),
            activities: createCpuActivities(),
            maxConcurrentActivityTaskExecutions: opts.cpuConcurrency ?? Number(process.env.TRACE_CPU_CONCURRENCY ?? 8),
          })
        : await Worker.create({
            ...common,
            taskQueue: TASK_QUEUE_GPU,
            activities: createGpuActivities(),
            maxConcurrentActivityTaskExecutions: trainerSlots(),
          }),
    );
  }
  const done = Promise.all(workers.map((w) => w.run())).then(() => connection.close());
  return {
    workers,
    connection,
    done,
    async shutdown() {
      for (const w of workers) if (w.getState() === 'RUNNING') w.shutdown();
      await done;
    },
  };
}

/** Entry-point body for workers/*.ts: run until a signal, log one line per queue. */
export async function runWorkersMain(queues: Queue[]): Promise<void> {
  const settings = temporalSettings();
  const running = await startWorkers({ queues, settings });
  for (const w of running.workers) {
    const names = [...w.options.activities.keys()];
    console.log(
      `[worker] ${w.options.taskQueue} on ${settings.address} (${settings.namespace}): ${names.length} activities (${names.join(', ')})`,
    );
  }
  await running.done;
  console.log('[worker] shut down');
}
