import { executeChild, proxyActivities, upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import type { Config } from '../core/config.js';
import { decidePromotion, type AgentSpec, type LineageRecord, type PromotionDecision } from '../core/promotion.js';
import { previousRun, promotionPair, runArtifacts } from '../core/schedule.js';
import type { CpuActivities } from './contracts.js';
import { shortActivity } from './options.js';
import { tracePipeline } from './pipeline.js';
import * as SA from './search-attributes.js';
import type { PipelineResult, TimeoutOverrides } from './types.js';

export interface RetrainInput {
  config: Config;
  timeouts?: TimeoutOverrides;
}

export interface RetrainResult {
  runId: string;
  pipelineWorkflowId: string;
  /** Which earlier run this one started from, and what it took over. */
  startedFrom: string | null;
  reusedDictionary: boolean;
  /** What this run actually took over from startedFrom: capabilities whose environment it reused / whose adapter it continued. */
  reusable: { environments: string[]; adapters: string[] };
  promotion: PromotionDecision;
  currentAgent: string | null;
  summary: string;
}

/**
 * One scheduled retraining round: the pipeline on fresh rollouts, started from the previous run's
 * artifacts, then promotion of its TRACE agent only if it beats the current agent on held-out
 * tasks by the configured margin, recorded in the config's lineage. Schedules start it with
 * overlap policy SKIP, so rounds never run concurrently on one lineage.
 */
export async function traceRetrain(input: RetrainInput): Promise<RetrainResult> {
  const { timeouts } = input;
  const runId = workflowInfo().workflowId;
  const acts = proxyActivities<CpuActivities>(shortActivity(timeouts));
  const { lineage, latest } = await acts.loadLineage({ config: input.config });
  const previous = previousRun(lineage, latest);

  // The current agent is evaluated in this run, on the same held-out tasks, when it is served.
  let config = input.config;
  const current = previous?.current ?? null;
  const servable = current && (current.baseURL || current.gateUri);
  if (current && current.kind !== 'base' && servable && !config.evaluation.variants.some((v) => v.name === 'current')) {
    // Served at its endpoint, or (gate only) by the evaluation activity itself.
    const served = {
      name: 'current',
      kind: current.kind,
      ...(current.baseURL ? { baseURL: current.baseURL } : { gateUri: current.gateUri }),
      ...(current.model ? { model: current.model } : {}),
    };
    config = { ...config, evaluation: { ...config.evaluation, variants: [...config.evaluation.variants, served] } };
  }
  const seeded = previous
    ? await acts.seedRetrainRun({ config, runId, previous: previous.artifacts })
    : { reusedDictionary: false };

  const pipelineWorkflowId = `${runId}/pipeline`;
  // The pipeline reuses the previous run's environments and continues its adapters.
  const result: PipelineResult = await executeChild(tracePipeline, {
    workflowId: pipelineWorkflowId,
    args: [{ runId, config, timeouts, ...(previous ? { previous: previous.artifacts } : {}) }],
  });

  const variants = result.evaluation?.variants ?? [];
  const traceVariant = config.evaluation.variants.find((v) => v.kind === 'trace' && v.name !== 'current');
  const gate = result.gate;
  const candidate: AgentSpec = {
    id: `${runId}:trace`,
    kind: 'trace',
    ...(traceVariant?.baseURL ? { baseURL: traceVariant.baseURL } : {}),
    ...(traceVariant?.model ? { model: traceVariant.model } : {}),
    adapters: result.capabilities.flatMap((c) => (c.adapter ? [{ capability: c.name, uri: c.adapter.uri }] : [])),
    ...(gate?.gateUri ? { gateUri: gate.gateUri } : {}),
  };
  const pair = promotionPair(variants, current, candidate);
  const policy = { margin: config.evaluation.promotionMargin, requireSignificant: false };
  const promotion: PromotionDecision =
    'reason' in pair
      ? { promote: false, delta: null, reason: pair.reason }
      : decidePromotion(pair.candidate, pair.current, policy);
  const record: LineageRecord = {
    runId,
    agent: candidate,
    parentAgentId: current?.id ?? 'base',
    passRate: 'reason' in pair ? null : pair.candidate.passRate,
    parentPassRate: 'reason' in pair ? null : pair.current.passRate,
    promoted: promotion.promote,
    reason: promotion.reason,
    at: new Date().toISOString(),
  };
  const updated = await acts.recordRetrainOutcome({ config, record, artifacts: runArtifacts(result) });
  upsertSearchAttributes([{ key: SA.TracePromotion, value: promotion.promote ? 'promoted' : 'not_promoted' }]);

  // The run's report, rebuilt with the promotion outcome.
  await acts.buildReport({ config, runId, result: { ...result, promotion }, pipelineWorkflowId });

  const reusable = {
    environments: result.capabilities.filter((c) => c.reusedFrom?.environment).map((c) => c.name),
    adapters: result.capabilities.filter((c) => c.reusedFrom?.adapter).map((c) => c.name),
  };
  return {
    runId,
    pipelineWorkflowId,
    startedFrom: previous?.artifacts.runId ?? null,
    reusedDictionary: seeded.reusedDictionary,
    reusable,
    promotion,
    currentAgent: updated.current?.id ?? null,
    summary: `${result.summary}; ${promotion.promote ? 'promoted' : 'not promoted'}: ${promotion.reason}`,
  };
}
