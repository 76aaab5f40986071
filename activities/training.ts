import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { ApplicationFailure } from '@temporalio/activity';
import { execa } from 'execa';
import { z } from 'zod';
import type { Config } from '../core/config.js';
import { gateTrainerConfig, grpoTrainerConfig } from '../core/trainer-config.js';
import type { ArtifactRef } from '../core/artifact-ref.js';
import { ArtifactRefSchema } from '../core/artifact-ref.js';
import { ValidationVerdictSchema } from '../core/synthesis.js';
import { openStore, type ArtifactStore } from '../store/index.js';
import { runKeys } from '../store/keys.js';
import { serveEnvironment } from '../envs/protocol/server.js';
import { startGeneratedEnv } from './synthesis/candidate.js';
import type { SandboxedEnvironment, SandboxOptions } from '../envs/sandbox/index.js';
import { SPEECH } from '../envs/environment.js';
import { drawSeeds } from './synthesis/validate.js';
import type { Environment } from '../envs/environment.js';
import { HttpEnvironment } from '../envs/protocol/client.js';
import { torchThreadsEnv, trainerSlots } from '../infra/cpu-share.js';
import { PROJECT_ROOT } from '../infra/temporal.js';
import { goldDemonstrations } from './gold-demonstrations.js';
import { activityContext, KEEPALIVE_MS } from '../infra/activity-context.js';

/**
 * Stages 3–4 on task queue trace-gpu: each activity runs `python -m trace_trainer` in its own
 * process group, turns its JSON-line progress into heartbeats that carry the last checkpoint URI,
 * resumes from that checkpoint on retry, and kills the whole group on cancellation or shutdown.
 */

const TrainerEventSchema = z
  .object({
    event: z.string(),
    type: z.string().optional(),
    message: z.string().optional(),
    iteration: z.number().optional(),
    checkpoint_uri: z.string().nullable().optional(),
  })
  .passthrough();
type TrainerEvent = z.infer<typeof TrainerEventSchema>;

const HeartbeatSchema = z
  .object({
    checkpointUri: z.string().optional(),
    iteration: z.number().optional(),
    /** Trainer wall-clock seconds of earlier attempts, so a resumed activity reports the total. */
    trainerSeconds: z.number().optional(),
  })
  .passthrough();
export type TrainingHeartbeat = z.infer<typeof HeartbeatSchema>;

/** checkpoints/latest.json, written by the trainer after each checkpoint is complete. */
const LatestCheckpointSchema = z.object({ uri: z.string(), iteration: z.number().int() });

const DoneAdapterSchema = z.object({
  adapter_uri: z.string(),
  adapter: ArtifactRefSchema,
  checkpoint_uri: z.string(),
  iterations: z.number().int(),
  metrics: z.array(
    z
      .object({
        mean_reward: z.number(),
        informative_share: z.number(),
        tokens_per_s: z.number(),
        heldout_reward_before: z.number().optional(),
        heldout_reward: z.number().optional(),
      })
      .passthrough(),
  ),
  peak_rss_mb: z.number().optional(),
});
const DoneGateSchema = z.object({
  gate_uri: z.string(),
  manifest: ArtifactRefSchema,
  gates: ArtifactRefSchema,
  routing: z.record(z.string(), z.number()),
  examples: z.object({ policy: z.number().int(), gold: z.number().int() }),
  peak_rss_mb: z.number().optional(),
});

export interface TrainAdapterInput {
  runId: string;
  config: Config;
  capability: { name: string } & Record<string, unknown>;
  /** The synthesized environment's module source in the artifact store (stage 2's output). */
  environment?: ArtifactRef;
  /** Or an environment module on disk (reference envs, tests). */
  envModule?: string;
  /** Or an environment already served over the env protocol. */
  envUrl?: string;
  /**
   * A previous run's adapter (its adapter_model.safetensors) the LoRA weights start from:
   * scheduled retraining continues it for this run's iteration budget.
   */
  initAdapter?: ArtifactRef;
}

export interface TrainAdapterResult {
  /** adapter_model.safetensors; its directory also holds adapter_config.json (PEFT layout). */
  adapter: ArtifactRef;
  adapterUri: string;
  checkpointUri: string;
  iterations: number;
  resumedFrom?: string;
  /** The previous adapter (input.initAdapter) this one continued from. */
  continuedFrom?: ArtifactRef;
  /** Mean reward per iteration: the learning curve. */
  curve: number[];
  /** Mean reward on held-out seeds after `iteration` updates (0 = before training; training.heldoutSeeds). */
  heldoutCurve: { iteration: number; meanReward: number }[];
  informativeShare: number[];
  tokensPerSecond: number;
  /** Where the trainer ran ('cpu', 'cuda', …) and its wall-clock seconds over every attempt. */
  device: string;
  durationSeconds: number;
  /** The trainer process's peak resident memory (MiB), when it reported it. */
  peakRssMb?: number;
  /** Gold demonstrations stored for the gate (gate.goldDemonstrations), and seeds whose replay failed. */
  goldDemonstrations?: { stored: number; rejected: { seed: number; reason: string }[] };
}

export interface FitGateInput {
  runId: string;
  config: Config;
  adapters: { capability: string; adapter: ArtifactRef }[];
}

export interface FitGateResult {
  gateUri: string;
  manifest: ArtifactRef;
  gates: ArtifactRef;
  adapters: string[];
  /** Share of assistant tokens the fitted gate routes (top-1) to each adapter, by capability. */
  routing: Record<string, number>;
  /** Training examples by origin: the policy's successful trajectories and gold demonstrations. */
  examples: { policy: number; gold: number };
  device: string;
  durationSeconds: number;
  /** The trainer process's peak resident memory (MiB), when it reported it. */
  peakRssMb?: number;
}

function heldoutCurve(metrics: z.infer<typeof DoneAdapterSchema>['metrics']): TrainAdapterResult['heldoutCurve'] {
  const before = metrics[0]?.heldout_reward_before;
  const after = metrics.flatMap((m, i) =>
    m.heldout_reward === undefined ? [] : [{ iteration: i + 1, meanReward: m.heldout_reward }],
  );
  return before === undefined ? after : [{ iteration: 0, meanReward: before }, ...after];
}

export interface TrainingDeps {
  openStore(config: Config['store']): ArtifactStore;
}

/** Stages 3–4 on trace-gpu: GRPO per capability (trainAdapter) and the MoE gate over the adapters (fitGate). */
export function createTrainingActivities(deps: TrainingDeps = { openStore }) {
  return {
    trainAdapter: (input: TrainAdapterInput) => train(input, deps),
    fitGate: (input: FitGateInput) => fit(input, deps),
  };
}

async function train(input: TrainAdapterInput, deps: TrainingDeps): Promise<TrainAdapterResult> {
  const { config, runId, capability } = input;
  const store = deps.openStore(config.store);
  const prefixKey = runKeys.adapter(runId, capability.name);
  const prefixUri = store.uri(prefixKey);
  const latestKey = `${prefixKey}/checkpoints/latest.json`;
  const resume = await resumePoint(async () =>
    (await store.stat(latestKey)) ? LatestCheckpointSchema.parse(await store.getJson(latestKey)).uri : undefined,
  );
  const env = await openEnvServer(input, store);
  try {
    const trainerConfig = grpoTrainerConfig(config, {
      ...trainerPaths,
      envUrl: env.url,
      outputUri: prefixUri,
      ...(input.initAdapter ? { initAdapterUri: parentUri(input.initAdapter.uri) } : {}),
    });
    const run = await runTrainer(config, 'grpo', trainerConfig, resume ? ['--resume', resume] : []);
    const d = DoneAdapterSchema.parse(run.done);
    const gold =
      config.stages.gate && config.gate.goldDemonstrations > 0
        ? await storeGoldDemonstrations(config, store, prefixKey, env.env)
        : undefined;
    return {
      adapter: d.adapter,
      adapterUri: d.adapter_uri,
      checkpointUri: d.checkpoint_uri,
      iterations: d.iterations,
      ...(resume ? { resumedFrom: resume } : {}),
      ...(input.initAdapter ? { continuedFrom: input.initAdapter } : {}),
      curve: d.metrics.map((m) => m.mean_reward),
      heldoutCurve: heldoutCurve(d.metrics),
      informativeShare: d.metrics.map((m) => m.informative_share),
      tokensPerSecond: d.metrics.length ? d.metrics.reduce((s, m) => s + m.tokens_per_s, 0) / d.metrics.length : 0,
      device: run.device,
      durationSeconds: run.seconds,
      ...(d.peak_rss_mb !== undefined ? { peakRssMb: d.peak_rss_mb } : {}),
      ...(gold ? { goldDemonstrations: gold } : {}),
    };
  } finally {
    await env.close();
  }
}

async function fit(input: FitGateInput, deps: TrainingDeps): Promise<FitGateResult> {
  const { config, runId } = input;
  if (input.adapters.length === 0)
    throw ApplicationFailure.nonRetryable('fitGate: no adapters to combine', 'InvalidInput');
  const store = deps.openStore(config.store);
  const gateConfig = gateTrainerConfig(config, {
    ...trainerPaths,
    adapters: input.adapters.map((a) => ({ name: a.capability, uri: parentUri(a.adapter.uri) })),
    trajectories: input.adapters.map((a) => store.uri(`${runKeys.adapter(runId, a.capability)}/trajectories`)),
    outputUri: store.uri(runKeys.gate(runId)),
  });
  const run = await runTrainer(config, 'gate', gateConfig, []);
  const d = DoneGateSchema.parse(run.done);
  return {
    gateUri: d.gate_uri,
    manifest: d.manifest,
    gates: d.gates,
    adapters: input.adapters.map((a) => a.capability),
    routing: d.routing,
    examples: d.examples,
    device: run.device,
    durationSeconds: run.seconds,
    ...(d.peak_rss_mb !== undefined ? { peakRssMb: d.peak_rss_mb } : {}),
  };
}

/**
 * Replays gold solutions of n seeds drawn at random (fixed seeds 0..n-1 let a module hand over wrong
 * gold only there: rerun 17) through the capability env and stores the accepted ones next to the
 * trainer's trajectories, where fitGate reads them (the same key on a retry, which replaces them).
 */
async function storeGoldDemonstrations(config: Config, store: ArtifactStore, prefixKey: string, env: Environment) {
  const seeds = drawSeeds(config.gate.goldDemonstrations);
  const gold = await goldDemonstrations(env, seeds, 'gold-solution');
  if (gold.trajectories.length > 0) {
    await store.put(
      `${prefixKey}/trajectories/gold-demonstrations.jsonl`,
      gold.trajectories.map((t) => JSON.stringify(t)).join('\n') + '\n',
    );
  }
  return { stored: gold.trajectories.length, rejected: gold.rejected };
}

/**
 * The checkpoint to continue from: the newest, which the prefix's latest.json names (the server
 * holds only the heartbeats the SDK's throttle let through, which may name an older one), else the
 * last one a heartbeat reported.
 */
async function resumePoint(latestInPrefix: () => Promise<string | undefined>): Promise<string | undefined> {
  const latest = await latestInPrefix();
  if (latest) return latest;
  return HeartbeatSchema.safeParse(activityContext()?.info.heartbeatDetails).data?.checkpointUri;
}

async function openEnvServer(
  input: TrainAdapterInput,
  store: ArtifactStore,
): Promise<{ url: string; env: Environment; close(): Promise<void> }> {
  if (input.envUrl) {
    const remote = await HttpEnvironment.connect(input.envUrl);
    return { url: input.envUrl, env: remote, close: () => remote.close() };
  }
  if (!input.environment && !input.envModule) {
    throw ApplicationFailure.nonRetryable(
      'trainAdapter: one of environment, envModule or envUrl is required',
      'InvalidInput',
    );
  }
  // Validation's per-process limits (episodesPerProcess above all: no process here serves more
  // episodes than validation's did); budgetMs and cpuSeconds are totals over the env's life, which
  // is longer here than in validation, so they keep the sandbox defaults (1 h busy, 600 s CPU).
  const { budgetMs: _budget, cpuSeconds: _cpu, ...sandbox } = input.config.synthesis.sandbox;
  let env: SandboxedEnvironment;
  if (input.environment) {
    const source = await store.getText(input.environment);
    env = await startGeneratedEnv({ source }, sandbox, await goldAnchorCapsOf(store, input, source));
  } else env = await startGeneratedEnv({ modulePath: path.resolve(PROJECT_ROOT, input.envModule!) }, sandbox);
  try {
    const served = await serveEnvironment(env);
    return {
      url: served.url,
      env,
      async close() {
        await served.close();
        await env.close();
      },
    };
  } catch (err) {
    await env.close();
    throw err;
  }
}

/**
 * What training holds its episodes to, from this run's verdict on the environment
 * (`SandboxOptions.goldAnchor`); none without a verdict.
 */
export async function goldAnchorCapsOf(
  store: ArtifactStore,
  input: TrainAdapterInput,
  source: string,
): Promise<Pick<SandboxOptions, 'goldAnchor'>> {
  const key = runKeys.verdict(input.runId, input.capability.name, source);
  if (!(await store.stat(key))) {
    console.warn(`trainAdapter: no verdict at ${key}; episodes are paid as the environment scores them`);
    return {};
  }
  const verdict = ValidationVerdictSchema.parse(await store.getJson(key));
  const metrics = verdict.checks.find((c) => c.check === 'verifier')?.metrics ?? {};
  return { goldAnchor: goldAnchorCaps(metrics, input.config.synthesis.maxTrivialReward) };
}

/**
 * The caps of check 5's metrics. An episode lacking one of its seed's gold calls is paid no more
 * than check 5 saw gold's calls perturbed paid, one lacking gold's words no more than gold without
 * its messages; and either, where validation saw that part matter at all, no more than a trivial
 * policy may score: check 5 counts a play at gold less the margin (0.9) as lower, and rerun 37 had
 * every play lacking a call paid 0.9, rerun 38 every one lacking the words.
 */
export function goldAnchorCaps(
  metrics: Record<string, number>,
  maxTrivialReward: number,
): NonNullable<SandboxOptions['goldAnchor']> {
  // What no play measured is worth nothing: a verdict from before these metrics, or no gold that spoke or called.
  const callsCap = Math.min(metrics.missingCallCap ?? 0, maxTrivialReward);
  const wordsFree = metrics.silentEndingsBelowGold === 0;
  const wordsCap = Math.min(metrics.silentEndingCap ?? 0, wordsFree ? 1 : maxTrivialReward);
  // A verdict from before goldSpeech was recorded holds gold to its views alone.
  return { callsCap, wordsCap, goldSpeech: SPEECH[metrics.goldSpeech ?? 0] ?? 'silent' };
}

const trainerPaths = {
  /** Relative paths that exist under the project are made absolute; anything else (an HF model id) is kept. */
  resolve: (name: string) => {
    const abs = path.resolve(PROJECT_ROOT, name);
    return existsSync(abs) ? abs : name;
  },
  absolute: (dir: string) => path.resolve(PROJECT_ROOT, dir),
};

function parentUri(uri: string): string {
  return uri.slice(0, uri.lastIndexOf('/'));
}

/** GPUs this worker may hand out, one per concurrent activity (TRACE_GPU_IDS="0,1"); empty = leave CUDA_VISIBLE_DEVICES alone. */
const freeGpus = (process.env.TRACE_GPU_IDS ?? '').split(',').filter(Boolean);

/** How long SIGTERM waits for the trainer's checkpoint before SIGKILL. */
const KILL_GRACE_MS = Number(process.env.TRACE_TRAINER_KILL_GRACE_MS ?? 30_000);

async function runTrainer(
  config: Config,
  command: 'grpo' | 'gate',
  trainerConfig: object,
  extraArgs: string[],
): Promise<{ done: TrainerEvent; device: string; seconds: number }> {
  // GRPO runs beside the worker's other trainers (its share of the cores); the gate, after them all.
  const threads = torchThreadsEnv(command === 'grpo' ? trainerSlots() : 1);
  const ctx = activityContext();
  const started = Date.now();
  const dir = await mkdtemp(path.join(os.tmpdir(), 'trace-trainer-'));
  const configPath = path.join(dir, `${command}.json`);
  await writeFile(configPath, JSON.stringify(trainerConfig, null, 2));
  const gpu = freeGpus.shift();
  const child = execa(
    path.resolve(PROJECT_ROOT, config.training.python),
    ['-m', 'trace_trainer', command, '--config', configPath, ...extraArgs],
    {
      cwd: PROJECT_ROOT,
      env: {
        PYTHONPATH: path.join(PROJECT_ROOT, 'trainer'),
        PYTHONUNBUFFERED: '1',
        TRACE_EXIT_WITH_PARENT: '1',
        ...threads,
        ...(gpu !== undefined ? { CUDA_VISIBLE_DEVICES: gpu } : {}),
      },
      detached: true, // its own process group: cancellation kills the trainer and everything it started
      stdin: 'ignore',
      buffer: false,
      reject: false,
    },
  );
  const pid = child.pid;
  const stderrTail: string[] = [];
  child.stderr?.on('data', (chunk: Buffer) => {
    stderrTail.push(...chunk.toString('utf8').split('\n').filter(Boolean));
    stderrTail.splice(0, Math.max(0, stderrTail.length - 20));
  });

  let lastDetails: TrainingHeartbeat = HeartbeatSchema.safeParse(ctx?.info.heartbeatDetails).data ?? {};
  const earlierSeconds = lastDetails.trainerSeconds ?? 0;
  const seconds = () => earlierSeconds + (Date.now() - started) / 1000;
  let device = String(trainerConfig && (trainerConfig as { device?: unknown }).device);
  let terminal: TrainerEvent | undefined;
  const killGroup = (signal: NodeJS.Signals) => {
    if (pid === undefined) return;
    try {
      process.kill(-pid, signal);
    } catch {
      // the group is already gone
    }
  };
  let killTimer: NodeJS.Timeout | undefined;
  const onAbort = () => {
    killGroup('SIGTERM'); // the trainer checkpoints the iterations it finished, then exits
    killTimer = setTimeout(() => killGroup('SIGKILL'), KILL_GRACE_MS);
  };
  ctx?.cancellationSignal.addEventListener('abort', onAbort);
  const keepalive =
    ctx && setInterval(() => ctx.heartbeat({ ...lastDetails, trainerSeconds: seconds() }), KEEPALIVE_MS);
  try {
    const lines = readline.createInterface({ input: child.stdout! });
    for await (const line of lines) {
      const parsed = TrainerEventSchema.safeParse(safeJson(line));
      if (!parsed.success) continue;
      const e = parsed.data;
      if (e.event === 'started' && typeof e.device === 'string') device = e.device;
      if (e.event === 'progress' || e.event === 'checkpoint') {
        lastDetails = {
          ...lastDetails,
          ...(e.iteration !== undefined ? { iteration: e.iteration } : {}),
          ...(e.checkpoint_uri ? { checkpointUri: e.checkpoint_uri } : {}),
          ...(typeof e.mean_reward === 'number' ? { meanReward: e.mean_reward } : {}),
        };
        ctx?.heartbeat({ ...lastDetails, trainerSeconds: seconds() });
      } else if (e.event === 'done' || e.event === 'error') {
        terminal = e;
      }
    }
    const result = await child;
    if (ctx?.cancellationSignal.aborted) throw ctx.cancellationSignal.reason;
    if (terminal?.event === 'done') return { done: terminal, device, seconds: Math.round(seconds() * 10) / 10 };
    if (terminal?.event === 'error') throw trainerFailure(terminal);
    throw ApplicationFailure.retryable(
      `trainer ${command} exited with ${result.exitCode ?? result.signal} and no result line; stderr: ${stderrTail.slice(-5).join(' | ')}`,
      'TrainerCrashed',
    );
  } finally {
    ctx?.cancellationSignal.removeEventListener('abort', onAbort);
    if (keepalive) clearInterval(keepalive);
    if (killTimer) clearTimeout(killTimer);
    killGroup('SIGKILL'); // nothing the trainer started outlives the activity
    if (gpu !== undefined) freeGpus.push(gpu);
    await rm(dir, { recursive: true, force: true });
  }
}

function safeJson(line: string): unknown {
  try {
    return JSON.parse(line);
  } catch {
    return undefined;
  }
}

/** `retryable:<Name>` / `fatal:<Name>` from the trainer's error line → a Temporal failure of that type. */
export function trainerFailure(e: Pick<TrainerEvent, 'type' | 'message'>): ApplicationFailure {
  const [kind, ...rest] = (e.type ?? 'retryable:TrainerError').split(':');
  const name = rest.join(':') || 'TrainerError';
  const message = e.message ?? name;
  return kind === 'fatal'
    ? ApplicationFailure.nonRetryable(message, name)
    : ApplicationFailure.retryable(message, name);
}

export const { trainAdapter, fitGate } = createTrainingActivities();
