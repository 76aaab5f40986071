import {
  ApplicationFailure,
  defineQuery,
  executeChild,
  isCancellation,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  startChild,
  upsertMemo,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import { capabilitiesToTrain } from '../core/capability.js';
import { reusePlan } from '../core/schedule.js';
import type { createEvaluationActivities } from '../activities/evaluation.js';
import type { createReportActivities } from '../activities/report.js';
import type * as training from '../activities/training.js';
import type { ArtifactRef } from '../core/artifact-ref.js';
import type { PlatformActivities, Stage1Activities } from './contracts.js';
import { capabilityWorkflow, type CapabilityActivities } from './capability.js';
import { evaluationWorkflow } from './evaluation.js';
import { gpuActivity, longActivity, rolloutActivity, shortActivity } from './options.js';
import { chunk, failureMessage, settlePool } from './pool.js';
import * as SA from './search-attributes.js';
import {
  PROGRESS_QUERY,
  type CapabilityResult,
  type ImportedRollouts,
  type PipelineInput,
  type PipelineProgress,
  type PipelineResult,
  type PipelineStage,
} from './types.js';

export const progressQuery = defineQuery<PipelineProgress>(PROGRESS_QUERY);

type ReportActivities = Pick<ReturnType<typeof createReportActivities>, 'writeReport'>;
type EvaluationActivities = ReturnType<typeof createEvaluationActivities>;
type GateActivities = Pick<typeof training, 'fitGate'>;

const STAGE1 = ['listRolloutTasks', 'collectRolloutBatch', 'discoverCapabilities', 'labelPass', 'selectCapabilities'] as const;

/**
 * The TRACE pipeline: rollouts (batched fan-out) → capability identification (discovery, R
 * labeling passes, K-of-R selection) → one child per kept capability → gate → evaluation → report.
 * Stages whose activities the workers do not implement are skipped and named in the result.
 */
export async function tracePipeline(input: PipelineInput): Promise<PipelineResult> {
  const { config, timeouts } = input;
  const runId = input.runId ?? workflowInfo().workflowId;
  const progress: PipelineProgress = {
    runId,
    stage: 'starting',
    rollouts: { batchesDone: 0, batchesFailed: 0, batchesTotal: 0, trajectories: 0, successes: 0 },
    labeling: { passesDone: 0, passesFailed: 0, passesTotal: config.analysis.passes },
    capabilities: [],
    notConfigured: [],
  };
  setHandler(progressQuery, () => progress);
  const enter = (stage: PipelineStage, message?: string) => {
    progress.stage = stage;
    progress.message = message;
    upsertSearchAttributes([{ key: SA.TraceStage, value: stage }]);
    // The run's "current details" in the Temporal UI.
    setCurrentDetails(`**${stage}**${message ? `: ${message}` : ''}`);
  };

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
  enter('starting');

  const platform = proxyActivities<PlatformActivities>(shortActivity(timeouts));
  const plan = await platform.pipelinePlan();
  const has = (name: string) => plan.activities.includes(name);
  const missing = STAGE1.filter((a) => !has(a));
  if (missing.length) {
    throw ApplicationFailure.nonRetryable(`stage 1 not configured: workers lack ${missing.join(', ')}`, 'NotConfigured');
  }
  const short = proxyActivities<Stage1Activities>(shortActivity(timeouts));
  const long = proxyActivities<Stage1Activities>(longActivity(config, 'analyst', timeouts));

  async function collectRollouts(): Promise<{ refs: ArtifactRef[]; failedBatches: number }> {
    const items = await short.listRolloutTasks({ config });
    const batches = chunk(items, config.rollouts.batchSize);
    progress.rollouts.batchesTotal = batches.length;
    const rollouts = proxyActivities<Stage1Activities>(rolloutActivity(config, timeouts));
    const settled = await settlePool(batches, config.rollouts.maxConcurrentBatches, async (tasks, batchIndex) => {
      try {
        const r = await rollouts.collectRolloutBatch({ runId, config, batchIndex, tasks });
        progress.rollouts.batchesDone++;
        progress.rollouts.trajectories += r.count;
        progress.rollouts.successes += r.successes;
        return r;
      } catch (err) {
        progress.rollouts.batchesFailed++;
        throw err;
      }
    });
    const refs = settled.flatMap((r) => (r.status === 'fulfilled' ? [r.value.ref] : []));
    const failed = settled.flatMap((r) => (r.status === 'rejected' ? [r.reason] : []));
    if (refs.length === 0) {
      const why = failed.length ? failureMessage(failed[0]) : 'no tasks';
      throw ApplicationFailure.nonRetryable(`no rollouts collected (${batches.length} batches): ${why}`, 'NoRollouts');
    }
    return { refs, failedBatches: failed.length };
  }

  function imported(r: ImportedRollouts): { refs: ArtifactRef[]; failedBatches: number } {
    Object.assign(progress.rollouts, { trajectories: r.trajectories, successes: r.successes });
    return { refs: r.refs, failedBatches: 0 };
  }

  // Rollouts: every (task, trial) pair, in batches, at most maxConcurrentBatches in flight —
  // unless the run starts from imported rollouts.
  enter('rollouts');
  const collected = input.rollouts ? imported(input.rollouts) : await collectRollouts();
  const rolloutRefs = collected.refs;
  const failedBatches = collected.failedBatches;
  const { trajectories, successes } = progress.rollouts;
  const passRate = trajectories ? successes / trajectories : null;
  if (passRate !== null) upsertSearchAttributes([{ key: SA.TracePassRate, value: passRate }]);

  // Capability identification: one discovery, R independent labeling passes, K-of-R selection.
  // A stage-1 analysis that fails (e.g. an analyst that cannot produce a valid dictionary) ends
  // the analysis, not the run: evaluation and the report still say what happened.
  let analysis: PipelineResult['analysis'];
  let selected: { name: string; description: string }[] = [];
  try {
    enter('discovery');
    const discovery = await long.discoverCapabilities({ runId, config, rolloutRefs });
    enter('labeling');
    const passes = await Promise.allSettled(
      Array.from({ length: config.analysis.passes }, async (_, pass) => {
        try {
          const r = await long.labelPass({ runId, config, pass, dictionaryRef: discovery.ref, rolloutRefs });
          progress.labeling.passesDone++;
          return r;
        } catch (err) {
          progress.labeling.passesFailed++;
          throw err;
        }
      }),
    );
    const labels = passes.flatMap((p) => (p.status === 'fulfilled' ? [p.value.ref] : []));
    if (labels.length === 0) {
      throw ApplicationFailure.nonRetryable(`every labeling pass failed: ${failureMessage((passes[0] as PromiseRejectedResult).reason)}`, 'NoLabels');
    }
    enter('selection');
    const selection = await short.selectCapabilities({ runId, config, dictionaryRef: discovery.ref, rolloutRefs, passRefs: labels });
    selected = selection.selected;
    analysis = {
      dictionary: discovery.ref,
      selection: selection.ref,
      labels,
      selected: selected.map((c) => c.name),
      failedPasses: progress.labeling.passesFailed,
      failedLabels: passes.reduce((n, p) => n + (p.status === 'fulfilled' ? p.value.failedItems : 0), 0),
      summary: selection.summary,
    };
  } catch (err) {
    if (isCancellation(err)) throw err;
    analysis = {
      labels: [],
      selected: [],
      failedPasses: progress.labeling.passesFailed,
      failedLabels: 0,
      summary: `capability identification failed at ${progress.stage}: ${failureMessage(err)}`,
      error: failureMessage(err),
    };
  }
  upsertSearchAttributes([{ key: SA.TraceCapabilities, value: selected.map((c) => c.name) }]);

  // One child workflow per kept capability, and per capability the config requests on top of
  // stage 1's selection; a failed child is reported, the others continue.
  enter('capabilities');
  const parentId = workflowInfo().workflowId;
  // `?? []`: inputs recorded before the option existed carry no such field.
  const toTrain = capabilitiesToTrain(selected, config.analysis.requestedCapabilities ?? []);
  progress.capabilities = toTrain.map((c) => ({
    name: c.name,
    workflowId: `${parentId}/capability/${c.name}`,
    status: 'pending',
    ...(c.requestedByConfig ? { requestedByConfig: true } : {}),
  }));
  // Scheduled retraining: what each capability takes over from the previous run (none for new ones).
  const reuse = input.previous ? reusePlan(input.previous, toTrain.map((c) => c.name)) : [];
  const previousOf = (i: number) => {
    const r = reuse[i];
    if (!r || (!r.environment && !r.adapter)) return {};
    return {
      previousRunId: input.previous!.runId,
      ...(r.environment ? { previousEnvironment: r.environment } : {}),
      ...(r.adapter ? { previousAdapter: r.adapter } : {}),
    };
  };
  const childResults = await Promise.allSettled(
    toTrain.map(async ({ name, description }, i) => {
      const entry = progress.capabilities[i];
      const handle = await startChild(capabilityWorkflow, {
        workflowId: entry.workflowId,
        args: [{ runId, config, capability: { name, description }, analysis: analysis.selection, plan, timeouts, ...previousOf(i) }],
      });
      progress.currentCapability = name;
      const r = await handle.result();
      entry.status = r.status;
      if (r.status === 'failed') entry.error = r.detail;
      return r;
    }),
  );
  const capabilities: CapabilityResult[] = childResults.map((r, i) => {
    const entry = progress.capabilities[i];
    const requested = entry.requestedByConfig ? { requestedByConfig: true } : {};
    if (r.status === 'fulfilled') return { ...r.value, ...requested };
    entry.status = 'failed';
    entry.error = failureMessage(r.reason);
    return { name: entry.name, status: 'failed', detail: entry.error, ...requested };
  });
  progress.currentCapability = undefined;

  const notConfigured: string[] = [];
  const later = (name: keyof CapabilityActivities | 'trainAdapter' | 'fitGate' | 'evaluateRun' | 'writeReport', stage: string, enabled: boolean) => {
    if (!enabled) return false;
    if (!has(name)) notConfigured.push(stage);
    return has(name);
  };
  later('synthesizeEnvironment', 'synthesis', config.stages.synthesis);
  later('trainAdapter', 'training', config.stages.training);

  const adapters = capabilities.flatMap((c) => (c.adapter ? [{ capability: c.name, adapter: c.adapter }] : []));
  let gate: Awaited<ReturnType<GateActivities['fitGate']>> | undefined;
  let gateError: string | undefined;
  if (later('fitGate', 'gate', config.stages.gate) && adapters.length > 0) {
    enter('gate');
    // A gate that cannot be fitted (e.g. no successful trajectories) is reported; the adapters
    // stay stored and the evaluation still runs.
    try {
      const summary = `fit the gate over ${adapters.length} adapter(s): ${adapters.map((a) => a.capability).join(', ')} (${config.gate.steps} steps)`;
      gate = await proxyActivities<GateActivities>({ ...gpuActivity(timeouts), summary }).fitGate({ runId, config, adapters });
    } catch (err) {
      if (isCancellation(err)) throw err;
      gateError = failureMessage(err);
    }
  }
  let evaluation: Awaited<ReturnType<EvaluationActivities['evaluateRun']>> | undefined;
  if (later('evaluateRun', 'evaluation', config.stages.evaluation)) {
    enter('evaluation');
    // Fanned out as (variant × task batch) activities in a child when the workers have them.
    evaluation = has('planEvaluation') && has('evaluateVariant')
      ? await executeChild(evaluationWorkflow, {
          workflowId: `${parentId}/evaluation`,
          args: [{ runId, config, gate, capabilities, timeouts, serveOnGpu: has('evaluateServed') }],
        })
      : await proxyActivities<EvaluationActivities>(rolloutActivity(config, timeouts)).evaluateRun({ runId, config, gate, capabilities });
    const rates = new Map(evaluation.variants.map((v) => [v.kind, v.passRate]));
    const base = rates.get('base');
    const final = rates.get('trace');
    if (typeof base === 'number') upsertSearchAttributes([{ key: SA.TraceBasePassRate, value: base }]);
    if (typeof final === 'number') upsertSearchAttributes([{ key: SA.TraceFinalPassRate, value: final }]);
  }
  progress.notConfigured = notConfigured;

  enter('report');
  const failed = capabilities.filter((c) => c.status === 'failed').length + failedBatches + progress.labeling.passesFailed + (analysis.error ? 1 : 0) + (gateError ? 1 : 0);
  const result: Omit<PipelineResult, 'report'> = {
    runId,
    status: failed ? 'completed_with_failures' : 'completed',
    summary: summarize(analysis, capabilities, notConfigured, failed, gateError),
    env: config.env.name,
    rollouts: { refs: rolloutRefs, trajectories, successes, passRate, failedBatches },
    analysis,
    capabilities,
    gate,
    ...(gateError ? { gateError } : {}),
    evaluation,
    notConfigured,
    store: config.store,
  };
  const report = has('writeReport')
    ? await proxyActivities<ReportActivities>(shortActivity(timeouts)).writeReport({ runId, config, result })
    : await platform.writeRunReport({ config, result });
  enter('done', result.summary);
  return { ...result, report };
}

function summarize(analysis: PipelineResult['analysis'], caps: CapabilityResult[], notConfigured: string[], failures: number, gateError?: string): string {
  const n = analysis.selected.length;
  const parts = [analysis.error ? `stage 1 failed: ${analysis.error}` : `stage 1: ${n} capabilit${n === 1 ? 'y' : 'ies'} selected`];
  const requested = caps.filter((c) => c.requestedByConfig).map((c) => c.name);
  if (requested.length) parts.push(`requested by config: ${requested.join(', ')}`);
  const trained = caps.filter((c) => c.status === 'trained').length;
  if (trained) parts.push(`${trained} adapter(s) trained`);
  if (gateError) parts.push(`gate failed: ${gateError}`);
  const stages24 = ['synthesis', 'training', 'gate'];
  if (stages24.every((s) => notConfigured.includes(s))) parts.push('stages 2–4 not configured');
  else if (notConfigured.length) parts.push(`not configured: ${notConfigured.join(', ')}`);
  if (failures) parts.push(`${failures} item(s) failed (see report)`);
  return parts.join('; ');
}
