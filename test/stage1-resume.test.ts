import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createStage1Activities } from '../activities/stage1.js';
import { CapabilityDictionarySchema, PassLabelsSchema } from '../core/capability.js';
import type { Config } from '../core/config.js';
import { openStore } from '../store/index.js';
import { startScriptedLlm, type ChatRequest, type ScriptedReply } from './helpers/scripted-llm.js';
import { tempDir, testConfig } from './helpers/stage1-fixtures.js';

/** kill -9 of the process running an activity, then a rerun: finished items are not redone. */

function runChild(name: string, input: unknown) {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', 'test/helpers/stage1-child.ts', name, JSON.stringify(input)],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (err += d));
  const done = new Promise<{ code: number | null; signal: NodeJS.Signals | null; out: string; err: string }>(
    (resolve) => child.on('exit', (code, signal) => resolve({ code, signal, out, err })),
  );
  return { child, done };
}

async function until(cond: () => Promise<boolean>, ms = 60_000) {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 50));
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const taskOfPolicy = (req: ChatRequest) => req.messages[1].content ?? '';
const labeledId = (req: ChatRequest) => /trajectory (\S+) \(task/.exec(req.messages[1].content ?? '')?.[1] ?? '';

test('a killed worker mid-rollouts and mid-labeling resumes without redoing finished items', async () => {
  const tmp = await tempDir('trace-resume-');
  const server = await startScriptedLlm(async (req): Promise<ScriptedReply> => {
    const fmt = req.response_format?.json_schema?.name;
    await sleep(250);
    if (fmt === 'capability_labels')
      return { content: JSON.stringify({ labels: { verify_preconditions: 'PRESENT' } }) };
    return { content: 'Goodbye.' };
  });
  try {
    const config: Config = testConfig(server.baseURL, tmp.dir, { env: { name: 'toy-orders', maxTasks: 6 } });
    config.llm.policy.concurrency = 1;
    config.llm.analyst.concurrency = 1;
    const store = openStore(config.store);
    const acts = createStage1Activities();
    const tasks = await acts.listRolloutTasks({ config });
    const runId = 'kill';

    // Rollouts: kill after two episodes are persisted.
    const input = { config, runId, batchIndex: 0, tasks };
    const first = runChild('collectRolloutBatch', input);
    await until(async () => (await store.list(`runs/${runId}/rollouts/batch-0000.parts/`)).length >= 2);
    first.child.kill('SIGKILL');
    assert.equal((await first.done).signal, 'SIGKILL');
    const persisted = (await store.list(`runs/${runId}/rollouts/batch-0000.parts/`)).length;
    assert.ok(persisted >= 2 && persisted < 6, `${persisted} episodes persisted before the kill`);
    const second = await runChild('collectRolloutBatch', input).done;
    assert.equal(second.code, 0, second.err);
    const batch = JSON.parse(second.out) as { ref: { uri: string }; count: number };
    assert.equal(batch.count, 6);
    const perTask = new Map<string, number>();
    for (const r of server.requests)
      if (!r.response_format) perTask.set(taskOfPolicy(r), (perTask.get(taskOfPolicy(r)) ?? 0) + 1);
    const redone = [...perTask.values()].filter((n) => n > 1).length;
    assert.ok(redone <= 1, `at most the one in-flight episode is redone, got ${redone}`);
    assert.equal(perTask.size, 6);
    const lines = (await store.getText(batch.ref.uri)).trim().split('\n');
    assert.deepEqual(
      lines.map((l) => JSON.parse(l).taskId),
      tasks.map((t) => t.taskId),
    );

    // Labeling: kill after three items are persisted.
    const dictionary = {
      capabilities: [{ name: 'verify_preconditions', description: 'Checks first. Acts second.' }],
      basedOn: { successes: [], failures: [] },
      model: 'm',
    };
    const dictionaryRef = await store.put(
      `runs/${runId}/capabilities/dictionary.json`,
      JSON.stringify(CapabilityDictionarySchema.parse(dictionary)),
    );
    const labelInput = { config, runId, pass: 0, rolloutRefs: [batch.ref], dictionaryRef };
    const before = server.requests.length;
    const l1 = runChild('labelPass', labelInput);
    await until(async () => (await store.list(`runs/${runId}/capabilities/labels/pass-00.items/`)).length >= 3);
    l1.child.kill('SIGKILL');
    await l1.done;
    const l2 = await runChild('labelPass', labelInput).done;
    assert.equal(l2.code, 0, l2.err);
    assert.deepEqual(JSON.parse(l2.out).labeled, 6);
    const perItem = new Map<string, number>();
    for (const r of server.requests.slice(before)) perItem.set(labeledId(r), (perItem.get(labeledId(r)) ?? 0) + 1);
    assert.equal(perItem.size, 6);
    assert.ok([...perItem.values()].filter((n) => n > 1).length <= 1, 'at most the in-flight item is labeled twice');
    const pass = PassLabelsSchema.parse(await store.getJson(`runs/${runId}/capabilities/labels/pass-00.json`));
    assert.equal(new Set(pass.items.map((i) => i.trajectoryId)).size, 6);
  } finally {
    await server.close();
    await tmp.cleanup();
  }
});
