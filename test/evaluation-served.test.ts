import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { createEvaluationActivities } from '../activities/evaluation.js';
import { startPolicyServer } from '../llm/policy-server.js';
import { parseConfig } from '../core/config.js';
import { PROJECT_ROOT } from '../infra/temporal.js';
import { openStore } from '../store/index.js';
import { tempDir } from './helpers/temporal.js';

/**
 * The trainer's own OpenAI-compatible server (python -m trace_trainer serve) as an evaluation
 * backend: a tiny randomly initialised model built offline, served on an ephemeral port, evaluated
 * on the held-out tasks. Its pass rate is 0 (random weights); the test is about the wire path and
 * the server's lifecycle.
 */
const python = path.join(PROJECT_ROOT, '.venv/bin/python');
const hasTorch =
  existsSync(python) &&
  (() => {
    try {
      execFileSync(python, ['-c', 'import torch, transformers'], { stdio: 'ignore' });
      return true;
    } catch {
      return false;
    }
  })();

test(
  'a variant served by trace_trainer serve is evaluated on held-out tasks, and the server is stopped',
  { skip: !hasTorch && 'trainer Python deps (torch, transformers) not installed', timeout: 300_000 },
  async () => {
    const tmp = await tempDir('trace-served-');
    try {
      const model = path.join(tmp.dir, 'tiny');
      execFileSync(python, ['-m', 'trace_trainer', 'tiny', '--out', model], {
        env: { ...process.env, PYTHONPATH: path.join(PROJECT_ROOT, 'trainer') },
        stdio: 'ignore',
      });
      const config = parseConfig({
        env: { name: 'toy-orders' },
        store: { kind: 'local', dir: path.join(tmp.dir, 'artifacts') },
        rollouts: { maxSteps: 2 },
        llm: { policy: { maxTokens: 8 } },
        training: { model, device: 'cpu' },
      });
      const server = await startPolicyServer(config, { name: 'base-served' });
      let closed = false;
      try {
        assert.match(server.baseURL, /^http:\/\/127\.0\.0\.1:\d+\/v1$/);
        assert.equal(server.model, 'base-served');
        const acts = createEvaluationActivities();
        const { tasks } = await acts.listEvaluationTasks({ config });
        const r = await acts.evaluateVariant({
          config,
          runId: 'served',
          variant: { name: 'base', kind: 'base', baseURL: server.baseURL, model: server.model },
          tasks,
        });
        assert.equal(r.n, 2);
        assert.equal(r.passRate, 0);
        await server.close();
        closed = true;
        await assert.rejects(fetch(`${server.baseURL}/models`), 'the server is gone after close()');
      } finally {
        if (!closed) await server.close();
      }

      // A trained adapter with no configured endpoint: evaluateRun serves it and the base itself.
      const adapterDir = path.join(tmp.dir, 'adapter');
      const makeAdapter = `from transformers import AutoModelForCausalLM
from peft import LoraConfig, get_peft_model
m = AutoModelForCausalLM.from_pretrained(${JSON.stringify(model)})
get_peft_model(m, LoraConfig(r=2, lora_alpha=2, target_modules="all-linear")).save_pretrained(${JSON.stringify(adapterDir)})`;
      execFileSync(python, ['-c', makeAdapter], { stdio: 'ignore' });
      const adapter = { uri: `file://${adapterDir}/adapter_model.safetensors`, sha256: '0'.repeat(64), bytes: 0 };
      const run = await createEvaluationActivities().evaluateRun({
        runId: 'served-run',
        config: parseConfig({ ...config, evaluation: { singleAdapters: true } }),
        capabilities: [{ name: 'cap_x', status: 'trained', adapter }],
      });
      assert.deepEqual(
        run.variants.map((v) => [v.name, v.kind, v.n]),
        [
          ['base', 'base', 2],
          ['adapter-cap_x', 'adapter', 2],
        ],
      );
      assert.match(run.notes.join(' '), /served by python -m trace_trainer serve/);
      const store = openStore(config.store);
      const summary = await store.getJson<{ variant: { baseURL?: string; model?: string } }>(run.variants[1].ref);
      assert.equal(summary.variant.model, 'adapter-cap_x');
      assert.match(summary.variant.baseURL ?? '', /^http:\/\/127\.0\.0\.1:\d+\/v1$/);
    } finally {
      await tmp.cleanup();
    }
  },
);
