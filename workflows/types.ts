import type { Config } from '../core/config.js';
import type { RunArtifacts } from '../core/schedule.js';
import type { ArtifactRef } from '../core/artifact-ref.js';
import type { EvaluationStageResult } from '../activities/evaluation.js';
import type { SynthesizeResult, ValidateResult } from '../activities/synthesis/index.js';
import type { FitGateResult, TrainAdapterResult } from '../activities/training.js';

/**
 * The pipeline's boundary objects: workflow inputs, the `progress` query answer and the results.
 * Types only (plus constants), so the CLI, workers and workflow code can all import them.
 */
export const TASK_QUEUE_CPU = 'trace-cpu';
export const TASK_QUEUE_GPU = 'trace-gpu';
export const PROGRESS_QUERY = 'progress';

/** Activity timeouts, overridable per run so tests can exercise worker loss in seconds. */
export interface TimeoutOverrides {
  /** startToClose of bookkeeping activities (plan, task listing, selection, report). */
  shortMs?: number;
  /** startToClose of LLM-heavy CPU activities (rollout batches, discovery, labeling, synthesis, evaluation). */
  longMs?: number;
  /** heartbeatTimeout of activities that heartbeat. */
  heartbeatMs?: number;
  /** startToClose of GPU training activities. */
  trainingMs?: number;
  /** Attempts before an activity's failure is reported (default 5). */
  maximumAttempts?: number;
}

/** Rollouts collected elsewhere (e.g. `trace import-tau2`): the pipeline starts at discovery. */
export interface ImportedRollouts {
  refs: ArtifactRef[];
  trajectories: number;
  successes: number;
}

export interface PipelineInput {
  /** Names the run's artifacts (runs/<runId>/...); defaults to the workflow id (schedules). */
  runId?: string;
  config: Config;
  rollouts?: ImportedRollouts;
  timeouts?: TimeoutOverrides;
  /**
   * The previous run's artifacts (scheduled retraining): capabilities selected again reuse its
   * environment and continue its adapter; new ones start fresh.
   */
  previous?: RunArtifacts;
}

/** Where the run is, named after the paper's stages (Figure 2); the `TraceStage` search attribute. */
export type PipelineStage =
  | 'starting'
  | 'rollouts'
  | 'stage1:discovery'
  | 'stage1:labeling'
  | 'stage1:selection'
  | 'stages2-3:capabilities'
  | 'stage4:gate'
  | 'evaluation'
  | 'report'
  | 'done';

/** The stages config.stages can switch off; a switched-off one is named in `notConfigured`. */
export type ConfigurableStage = 'synthesis' | 'training' | 'gate' | 'evaluation';

export type CapabilityStatus =
  'pending' | 'synthesizing' | 'validating' | 'training' | 'trained' | 'not_configured' | 'failed';

export interface CapabilityProgress {
  name: string;
  workflowId: string;
  status: CapabilityStatus;
  error?: string;
  /** Trained because analysis.requestedCapabilities names it, not because stage 1 selected it. */
  requestedByConfig?: boolean;
}

export interface PipelineProgress {
  runId: string;
  stage: PipelineStage;
  rollouts: {
    batchesDone: number;
    batchesFailed: number;
    batchesTotal: number;
    trajectories: number;
    successes: number;
  };
  labeling: { passesDone: number; passesFailed: number; passesTotal: number };
  capabilities: CapabilityProgress[];
  currentCapability?: string;
  notConfigured: ConfigurableStage[];
  message?: string;
}

export interface CapabilityInput {
  runId: string;
  config: Config;
  capability: { name: string; description: string };
  /** Stage-1 artifacts a synthesizer may read (dictionary, selection with example failures); absent when stage 1 failed. */
  analysis?: ArtifactRef;
  timeouts?: TimeoutOverrides;
  /** The run the previous artifacts below come from (scheduled retraining). */
  previousRunId?: string;
  /** Its environment of this capability: validated under this run's config and reused instead of synthesizing. */
  previousEnvironment?: ArtifactRef;
  /** Its adapter of this capability: this run's training starts from its weights. */
  previousAdapter?: ArtifactRef;
}

export interface CapabilityResult {
  name: string;
  status: CapabilityStatus;
  /** The stage the child reached or stopped at, and why, in one line. */
  detail: string;
  /** Trained because analysis.requestedCapabilities names it, not because stage 1 selected it. */
  requestedByConfig?: boolean;
  environment?: ArtifactRef;
  validation?: CapabilityValidation;
  adapter?: ArtifactRef;
  training?: TrainAdapterResult;
  /** What this capability took over from a previous run: the run ids its environment and adapter came from. */
  reusedFrom?: { environment?: string; adapter?: string };
}

/** How the capability's environment was obtained and checked: synthesis, validation, or the previous run's. */
export type CapabilityValidation = Partial<SynthesizeResult> & Partial<ValidateResult> & { reusedFrom?: string };

export type PipelineStatus = 'completed' | 'completed_with_failures';

export interface PipelineResult {
  runId: string;
  status: PipelineStatus;
  /** Human-readable, e.g. 'stages 2–4 not configured'. */
  summary: string;
  env: string;
  rollouts: {
    refs: ArtifactRef[];
    trajectories: number;
    successes: number;
    passRate: number | null;
    failedBatches: number;
  };
  analysis: {
    dictionary?: ArtifactRef;
    /** The stage-1 result artifact (statistics, selection, example failures). */
    selection?: ArtifactRef;
    labels: ArtifactRef[];
    selected: string[];
    failedPasses: number;
    /** Trajectory labels that stayed invalid after repair, summed over passes. */
    failedLabels: number;
    /** Human-readable stage-1 summary (per-capability Δ, Cov, K of R), or why it failed. */
    summary: string;
    /** Set when capability identification failed; the run still evaluates and reports. */
    error?: string;
  };
  capabilities: CapabilityResult[];
  gate?: FitGateResult;
  /** Why the gate could not be fitted; the run still evaluates and reports. */
  gateError?: string;
  evaluation?: EvaluationStageResult;
  notConfigured: ConfigurableStage[];
  /** Where the run's artifacts live, so readers can open `report` and the other refs. */
  store: Config['store'];
  report: ArtifactRef;
}
