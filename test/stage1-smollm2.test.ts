import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createStage1Activities, loadTrajectories } from '../activities/stage1.js';
import { InvalidLlmOutputError } from '../llm/client.js';
import { Stage1ResultSchema, PassLabelsSchema } from '../core/capability.js';
import { parseConfig } from '../core/config.js';
import { startLlmServer } from '../infra/llm-server.js';
import { openStore } from '../store/index.js';
import { tempDir } from './helpers/stage1-fixtures.js';

/**
 * Smoke test of stage 1 against the real embedded SmolLM2-135M server (no scripted replies):
 * the policy's tool calls, the analyst's grammar-constrained dictionary and labels all travel the
 * real wire path. The model is tiny, so what is asserted is that every stage either produces
 * schema-valid artifacts or fails cleanly with a typed error — never a crash or a partial artifact.
 */
test('stage 1 on toy-orders with the real local SmolLM2 server (tiny budget)', { timeout: 900_000 }, async (t) => {
  const server = await startLlmServer({ port: 0, parallel: 2, contextSize: 4096 });
  const tmp = await tempDir('trace-smollm2-');
  try {
    const role = { baseURL: server.baseURL, model: server.model, timeoutMs: 300_000, concurrency: 2 };
    const config = parseConfig({
      env: { name: 'toy-orders', maxTasks: 2 },
      llm: { policy: { ...role, maxTokens: 96 }, analyst: { ...role, maxTokens: 768 } },
      store: { kind: 'local', dir: tmp.dir },
      rollouts: { maxSteps: 3, maxErrors: 2 },
      analysis: { passes: 1, minPassesSelected: 1, maxCapabilities: 3, maxRepairAttempts: 1, maxTrajectoryChars: 2000 },
    });
    const acts = createStage1Activities();
    const store = openStore(config.store);
    const tasks = await acts.listRolloutTasks({ config });
    const batch = await acts.collectRolloutBatch({
      config,
      runId: 'smoke',
      batchIndex: 0,
      tasks,
      acceptErroredEpisodes: true,
    });
    assert.equal(batch.count, 2);
    const trajs = await loadTrajectories(store, [batch.ref]);
    for (const t of trajs) {
      assert.equal(t.model, server.model);
      assert.ok(
        t.messages.some((m) => m.role === 'assistant'),
        `${t.id} has the policy's turns`,
      );
      assert.ok(t.usage.calls >= 1 && t.usage.completionTokens > 0, `${t.id} records real token usage`);
    }

    let dictionaryRef;
    try {
      const disc = await acts.discoverCapabilities({ config, runId: 'smoke', rolloutRefs: [batch.ref] });
      assert.ok(disc.capabilities >= 1);
      dictionaryRef = disc.ref;
    } catch (err) {
      assert.ok(err instanceof InvalidLlmOutputError, `discovery fails only with a typed error, got ${String(err)}`);
      t.diagnostic(`discovery failed cleanly: ${err.message}`);
      return;
    }
    const pass = await acts.labelPass({ config, runId: 'smoke', pass: 0, rolloutRefs: [batch.ref], dictionaryRef });
    assert.equal(pass.labeled + pass.failedItems, 2, 'every trajectory is labeled or recorded as a failed item');
    PassLabelsSchema.parse(await store.getJson(pass.ref));
    const sel = await acts.selectCapabilities({
      config,
      runId: 'smoke',
      rolloutRefs: [batch.ref],
      dictionaryRef,
      passRefs: [pass.ref],
    });
    const result = Stage1ResultSchema.parse(await store.getJson(sel.ref));
    assert.ok(sel.summary.length > 0);
    t.diagnostic(sel.summary);
    assert.equal(result.counts.trajectories, 2);
    assert.equal(result.stats.length, result.dictionary.capabilities.length, 'statistics for every capability');
  } finally {
    await server.close();
    await tmp.cleanup();
  }
});
