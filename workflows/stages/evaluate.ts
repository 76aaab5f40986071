import { executeChild, workflowInfo } from '@temporalio/workflow';
import type { EvaluationStageResult } from '../../activities/evaluation.js';
import { evaluationWorkflow } from '../evaluation.js';
import type { CapabilityResult } from '../types.js';
import type { Composed } from './compose-adapters.js';
import type { Run } from './run.js';

/**
 * The held-out evaluation: the base, the TRACE agent (base + gate) and the single adapters on the
 * target's test split, fanned out as (variant × task batch) activities in a child workflow.
 */
export async function evaluate(
  run: Run,
  capabilities: CapabilityResult[],
  { gate }: Composed,
): Promise<EvaluationStageResult | undefined> {
  const { runId, config, timeouts } = run;
  if (!config.stages.evaluation) return undefined;
  run.enter('evaluation');
  const evaluation = await executeChild(evaluationWorkflow, {
    workflowId: `${workflowInfo().workflowId}/evaluation`,
    args: [{ runId, config, gate, capabilities, timeouts }],
  });
  run.evaluated(evaluation);
  return evaluation;
}
