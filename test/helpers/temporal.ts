import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseConfig, type Config, type ConfigInput } from '../../core/config.js';
import { PROJECT_ROOT, startTemporalDevServer, type DevServer, type TemporalSettings } from '../../infra/temporal.js';
import type { TestContext } from 'node:test';
import { Client, Connection, type ScheduleHandle } from '@temporalio/client';
import { NativeConnection, Worker } from '@temporalio/worker';
import type { Queue } from '../../workers/activities.js';
import type { RunningWorkers } from '../../workers/run.js';
import { buildTinyModel } from './trainer.js';
import {
  startScriptedLlm,
  type ChatRequest,
  type Script,
  type ScriptedLlm,
  type ScriptedReply,
} from './scripted-llm.js';

/**
 * Shared pieces of the tests that run the pipeline on a real Temporal dev server (the project's
 * .venv/bin/temporal on ephemeral ports): the server, worker child processes that can be
 * killed with SIGKILL, and a scripted policy/analyst for toy-orders whose requests are counted
 * per item (so a test can tell which work was redone).
 */
export interface TestTemporal extends DevServer {
  settings: TemporalSettings;
  dbFile: string;
}

export async function startTestTemporal(opts: { dbFile: string; port?: number }): Promise<TestTemporal> {
  const server = await startTemporalDevServer({ dbFile: opts.dbFile, port: opts.port ?? 0, uiPort: false });
  return {
    ...server,
    dbFile: opts.dbFile,
    settings: { address: server.address, namespace: 'default', embedded: true, uiBase: 'http://ui.test' },
  };
}

export async function tempDir(prefix: string): Promise<{ dir: string; cleanup(): Promise<void> }> {
  const dir = await mkdtemp(path.join(tmpdir(), prefix));
  return { dir, cleanup: () => rm(dir, { recursive: true, force: true }) };
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface Harness<L extends ScriptedLlm | undefined = ScriptedLlm> {
  dir: string;
  /** The scripted LLM (absent when the test passed no script). */
  llm: L;
  agents: Record<string, ScriptedLlm>;
  /** The dev server now running (a new one after restartTemporal). */
  readonly temporal: TestTemporal;
  client: Client;
  /** The tiny trainer model's directory (only with the `model` option). */
  readonly model: string;
  /** A worker as its own process (killable with SIGKILL), pointed at this server and stopped after the test; resolves once it polls. */
  spawnWorker(opts?: SpawnWorkerOptions): Promise<WorkerProcess>;
  /** Starts the dev server again on the same SQLite file and port, after the test stopped it (`temporal.stop()`). */
  restartTemporal(): Promise<TestTemporal>;
}

export interface HarnessOptions {
  prefix: string;
  /** In-process workers (default 1) polling `queues` (default trace-cpu); 0 where the workers are processes (spawnWorker). */
  workers?: number;
  queues?: Queue[];
  /** Scripted endpoints served beside the LLM, by name. */
  agents?: Record<string, Script>;
  /** A tiny random model for the real trainer, built at <dir>/model (`words`: extra vocabulary). */
  model?: { words?: readonly string[] };
  /** An in-process worker for a test-only workflow module on a queue of its own (a stage run alone). */
  testWorkflows?: { taskQueue: string; workflowsPath: string };
}

/**
 * A temp dir, the scripted LLM (none for `script` null), a dev server, in-process and spawned
 * workers, scripted agents, a tiny trainer model and a client, all torn down after the test.
 */
export async function startHarness(t: TestContext, script: Script, opts: HarnessOptions): Promise<Harness>;
export async function startHarness(t: TestContext, script: null, opts: HarnessOptions): Promise<Harness<undefined>>;
export async function startHarness(
  t: TestContext,
  script: Script | null,
  opts: HarnessOptions,
): Promise<Harness<ScriptedLlm | undefined>> {
  const tmp = await tempDir(opts.prefix);
  const llm = script ? await startScriptedLlm(script) : undefined;
  const agents: Record<string, ScriptedLlm> = {};
  for (const [name, agentScript] of Object.entries(opts.agents ?? {}))
    agents[name] = await startScriptedLlm(agentScript, name);
  const dbFile = path.join(tmp.dir, 'temporal.db');
  let temporal = await startTestTemporal({ dbFile });
  const { startWorkers, installRuntime } = await import('../../workers/run.js');
  const workers: RunningWorkers[] = [];
  for (let i = 0; i < (opts.workers ?? 1); i++)
    workers.push(
      await startWorkers({ queues: opts.queues ?? ['cpu'], settings: temporal.settings, shutdownGraceMs: 2000 }),
    );
  const processes: WorkerProcess[] = [];
  let testWorkflows: { worker: Worker; running: Promise<void>; connection: NativeConnection } | undefined;
  if (opts.testWorkflows) {
    installRuntime();
    const connection = await NativeConnection.connect({ address: temporal.address });
    const worker = await Worker.create({ connection, ...opts.testWorkflows });
    testWorkflows = { worker, running: worker.run(), connection };
  }
  const model = opts.model
    ? await buildTinyModel(path.join(tmp.dir, 'model'), opts.model.words ? ['--words', opts.model.words.join(',')] : [])
    : undefined;
  const connection = await Connection.connect({ address: temporal.address });
  t.after(async () => {
    for (const w of processes) await w.stop();
    if (testWorkflows) {
      testWorkflows.worker.shutdown();
      await testWorkflows.running;
      await testWorkflows.connection.close();
    }
    await connection.close();
    for (const w of workers) await w.shutdown();
    await temporal.stop();
    await llm?.close();
    for (const a of Object.values(agents)) await a.close();
    await tmp.cleanup();
  });
  return {
    dir: tmp.dir,
    llm,
    agents,
    get temporal() {
      return temporal;
    },
    client: new Client({ connection }),
    get model() {
      if (!model) throw new Error('startHarness: no tiny model was built (pass the model option)');
      return model;
    },
    async spawnWorker(o = {}) {
      const w = await spawnWorker(temporal.settings, o);
      processes.push(w);
      await w.ready;
      return w;
    },
    async restartTemporal() {
      temporal = await startTestTemporal({ dbFile, port: temporal.port });
      return temporal;
    },
  };
}

let bundlePath: Promise<string> | undefined;
/** The workflow bundle written once per test process, so restarted workers start in seconds. */
export function workflowBundleFile(): Promise<string> {
  bundlePath ??= (async () => {
    const { buildWorkflowBundle } = await import('../../workers/run.js');
    const { code } = await buildWorkflowBundle();
    const dir = await mkdtemp(path.join(tmpdir(), 'trace-bundle-'));
    const file = path.join(dir, 'workflows.js');
    await writeFile(file, code);
    return file;
  })();
  return bundlePath;
}

export interface WorkerProcess {
  child: ChildProcess;
  /** Resolves once the worker polls its queue. */
  ready: Promise<void>;
  exited: Promise<number | null>;
  output(): string;
  kill9(): Promise<void>;
  stop(): Promise<void>;
}

export interface SpawnWorkerOptions {
  /** workers/embedded.ts (`trace worker`: trace-cpu and trace-gpu, the default) or workers/gpu.ts (trace-gpu alone). */
  entry?: 'embedded' | 'gpu';
  env?: Record<string, string>;
}

/** A worker entry point as a separate process pointed at the test server. */
export async function spawnWorker(settings: TemporalSettings, opts: SpawnWorkerOptions = {}): Promise<WorkerProcess> {
  const entry = opts.entry ?? 'embedded';
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(PROJECT_ROOT, 'workers', `${entry}.ts`)], {
    cwd: PROJECT_ROOT,
    env: {
      ...process.env,
      TEMPORAL_ADDRESS: settings.address,
      TEMPORAL_NAMESPACE: settings.namespace,
      // Only trace-cpu runs workflows: the GPU entry needs no bundle.
      ...(entry === 'embedded' ? { TRACE_WORKFLOW_BUNDLE: await workflowBundleFile() } : {}),
      ...opts.env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const polling = entry === 'embedded' ? /\[worker\] trace-cpu on/ : /\[worker\] trace-gpu on/;
  let out = '';
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const ready = new Promise<void>((resolve, reject) => {
    const onData = (d: Buffer) => {
      out = (out + d).slice(-20_000);
      if (polling.test(out)) resolve();
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    exited.then((code) => reject(new Error(`worker exited (${code}) before polling: ${out.slice(-2000)}`)));
  });
  ready.catch(() => {});
  return {
    child,
    ready,
    exited,
    output: () => out,
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

// ── a scripted policy + analyst for toy-orders ──────────────────────────────────────────────

export const VERIFY = 'verify_preconditions';
export const COMMUNICATE = 'communicate_results';
const DESCRIPTIONS = {
  [VERIFY]:
    'Checks the state and rules that an action depends on before acting. LACKING when the agent acts or answers without checking what it needed.',
  [COMMUNICATE]:
    'States the concrete outcome or value the user asked for. LACKING when the user is left without the requested value or result.',
};

/** Task of a request: the opening user message for the policy, the trajectory id for the analyst. */
export function itemOf(req: ChatRequest): { kind: 'policy' | 'discovery' | 'label'; key: string; firstTurn: boolean } {
  const schema = req.response_format?.json_schema?.name;
  if (schema === 'capability_dictionary') return { kind: 'discovery', key: 'discovery', firstTurn: true };
  if (schema) {
    const traj = /trajectory (toy-orders\/\S+\/t\d+)/.exec(req.messages[1]?.content ?? '')?.[1] ?? '?';
    return {
      kind: 'label',
      key: `pass${Number(req.seed)}:${traj}`,
      firstTurn: !req.messages.some((m) => m.role === 'assistant'),
    };
  }
  const opening = req.messages.find((m) => m.role === 'user')?.content ?? '';
  return { kind: 'policy', key: opening, firstTurn: !req.messages.some((m) => m.role === 'assistant') };
}

/**
 * Deterministic replies: the policy answers the status and count tasks correctly (successes) and
 * everything else with "Done." (failures); the analyst finds two capabilities and labels
 * verify_preconditions LACKING exactly on failures, so it is selected in every pass.
 */
export function pipelineReply(req: ChatRequest): ScriptedReply {
  const { kind } = itemOf(req);
  if (kind === 'discovery') {
    return {
      content: JSON.stringify({
        capabilities: Object.entries(DESCRIPTIONS).map(([name, description]) => ({ name, description })),
      }),
    };
  }
  if (kind === 'label') {
    const text = req.messages[1]?.content ?? '';
    const failed = /outcome: FAILURE/.test(text);
    return {
      content: JSON.stringify({
        labels: { [VERIFY]: failed ? 'LACKING' : 'PRESENT', [COMMUNICATE]: failed ? 'PRESENT' : 'NA' },
      }),
    };
  }
  const opening = req.messages.find((m) => m.role === 'user')?.content ?? '';
  if (opening.includes('O-1007')) return { content: 'Your order O-1007 is delivered.' };
  if (opening.includes('delivered so far')) return { content: 'You have 3 delivered orders.' };
  return { content: 'Done.' };
}

/** Requests per item, counting only first turns (an episode or a labeling started). */
export function startsPerItem(requests: readonly ChatRequest[], kind: 'policy' | 'label'): Map<string, number> {
  const counts = new Map<string, number>();
  for (const r of requests) {
    const it = itemOf(r);
    if (it.kind !== kind || !it.firstTurn) continue;
    counts.set(it.key, (counts.get(it.key) ?? 0) + 1);
  }
  return counts;
}

/** A small pipeline config against the scripted server: stage 1 + base evaluation, stages 2–4 off. */
export function pipelineConfig(baseURL: string, storeDir: string, extra: Partial<ConfigInput> = {}): Config {
  const role = { baseURL, model: 'scripted-model', timeoutMs: 3_000, concurrency: 2 };
  return parseConfig({
    name: 'pipeline-test',
    env: { name: 'toy-orders', maxTasks: 6 },
    llm: { policy: role, analyst: role },
    store: { kind: 'local', dir: storeDir },
    rollouts: { trialsPerTask: 2, batchSize: 3, maxConcurrentBatches: 2, maxSteps: 6 },
    analysis: { passes: 3, minPassesSelected: 2 },
    stages: { synthesis: false, training: false, gate: false, evaluation: true },
    evaluation: { maxTasks: 2 },
    ...extra,
  });
}

/** Triggers `schedule` and waits until its `n`-th action has started; returns that workflow's id. */
export async function triggerSchedule(schedule: ScheduleHandle, n: number): Promise<string> {
  await schedule.trigger();
  for (let i = 0; i < 200; i++) {
    const actions = (await schedule.describe()).info.recentActions;
    if (actions.length >= n) return actions[n - 1].action.workflow.workflowId;
    await sleep(100);
  }
  throw new Error(`schedule action ${n} did not start`);
}

/** A script that answers as pipelineReply after `delayMs(req)`: slow replies keep items in flight when a test kills something. */
export const slowPipelineReply =
  (delayMs: (req: ChatRequest) => number): Script =>
  async (req) => {
    const ms = delayMs(req);
    if (ms > 0) await sleep(ms);
    return pipelineReply(req);
  };

/** LLM roles for the kill tests: one policy request at a time (so a kill finds a known number in flight), two analyst requests. */
export const oneAtATimeRoles = (baseURL: string) => ({
  policy: { baseURL, model: 'scripted-model', timeoutMs: 5_000, concurrency: 1 },
  analyst: { baseURL, model: 'scripted-model', timeoutMs: 5_000, concurrency: 2 },
});

/** Activity timeouts that let a test lose a worker and recover in seconds. */
export const FAST_TIMEOUTS = { shortMs: 20_000, longMs: 60_000, heartbeatMs: 3_000, maximumAttempts: 6 };
