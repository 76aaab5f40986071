import { proxyActivities } from '@temporalio/workflow';
import type { EvaluationStageInput, EvaluationStageResult, VariantResult } from '../activities/evaluation.js';
import type { CpuActivities, GpuActivities } from './contracts.js';
import { rolloutActivity, shortActivity } from './options.js';
import { chunk, failureMessage, settlePool } from './pool.js';
import { TASK_QUEUE_GPU, type TimeoutOverrides } from './types.js';

export interface EvaluationWorkflowInput extends EvaluationStageInput {
  timeouts?: TimeoutOverrides;
}

/**
 * The evaluation stage fanned out: every (variant, batch of held-out tasks) is one activity, at
 * most rollouts.maxConcurrentBatches in flight, so CPU workers share the episodes. Each episode's
 * record is stored as it ends, so a retried batch redoes only unfinished episodes; a batch that
 * still fails leaves its variant's numbers over fewer episodes, and the notes say so.
 */
export async function evaluationWorkflow(input: EvaluationWorkflowInput): Promise<EvaluationStageResult> {
  const { runId, config, timeouts } = input;
  const short = proxyActivities<CpuActivities>(shortActivity(timeouts));
  const long = proxyActivities<CpuActivities>(rolloutActivity(config, timeouts));
  const plan = await short.planEvaluation({ runId, config, gate: input.gate, capabilities: input.capabilities });
  // A gate or adapters with no endpoint: the whole stage runs on a GPU worker, which serves them
  // and the base through one backend (a like-for-like comparison); per-episode records keep it
  // resumable. Configure evaluation.variants[].baseURL (e.g. vLLM) to fan out across CPU workers.
  const unserved = plan.unserved.gateUri !== undefined || plan.unserved.adapters.length > 0;
  if (unserved && plan.tasks.length > 0) {
    const agents = [
      ...(plan.unserved.gateUri ? ['TRACE (base + gate)'] : []),
      ...plan.unserved.adapters.map((a) => `adapter ${a.capability}`),
    ];
    const summary = `serve and evaluate base, ${agents.join(', ')} on ${plan.tasks.length} held-out task(s)`;
    const gpu = proxyActivities<GpuActivities>({
      ...rolloutActivity(config, timeouts),
      taskQueue: TASK_QUEUE_GPU,
      summary,
    });
    return gpu.evaluateServed({ runId, config, gate: input.gate, capabilities: input.capabilities });
  }
  const batches = chunk(plan.tasks, config.evaluation.batchSize);
  // A variant given only as a gate/adapter artifact needs a server per process: evaluateRun's job.
  const servable = plan.variants.filter((v) => v.baseURL || (!v.gateUri && !v.adapterUri));
  const jobs = servable.flatMap((variant) => batches.map((tasks) => ({ variant, tasks })));
  const settled = await settlePool(jobs, config.rollouts.maxConcurrentBatches, (job) =>
    long.evaluateVariant({ config, runId, variant: job.variant, tasks: job.tasks, split: plan.split }),
  );
  // Agents without a configured endpoint cannot be served per activity across workers: named in the notes.
  const notes = [...plan.notes, ...plan.unserved.notes];
  for (const v of plan.variants.filter((x) => !servable.includes(x)))
    notes.push(`${v.name} not evaluated: it has no endpoint (evaluation.variants[].baseURL)`);
  const variants: VariantResult[] = [];
  for (const variant of servable) {
    const failed = jobs.flatMap((job, i) =>
      job.variant.name === variant.name && settled[i].status === 'rejected'
        ? [settled[i] as PromiseRejectedResult]
        : [],
    );
    if (failed.length)
      notes.push(
        `${variant.name}: ${failed.length} of ${batches.length} evaluation batch(es) failed (${failureMessage(failed[0].reason)}); its numbers cover fewer tasks`,
      );
    // With no tasks given, evaluateVariant only summarizes every episode stored for the variant.
    variants.push(await short.evaluateVariant({ config, runId, variant, tasks: [], split: plan.split }));
  }
  return { split: plan.split, tasks: plan.tasks.length, variants, notes };
}
