import { proxyActivities } from '@temporalio/workflow';
import type { EvaluationStageResult } from '../../activities/evaluation.js';
import type { CpuActivities } from '../contracts.js';
import { shortActivity } from '../options.js';
import type { CapabilityResult, ConfigurableStage, PipelineResult } from '../types.js';
import type { Composed } from './compose-adapters.js';
import type { Analysis } from './identify-capabilities.js';
import type { Rollouts } from './rollouts.js';
import type { Run } from './run.js';

export interface Outcome {
  rollouts: Rollouts;
  analysis: Analysis;
  capabilities: CapabilityResult[];
  composed: Composed;
  evaluation?: EvaluationStageResult;
}

/** The run's result and its stored report (JSON + HTML); every failed item is counted in the status. */
export async function report(
  run: Run,
  { rollouts, analysis, capabilities, composed, evaluation }: Outcome,
): Promise<PipelineResult> {
  const { runId, config, timeouts } = run;
  run.enter('report');
  const { gate, gateError } = composed;
  const notConfigured = run.progress.notConfigured;
  const failed =
    capabilities.filter((c) => c.status === 'failed').length +
    rollouts.failedBatches +
    run.progress.labeling.passesFailed +
    (analysis.error ? 1 : 0) +
    (gateError ? 1 : 0);
  const result: Omit<PipelineResult, 'report'> = {
    runId,
    status: failed ? 'completed_with_failures' : 'completed',
    summary: summarize(analysis, capabilities, notConfigured, failed, gateError),
    env: config.env.name,
    rollouts,
    analysis,
    capabilities,
    gate,
    ...(gateError ? { gateError } : {}),
    evaluation,
    notConfigured,
    store: config.store,
  };
  const ref = await proxyActivities<CpuActivities>(shortActivity(timeouts)).writeReport({ runId, config, result });
  run.enter('done', result.summary);
  return { ...result, report: ref };
}

function summarize(
  analysis: Analysis,
  caps: CapabilityResult[],
  notConfigured: readonly ConfigurableStage[],
  failures: number,
  gateError?: string,
): string {
  const n = analysis.selected.length;
  const parts = [
    analysis.error ? `stage 1 failed: ${analysis.error}` : `stage 1: ${n} capabilit${n === 1 ? 'y' : 'ies'} selected`,
  ];
  const requested = caps.filter((c) => c.requestedByConfig).map((c) => c.name);
  if (requested.length) parts.push(`requested by config: ${requested.join(', ')}`);
  const trained = caps.filter((c) => c.status === 'trained').length;
  if (trained) parts.push(`${trained} adapter(s) trained`);
  if (gateError) parts.push(`gate failed: ${gateError}`);
  const stages24: ConfigurableStage[] = ['synthesis', 'training', 'gate'];
  if (stages24.every((s) => notConfigured.includes(s))) parts.push('stages 2–4 not configured');
  else if (notConfigured.length) parts.push(`not configured: ${notConfigured.join(', ')}`);
  if (failures) parts.push(`${failures} item(s) failed (see report)`);
  return parts.join('; ');
}
