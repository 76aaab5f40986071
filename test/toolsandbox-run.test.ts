import { test } from 'node:test';
import assert from 'node:assert/strict';
import { formatSummary, type Report } from '../core/report.js';
import { openStore } from '../store/index.js';
import { TASK_QUEUE_CPU, type PipelineInput, type PipelineResult } from '../workflows/types.js';
import type { ChatRequest, ScriptedReply } from './helpers/scripted-llm.js';
import { FAST_TIMEOUTS, pipelineConfig, pipelineReply, startHarness } from './helpers/temporal.js';

/**
 * `env.name: toolsandbox` through the pipeline `trace run` starts (real Temporal dev server, in-process
 * worker, scripted LLM over HTTP as policy, analyst and user simulator): rollouts, stage 1, base
 * evaluation on the held-out split, and the report with mean similarity and perfect rate.
 */
function script(req: ChatRequest): ScriptedReply {
  // The user simulator is the request offered end_conversation: it ends the conversation at once.
  if (req.tools?.some((t) => t.function.name === 'end_conversation'))
    return { toolCalls: [{ name: 'end_conversation', arguments: '{}' }] };
  return pipelineReply(req);
}

test('trace run on toolsandbox with the scripted LLM: rollouts, stage 1, base evaluation and a report with mean similarity and perfect rate', async (t) => {
  const { dir, llm, client } = await startHarness(t, script, { prefix: 'trace-tsb-' });
  const role = { baseURL: llm.baseURL, model: 'scripted-model', timeoutMs: 3_000, concurrency: 2 };
  const config = pipelineConfig(llm.baseURL, `${dir}/artifacts`, {
    env: { name: 'toolsandbox', maxTasks: 4 },
    llm: { policy: role, analyst: role, userSimulator: role },
    rollouts: { trialsPerTask: 1, batchSize: 2, maxConcurrentBatches: 2, maxSteps: 10 },
    evaluation: { maxTasks: 3 },
  });
  const input: PipelineInput = { runId: 'tsb-run-1', config, timeouts: FAST_TIMEOUTS };
  const handle = await client.workflow.start('tracePipeline', {
    taskQueue: TASK_QUEUE_CPU,
    workflowId: 'tsb-run-1',
    args: [input],
  });
  const result = (await handle.result()) as PipelineResult;
  assert.equal(result.rollouts.trajectories, 4);
  const evaluation = result.evaluation as { split: string; tasks: number };
  assert.equal(evaluation.split, 'test');
  assert.equal(evaluation.tasks, 3);

  const report = await openStore(config.store).getJson<Report>(result.report);
  assert.equal(report.env, 'toolsandbox');
  const base = report.variants.find((v) => v.kind === 'base')!;
  assert.equal(base.episodes, 3);
  // Every scenario's similarity is in [0, 1]; the mean is reported with its interval beside the perfect rate.
  assert.ok(
    base.meanReward &&
      base.meanReward.estimate !== null &&
      base.meanReward.estimate >= 0 &&
      base.meanReward.estimate <= 1,
    JSON.stringify(base.meanReward),
  );
  assert.equal(base.passRate.estimate, base.successes / base.episodes);
  const text = formatSummary(report);
  t.diagnostic(text);
  assert.match(text, /mean similarity\s+perfect rate\s+perfect/);
  assert.match(text, new RegExp(`base\\s+base\\s+3\\s+${base.meanReward!.estimate!.toFixed(3)}`));
  // The per-category breakdown: every category of the evaluated scenarios, with its perfect count.
  assert.ok(
    base.perCategory.length > 0 && base.perCategory.every((c) => c.episodes >= 1 && c.episodes <= 3),
    JSON.stringify(base.perCategory),
  );
  for (const c of base.perCategory)
    assert.match(text, new RegExp(`\\n${c.category}\\s+.*${c.successes}/${c.episodes}`));
});
