import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { PROJECT_ROOT } from '../infra/temporal.js';
import type { EvaluationStageResult } from '../activities/evaluation.js';
import { TASK_QUEUE_CPU } from '../workflows/types.js';
import { FAST_TIMEOUTS, pipelineConfig, pipelineReply, startHarness } from './helpers/temporal.js';

/**
 * A trained agent with no endpoint (here a single adapter) in the fanned-out evaluation stage: with
 * a GPU worker that implements evaluateServed, the stage runs there, serving the base and the
 * adapter through `python -m trace_trainer serve` (one backend), instead of leaving it unevaluated.
 */
const python = path.join(PROJECT_ROOT, '.venv/bin/python');

test(
  'evaluationWorkflow hands trained agents without an endpoint to the GPU worker, which serves and evaluates them',
  { timeout: 600_000 },
  async (t) => {
    const { dir, llm, client } = await startHarness(t, pipelineReply, {
      prefix: 'trace-evalserved-',
      queues: ['cpu', 'gpu'],
    });
    const model = path.join(dir, 'tiny');
    const env = { ...process.env, PYTHONPATH: path.join(PROJECT_ROOT, 'trainer') };
    execFileSync(python, ['-m', 'trace_trainer', 'tiny', '--out', model], { env, stdio: 'ignore' });
    const adapterDir = path.join(dir, 'adapter');
    execFileSync(
      python,
      [
        '-c',
        `from transformers import AutoModelForCausalLM
from peft import LoraConfig, get_peft_model
m = AutoModelForCausalLM.from_pretrained(${JSON.stringify(model)})
get_peft_model(m, LoraConfig(r=2, lora_alpha=2, target_modules="all-linear")).save_pretrained(${JSON.stringify(adapterDir)})`,
      ],
      { env, stdio: 'ignore' },
    );
    const adapter = { uri: `file://${adapterDir}/adapter_model.safetensors`, sha256: '0'.repeat(64), bytes: 0 };
    const config = pipelineConfig(llm.baseURL, `${dir}/artifacts`, {
      // The served tiny model on a busy 2-core box: generous request timeouts, few tokens.
      llm: { policy: { baseURL: llm.baseURL, timeoutMs: 120_000, maxTokens: 8 }, analyst: { baseURL: llm.baseURL } },
      rollouts: { maxSteps: 2 },
      training: { model, device: 'cpu' },
      evaluation: { maxTasks: 2, singleAdapters: true },
    });
    const handle = await client.workflow.start('evaluationWorkflow', {
      taskQueue: TASK_QUEUE_CPU,
      workflowId: 'evalserved',
      args: [
        {
          runId: 'evalserved',
          config,
          capabilities: [{ name: 'cap_x', status: 'trained', adapter }],
          timeouts: { ...FAST_TIMEOUTS, heartbeatMs: 30_000 },
        },
      ],
    });
    const result = (await handle.result()) as EvaluationStageResult;
    assert.deepEqual(
      result.variants.map((v) => [v.name, v.kind, v.n]),
      [
        ['base', 'base', 2],
        ['adapter-cap_x', 'adapter', 2],
      ],
    );
    assert.match(result.notes.join(' '), /one backend for every variant/);
    const history = await handle.fetchHistory();
    const scheduled = (history.events ?? []).flatMap((e) => {
      const a = e.activityTaskScheduledEventAttributes;
      return a ? [`${a.activityType?.name}@${a.taskQueue?.name}`] : [];
    });
    assert.deepEqual(scheduled, ['planEvaluation@trace-cpu', 'evaluateServed@trace-gpu']);
  },
);
