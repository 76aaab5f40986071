import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MockActivityEnvironment } from '@temporalio/testing';
import { createStage1Activities } from '../activities/stage1.js';
import { openStore } from '../store/index.js';
import { startScriptedLlm } from './helpers/scripted-llm.js';
import { tempDir, testConfig } from './helpers/stage1-fixtures.js';

/** Inside a (mock) Temporal activity context: progress heartbeats, cancellation, late-attempt policy. */

test('activities heartbeat progress, stop starting items when cancelled, and accept errored episodes on late attempts', async () => {
  const tmp = await tempDir('trace-actx-');
  let policyDown = false;
  const server = await startScriptedLlm(async (req) => {
    await new Promise((r) => setTimeout(r, 100));
    if (req.response_format) return { content: JSON.stringify({ labels: { verify_preconditions: 'PRESENT' } }) };
    return policyDown ? { status: 500, headers: { 'x-should-retry': 'false' } } : { content: 'Goodbye.' };
  });
  try {
    const config = testConfig(server.baseURL, tmp.dir, { env: { name: 'toy-orders', maxTasks: 6 } });
    config.llm.policy.concurrency = 1;
    config.llm.analyst.concurrency = 1;
    const acts = createStage1Activities();
    type Batch = Awaited<ReturnType<typeof acts.collectRolloutBatch>>;
    const store = openStore(config.store);
    const tasks = await acts.listRolloutTasks({ config });

    const env = new MockActivityEnvironment();
    const beats: unknown[] = [];
    env.on('heartbeat', (d: unknown) => beats.push(d));
    const batch = (await env.run(acts.collectRolloutBatch, { config, runId: 'ctx', batchIndex: 0, tasks })) as Batch;
    assert.equal(batch.count, 6);
    assert.deepEqual(beats.at(-1), { done: 6, total: 6 });
    assert.ok(beats.length >= 7, `${beats.length} heartbeats`);

    // Attempt 3+: an LLM outage is recorded (termination error) instead of failing the batch again.
    policyDown = true;
    const late = new MockActivityEnvironment({ attempt: 3 });
    const recorded = (await late.run(acts.collectRolloutBatch, {
      config,
      runId: 'ctx',
      batchIndex: 1,
      tasks: tasks.slice(0, 1),
    })) as Batch;
    assert.equal(recorded.count, 1);
    const early = new MockActivityEnvironment({ attempt: 1 });
    await assert.rejects(
      early.run(acts.collectRolloutBatch, { config, runId: 'ctx', batchIndex: 2, tasks: tasks.slice(0, 1) }),
      /infrastructure errors/,
    );

    const dictionaryRef = await store.put(
      'runs/ctx/capabilities/dictionary.json',
      JSON.stringify({
        capabilities: [{ name: 'verify_preconditions', description: 'Checks first. Acts second.' }],
        basedOn: { successes: [], failures: [] },
        model: 'm',
      }),
    );
    const labeling = new MockActivityEnvironment();
    const labelBeats: { done: number }[] = [];
    labeling.on('heartbeat', (d: { done: number }) => {
      labelBeats.push(d);
      if (d.done === 2) labeling.cancel();
    });
    await assert.rejects(
      labeling.run(acts.labelPass, { config, runId: 'ctx', pass: 0, rolloutRefs: [batch.ref], dictionaryRef }),
    );
    const persisted = await store.list('runs/ctx/capabilities/labels/pass-00.items/');
    assert.ok(
      persisted.length >= 2 && persisted.length <= 3,
      `${persisted.length} items labeled before the cancellation took effect`,
    );
    assert.equal(await store.stat('runs/ctx/capabilities/labels/pass-00.json'), undefined);
  } finally {
    await server.close();
    await tmp.cleanup();
  }
});
