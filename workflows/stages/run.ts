import {
  defineQuery,
  setCurrentDetails,
  setHandler,
  upsertMemo,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { EvaluationStageResult } from '../../activities/evaluation.js';
import type { Config } from '../../core/config.js';
import * as SA from '../search-attributes.js';
import {
  PROGRESS_QUERY,
  type CapabilityProgress,
  type CapabilityResult,
  type ConfigurableStage,
  type PipelineInput,
  type PipelineProgress,
  type PipelineStage,
  type TimeoutOverrides,
} from '../types.js';

export const progressQuery = defineQuery<PipelineProgress>(PROGRESS_QUERY);

/**
 * One pipeline run's bookkeeping, in one place: the `progress` query answer, the search attributes,
 * the memo and the UI's current details. The stages report to it; they never touch those directly.
 */
export interface Run {
  readonly runId: string;
  readonly config: Config;
  readonly timeouts?: TimeoutOverrides;
  readonly progress: Readonly<PipelineProgress>;
  enter(stage: PipelineStage, message?: string): void;
  rolloutBatchesPlanned(total: number): void;
  /** One rollout batch, counted done (with its trajectories) or failed. */
  rolloutBatch<R extends { count: number; successes: number }>(fn: () => Promise<R>): Promise<R>;
  /** Rollouts collected elsewhere: their counts as if collected here. */
  rolloutsImported(counts: { trajectories: number; successes: number }): void;
  /** The rollouts are in: their pass rate becomes a search attribute. */
  rolloutsDone(): void;
  /** One stage-1 labeling pass, counted done or failed. */
  labelingPass<R>(fn: () => Promise<R>): Promise<R>;
  capabilitiesSelected(names: string[]): void;
  capabilitiesPlanned(entries: Omit<CapabilityProgress, 'status'>[]): void;
  capabilityStarted(index: number): void;
  capabilitySettled(index: number, result: Pick<CapabilityResult, 'status' | 'detail'>): void;
  evaluated(evaluation: EvaluationStageResult): void;
}

const CONFIGURABLE: ConfigurableStage[] = ['synthesis', 'training', 'gate', 'evaluation'];

export function startRun(input: PipelineInput): Run {
  const { config, timeouts } = input;
  const progress: PipelineProgress = {
    runId: input.runId ?? workflowInfo().workflowId,
    stage: 'starting',
    rollouts: { batchesDone: 0, batchesFailed: 0, batchesTotal: 0, trajectories: 0, successes: 0 },
    labeling: { passesDone: 0, passesFailed: 0, passesTotal: config.analysis.passes },
    capabilities: [],
    notConfigured: CONFIGURABLE.filter((s) => !config.stages[s]),
  };
  setHandler(progressQuery, () => progress);
  upsertMemo({
    config: {
      name: config.name,
      env: config.env.name,
      maxTasks: config.env.maxTasks ?? null,
      trialsPerTask: config.rollouts.trialsPerTask,
      policyModel: config.llm.policy.model ?? 'default',
      analystModel: config.llm.analyst.model ?? 'default',
      passes: config.analysis.passes,
      minPassesSelected: config.analysis.minPassesSelected,
      delta: config.analysis.delta,
      coverage: config.analysis.coverage,
      stages: config.stages,
      store: config.store.kind,
    },
  });
  upsertSearchAttributes([{ key: SA.TraceEnv, value: config.env.name }]);

  const r = progress.rollouts;
  const l = progress.labeling;
  const run: Run = {
    runId: progress.runId,
    config,
    timeouts,
    progress,
    enter(stage, message) {
      progress.stage = stage;
      progress.message = message;
      upsertSearchAttributes([{ key: SA.TraceStage, value: stage }]);
      // The run's "current details" in the Temporal UI.
      setCurrentDetails(`**${stage}**${message ? `: ${message}` : ''}`);
    },
    rolloutBatchesPlanned(total) {
      r.batchesTotal = total;
    },
    rolloutBatch: (fn) =>
      counted(
        fn,
        (b) => {
          r.batchesDone++;
          r.trajectories += b.count;
          r.successes += b.successes;
        },
        () => r.batchesFailed++,
      ),
    rolloutsImported(counts) {
      Object.assign(r, counts);
    },
    rolloutsDone() {
      if (r.trajectories) upsertSearchAttributes([{ key: SA.TracePassRate, value: r.successes / r.trajectories }]);
    },
    labelingPass: (fn) =>
      counted(
        fn,
        () => l.passesDone++,
        () => l.passesFailed++,
      ),
    capabilitiesSelected(names) {
      upsertSearchAttributes([{ key: SA.TraceCapabilities, value: names }]);
    },
    capabilitiesPlanned(entries) {
      progress.capabilities = entries.map((e) => ({ ...e, status: 'pending' }));
    },
    capabilityStarted(index) {
      progress.currentCapability = progress.capabilities[index].name;
    },
    capabilitySettled(index, result) {
      const entry = progress.capabilities[index];
      entry.status = result.status;
      if (result.status === 'failed') entry.error = result.detail;
      if (progress.capabilities.every((c) => c.status !== 'pending')) progress.currentCapability = undefined;
    },
    evaluated(evaluation) {
      const rates = new Map(evaluation.variants.map((v) => [v.kind, v.passRate]));
      const base = rates.get('base');
      const final = rates.get('trace');
      if (typeof base === 'number') upsertSearchAttributes([{ key: SA.TraceBasePassRate, value: base }]);
      if (typeof final === 'number') upsertSearchAttributes([{ key: SA.TraceFinalPassRate, value: final }]);
    },
  };
  run.enter('starting');
  return run;
}

async function counted<T>(fn: () => Promise<T>, done: (r: T) => void, failed: () => void): Promise<T> {
  try {
    const r = await fn();
    done(r);
    return r;
  } catch (err) {
    failed();
    throw err;
  }
}
