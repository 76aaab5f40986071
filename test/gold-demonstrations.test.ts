import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { MockActivityEnvironment } from '@temporalio/testing';
import { parseConfig } from '../core/config.js';
import { TrajectorySchema } from '../core/trajectory.js';
import type { Environment } from '../envs/environment.js';
import { inspectInstance } from '../envs/sdk/index.js';
import { loadReferenceEnv, referencePath } from '../envs/reference/index.js';
import { PROJECT_ROOT } from '../infra/temporal.js';
import { goldDemonstrations } from '../activities/gold-demonstrations.js';
import { fitGate, trainAdapter, type FitGateResult, type TrainAdapterResult } from '../activities/training.js';
import { buildTinyModel } from './helpers/trainer.js';

test("gold demonstrations replay each seed's gold solution and keep only what the verifier accepts", async () => {
  const env = await loadReferenceEnv('tool_calling_precision');
  const gold = await goldDemonstrations(env, [0, 1, 2], 'gold-solution');
  assert.equal(gold.trajectories.length, 3);
  assert.deepEqual(gold.rejected, []);
  for (const [i, t] of gold.trajectories.entries()) {
    TrajectorySchema.parse(t);
    assert.equal(t.source, 'gold');
    assert.equal(t.seed, i);
    assert.equal(t.success, true);
    assert.equal(t.messages[0].role, 'system');
    const view = await inspectInstance(env, i);
    const calls = t.messages.flatMap((m) =>
      m.role === 'assistant' && m.tool_calls ? m.tool_calls.map((c) => c.function) : [],
    );
    const want = view.gold.flatMap((a) => (a.type === 'tool_call' ? [a.call.function] : []));
    assert.deepEqual(calls, want, 'the demonstration is the gold solution, call for call');
  }

  // A verifier that rejects every episode: nothing is kept, and each seed says why.
  const strict: Environment = {
    ...env,
    info: env.info,
    tools: () => env.tools(),
    systemPrompt: () => env.systemPrompt(),
    listTasks: () => env.listTasks(),
    async reset(req) {
      const ep = await env.reset(req);
      if ('taskId' in req && req.taskId.startsWith('inspect:')) return ep;
      return {
        id: ep.id,
        taskId: ep.taskId,
        initialMessages: () => ep.initialMessages(),
        step: (a) => ep.step(a),
        evaluate: async () => ({ reward: 0, components: {}, success: false }),
        fork: () => ep.fork(),
        close: () => ep.close(),
      };
    },
  };
  const none = await goldDemonstrations(strict, [0, 1], 'gold-solution');
  assert.equal(none.trajectories.length, 0);
  assert.deepEqual(
    none.rejected.map((r) => r.seed),
    [0, 1],
  );
  assert.match(none.rejected[0].reason, /reward 0/);
});

test(
  'trainAdapter stores gold demonstrations when configured; fitGate trains on them and reports routing',
  { timeout: 600_000 },
  async (t) => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'trace-gold-'));
    t.after(() => rm(dir, { recursive: true, force: true }));
    await buildTinyModel(path.join(dir, 'model'));
    const config = parseConfig({
      env: { name: 'toy-orders' },
      store: { kind: 'local', dir: path.join(dir, 'artifacts') },
      training: {
        model: path.join(dir, 'model'),
        iterations: 1,
        groupsPerIteration: 1,
        rolloutsPerGroup: 2,
        maxNewTokens: 4,
        maxTurns: 1,
        checkpointEvery: 1,
      },
      gate: { steps: 3, batchSize: 2, goldDemonstrations: 2 },
    });
    const train = (name: string): Promise<TrainAdapterResult> =>
      new MockActivityEnvironment().run(trainAdapter, {
        runId: 'g1',
        config,
        capability: { name },
        envModule: path.relative(PROJECT_ROOT, referencePath('tool_calling_precision')),
      });
    const first = await train('tool_calling_precision');
    const second = await train('other_capability');
    assert.deepEqual(first.goldDemonstrations, { stored: 2, rejected: [] });
    assert.equal(first.device, 'cpu');
    assert.ok(first.durationSeconds > 0);
    const stored = readFileSync(
      path.join(dir, 'artifacts/runs/g1/adapters/tool_calling_precision/trajectories/gold-demonstrations.jsonl'),
      'utf8',
    )
      .trim()
      .split('\n');
    assert.equal(stored.length, 2);
    // Drawn at random from the whole seed space, not 0..n-1 (a module could hand over wrong gold there: rerun 17).
    const seeds = stored.map((l) => (JSON.parse(l) as { seed: number }).seed);
    assert.notDeepEqual(seeds, [0, 1]);
    assert.equal(new Set(seeds).size, 2);
    const successes = (name: string) =>
      readdirSync(path.join(dir, `artifacts/runs/g1/adapters/${name}/trajectories`))
        .filter((f) => f.startsWith('iter-'))
        .flatMap((f) =>
          readFileSync(path.join(dir, `artifacts/runs/g1/adapters/${name}/trajectories`, f), 'utf8')
            .trim()
            .split('\n'),
        )
        .filter((l) => JSON.parse(l).success).length;

    const gate: FitGateResult = await new MockActivityEnvironment().run(fitGate, {
      runId: 'g1',
      config,
      adapters: [
        { capability: 'tool_calling_precision', adapter: first.adapter },
        { capability: 'other_capability', adapter: second.adapter },
      ],
    });
    assert.equal(gate.examples.gold, 4);
    assert.equal(gate.examples.policy, successes('tool_calling_precision') + successes('other_capability'));
    assert.deepEqual(Object.keys(gate.routing).sort(), ['other_capability', 'tool_calling_precision']);
    assert.ok(Math.abs(Object.values(gate.routing).reduce((s, x) => s + x, 0) - 1) < 1e-3);
    const manifest = JSON.parse(readFileSync(fileURLToPath(gate.manifest.uri), 'utf8'));
    assert.deepEqual(manifest.examples_by_source, gate.examples);
  },
);
