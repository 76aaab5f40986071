import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseConfig } from '../core/config.js';
import { ValidationVerdictSchema, CHECKS } from '../core/synthesis.js';
import { synthesizeEnvironment } from '../activities/synthesis/index.js';
import { DEFAULT_MODEL_PATH, startLlmServer } from '../infra/llm-server.js';
import { openStore } from '../store/index.js';

/**
 * Smoke test: the real local LLM (SmolLM2-135M via node-llama-cpp) as the generator, through the
 * whole repair loop. A 135M model cannot write a valid environment; the point is that the loop
 * ends cleanly — every attempt stored with a verdict that names a check and a reason.
 */
const modelPath = process.env.TRACE_LLM_MODEL_PATH ?? DEFAULT_MODEL_PATH;

test(
  'real local LLM as generator: the loop ends cleanly with stored reasons',
  { skip: existsSync(modelPath) ? false : `model file absent (${modelPath}); run scripts/setup.sh` },
  async () => {
    const server = await startLlmServer({ port: 0, parallel: 1, contextSize: 4096, modelPath });
    const dir = mkdtempSync(path.join(tmpdir(), 'synth-llm-'));
    try {
      const role = { baseURL: server.baseURL, model: server.model, maxTokens: 150, timeoutMs: 300_000 };
      const config = parseConfig({
        env: { name: 'toy-orders' },
        store: { kind: 'local', dir },
        llm: { generator: role, policy: role },
        analysis: { maxRepairAttempts: 0 },
        synthesis: { maxAttempts: 1, references: 0, calibration: { groups: 2, rolloutsPerGroup: 2, maxSteps: 4 } },
      });
      const capability = {
        name: 'verify_preconditions',
        description: 'Checks that an order can be changed (status, ownership) before changing it.',
      };
      const res = await synthesizeEnvironment({ config, runId: 'smoke', capability });
      assert.ok(['accepted', 'synthesis_failed'].includes(res.status), res.status);
      assert.equal(res.attempts, 1);
      assert.equal(res.verdictRefs.length, 1);
      const store = openStore(config.store);
      for (const ref of res.verdictRefs) {
        const v = ValidationVerdictSchema.parse(await store.getJson(ref));
        if (!v.passed) {
          assert.ok(v.failedCheck && CHECKS.includes(v.failedCheck), `failed check named: ${v.reason}`);
          assert.match(v.reason ?? '', /^\w+: .{10,}/);
        }
      }
      if (res.status === 'synthesis_failed')
        assert.match(res.lastFailure!, /^(compile|determinism|solvability|non_triviality|verifier|calibration): /);
    } finally {
      await server.close();
      rmSync(dir, { recursive: true, force: true });
    }
  },
);
