import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createEvaluationActivities, type EvaluationDeps } from '../activities/evaluation.js';
import { parseConfig } from '../core/config.js';
import { openEnvironment } from '../envs/registry.js';
import { createLlm } from '../llm/client.js';
import { openStore } from '../store/index.js';
import { startScriptedLlm, type ScriptedLlm } from './helpers/scripted-llm.js';
import { toyPolicy } from './helpers/toy-policy.js';

/**
 * evaluateRun serving the variants itself: every server starts with the number of servers sharing
 * the cores, and `evaluation.parallelVariants` variants are evaluated at once (1 = one after another).
 * The servers are test doubles (the toy policy over the OpenAI protocol) that count the variants
 * with a request in flight.
 */
async function evaluateWith(parallelVariants: number) {
  const dir = await mkdtemp(path.join(tmpdir(), 'trace-eval-par-'));
  const started: { name: string; shares: number | undefined }[] = [];
  const busy = new Set<string>();
  let maxBusy = 0;
  const servers: ScriptedLlm[] = [];
  const deps: EvaluationDeps = {
    openStore,
    openEnvironment,
    createLlm,
    startPolicyServer: async (_config, variant, shares) => {
      started.push({ name: variant.name, shares });
      const s = await startScriptedLlm(async (req) => {
        busy.add(variant.name);
        maxBusy = Math.max(maxBusy, busy.size);
        // Long enough for another variant's request to arrive meanwhile when they run together.
        await new Promise((r) => setTimeout(r, 30));
        busy.delete(variant.name);
        return toyPolicy(req);
      }, variant.name);
      servers.push(s);
      return { baseURL: s.baseURL, model: variant.name, close: () => s.close() };
    },
  };
  const adapter = (name: string) => ({
    name,
    status: 'trained' as const,
    adapter: { uri: `file://${dir}/${name}/adapter_model.safetensors`, sha256: '0'.repeat(64), bytes: 0 },
  });
  try {
    const run = await createEvaluationActivities(deps).evaluateRun({
      runId: 'parallel',
      config: parseConfig({
        env: { name: 'toy-orders' },
        store: { kind: 'local', dir: path.join(dir, 'artifacts') },
        llm: { policy: { concurrency: 1 } },
        evaluation: { singleAdapters: true, parallelVariants },
      }),
      capabilities: [adapter('cap_a'), adapter('cap_b')],
    });
    return { run, started, maxBusy };
  } finally {
    for (const s of servers) await s.close();
    await rm(dir, { recursive: true, force: true });
  }
}

test('evaluation.parallelVariants: the served variants are evaluated together, each server told how many share the cores', async () => {
  const one = await evaluateWith(1);
  const all = await evaluateWith(3);
  for (const { run } of [one, all]) {
    assert.deepEqual(
      run.variants.map((v) => [v.name, v.n]),
      [
        ['base', 2],
        ['adapter-cap_a', 2],
        ['adapter-cap_b', 2],
      ],
      'every variant evaluated on every held-out task, reported in the plan order',
    );
  }
  assert.deepEqual(
    all.run.variants.map((v) => v.passRate),
    one.run.variants.map((v) => v.passRate),
    'evaluating together changes no result',
  );
  assert.deepEqual(
    one.started.map((s) => s.shares),
    [1, 1, 1],
  );
  assert.deepEqual(all.started.map((s) => [s.name, s.shares]).sort(), [
    ['adapter-cap_a', 3],
    ['adapter-cap_b', 3],
    ['base', 3],
  ]);
  assert.equal(one.maxBusy, 1, 'one variant at a time');
  assert.ok(all.maxBusy > 1, `variants overlapped (at most ${all.maxBusy} in flight at once)`);
});

test('evaluation.parallelVariants must be a positive integer', () => {
  assert.throws(
    () => parseConfig({ env: { name: 'toy-orders' }, evaluation: { parallelVariants: 0 } }),
    /parallelVariants/,
  );
});
