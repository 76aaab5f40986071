import type { Config } from '../core/config.js';
import type { ArtifactRef } from '../core/artifact-ref.js';
import type { createStage1Activities } from '../activities/stage1.js';
import type { PipelineResult, StagePlan } from './types.js';

/**
 * The activity signatures the workflows call, as types only (workflow code must not import
 * activity implementations). Workers register the implementations under these names.
 */
export interface PlatformActivities {
  /** Which activity names this deployment's workers implement (recorded once per run). */
  pipelinePlan(): Promise<StagePlan>;
  /** Fallback report: writes the run result as JSON to runs/<runId>/report.json. */
  writeRunReport(input: { config: Config; result: Omit<PipelineResult, 'report'> }): Promise<ArtifactRef>;
}

/** Stage 1 as activities/stage1.ts implements it (a type-only import: erased from the bundle). */
export type Stage1Activities = ReturnType<typeof createStage1Activities>;
