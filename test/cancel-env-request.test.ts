import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MockActivityEnvironment } from '@temporalio/testing';
import OpenAI from 'openai';
import { createEvaluationActivities } from '../activities/evaluation.js';
import { createStage1Activities } from '../activities/stage1.js';
import { runEpisode } from '../agent/rollout.js';
import { createLlm } from '../llm/client.js';
import type { Environment, Episode } from '../envs/environment.js';
import { serveEnvironment } from '../envs/protocol/server.js';
import { createTau2Environment } from '../envs/tau2/index.js';
import { createToyOrdersEnv } from '../envs/toy/orders.js';
import { startScriptedLlm } from './helpers/scripted-llm.js';
import { tempDir, testConfig } from './helpers/stage1-fixtures.js';

/**
 * Issue 13 item 14: a cancelled rollout or evaluation activity aborts the target-env request it is
 * waiting on. The target is the toy env over the env HTTP protocol, with a step that never answers
 * unless the server sees its client go (the server's abort signal). Latency is counted in
 * heartbeats, not milliseconds, so a slow machine cannot fail it: the cancellation is delivered in
 * a heartbeat's answer (as on a real worker), and the env request must be aborted before the next one.
 */

type Event = 'beat' | 'cancel' | 'step-started' | 'step-aborted' | 'user-simulator-left';

/** toy-orders whose steps hang until their request signal aborts; `inFlight` counts the hanging ones. */
function hangingSteps(log: Event[]): { env: Environment; inFlight: () => number } {
  const inner = createToyOrdersEnv();
  let inFlight = 0;
  const env: Environment = {
    info: inner.info,
    tools: () => inner.tools(),
    systemPrompt: () => inner.systemPrompt(),
    listTasks: () => inner.listTasks(),
    async reset(req) {
      const ep = await inner.reset(req);
      const wrapped: Episode = {
        id: ep.id,
        taskId: ep.taskId,
        initialMessages: () => ep.initialMessages(),
        evaluate: (m, t) => ep.evaluate(m, t),
        fork: () => ep.fork(),
        close: () => ep.close(),
        step: (_action, opts) =>
          new Promise((_, reject) => {
            inFlight++;
            log.push('step-started');
            opts?.signal?.addEventListener('abort', () => {
              inFlight--;
              log.push('step-aborted');
              reject(opts.signal!.reason);
            });
          }),
      };
      return wrapped;
    },
  };
  return { env, inFlight: () => inFlight };
}

/** Cancels the activity on the first heartbeat after a step started, as the server's answer would. */
function cancelDuringStep(activity: MockActivityEnvironment, log: Event[]) {
  activity.on('heartbeat', () => {
    log.push('beat');
    if (log.includes('step-started') && !log.includes('cancel')) {
      log.push('cancel');
      activity.cancel();
    }
  });
}

/** A guard against hanging (before the fix the step is never aborted), not a latency bound. */
async function until(cond: () => boolean, what: string, ms = 30_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

function assertAbortedWithinOneBeat(log: Event[]) {
  const cancel = log.indexOf('cancel');
  const aborted = log.indexOf('step-aborted');
  assert.ok(cancel >= 0, `cancelled during the step: ${log.join(' ')}`);
  assert.ok(aborted > cancel, `the env request was aborted after the cancel: ${log.join(' ')}`);
  const beatsBetween = log.slice(cancel, aborted).filter((e) => e === 'beat').length;
  assert.ok(beatsBetween <= 1, `${beatsBetween} heartbeats between the cancel and the abort: ${log.join(' ')}`);
}

const getOrder = () => ({ toolCalls: [{ name: 'get_order', arguments: JSON.stringify({ order_id: 'O-1001' }) }] });

/** A hanging env server and a scripted LLM (get_order) for one test, closed after it whatever happens. */
async function withHangingEnv(
  prefix: string,
  body: (f: {
    tmp: { dir: string };
    log: Event[];
    target: ReturnType<typeof hangingSteps>;
    served: Awaited<ReturnType<typeof serveEnvironment>>;
    llm: Awaited<ReturnType<typeof startScriptedLlm>>;
  }) => Promise<void>,
): Promise<void> {
  const tmp = await tempDir(prefix);
  const log: Event[] = [];
  const target = hangingSteps(log);
  const served = await serveEnvironment(target.env);
  const llm = await startScriptedLlm(getOrder);
  try {
    await body({ tmp, log, target, served, llm });
  } finally {
    await llm.close();
    await served.close();
    await tmp.cleanup();
  }
}

test('a cancelled rollout activity aborts its in-flight env request within one heartbeat; the env server is left idle', async () => {
  await withHangingEnv('trace-cancel-env-', async ({ tmp, log, target, served, llm }) => {
    // The episode's own time limit is beyond the test's guard: only the cancellation may end the step.
    const config = testConfig(llm.baseURL, tmp.dir, {
      env: { name: served.url, maxTasks: 3 },
      rollouts: { episodeTimeoutMs: 120_000 },
    });
    config.llm.policy.concurrency = 1;
    const acts = createStage1Activities();
    const tasks = await acts.listRolloutTasks({ config });
    const activity = new MockActivityEnvironment();
    cancelDuringStep(activity, log);
    const run = activity.run(acts.collectRolloutBatch, { config, runId: 'c', batchIndex: 0, tasks });
    run.catch(() => undefined);
    await until(() => log.includes('step-aborted'), 'the server to abort the step');
    await assert.rejects(run, (e: Error) => /cancel/i.test(`${e.name} ${e.message}`));
    assertAbortedWithinOneBeat(log);
    assert.equal(target.inFlight(), 0, 'nothing left running on the env server');
    assert.equal(llm.requests.length, 1, 'no later episode started after the cancellation');
    assert.deepEqual(
      await (await import('../store/index.js')).openStore(config.store).list('runs/c/'),
      [],
      'a cancelled episode is not stored',
    );
  });
});

test('a cancelled evaluation activity aborts its in-flight env request within one heartbeat', async () => {
  await withHangingEnv('trace-cancel-eval-', async ({ tmp, log, target, served, llm }) => {
    const config = testConfig(llm.baseURL, tmp.dir, {
      env: { name: served.url },
      rollouts: { episodeTimeoutMs: 120_000 },
    });
    const acts = createEvaluationActivities();
    const { tasks } = await acts.listEvaluationTasks({ config });
    const activity = new MockActivityEnvironment();
    cancelDuringStep(activity, log);
    const run = activity.run(acts.evaluateVariant, {
      config,
      runId: 'e',
      variant: { name: 'base', kind: 'base' as const },
      tasks: tasks.slice(0, 1),
    });
    run.catch(() => undefined);
    await until(() => log.includes('step-aborted'), 'the server to abort the step');
    await assert.rejects(run, (e: Error) => /cancel/i.test(`${e.name} ${e.message}`));
    assertAbortedWithinOneBeat(log);
    assert.equal(target.inFlight(), 0);
  });
});

test("a cancelled episode on tau2 aborts the user simulator's LLM call in flight (the LLM server stops generating)", async () => {
  const log: Event[] = [];
  // One scripted endpoint: the policy answers in text; the user simulator opens, then never answers.
  const llm = await startScriptedLlm((req, index) => {
    if (req.model !== 'user-sim') return { content: 'How can I help you today?' };
    if (index === 0) return { content: 'Hi, I need help.' };
    log.push('step-started');
    return { hang: true };
  });
  try {
    const env = createTau2Environment('mock', {
      userSimulator: { client: new OpenAI({ baseURL: llm.baseURL, apiKey: 'test', maxRetries: 0 }), model: 'user-sim' },
    });
    const [task] = await env.listTasks();
    const policy = createLlm(testConfig(llm.baseURL, '/tmp/unused'), 'policy', { maxRetries: 0 });
    const activity = new MockActivityEnvironment();
    cancelDuringStep(activity, log);
    const run = activity.run(() =>
      runEpisode({ env, llm: policy, taskId: task.id, maxSteps: 10, maxErrors: 3, timeoutMs: 120_000 }),
    );
    run.catch(() => undefined);
    await until(() => {
      if (llm.disconnects.length && !log.includes('user-simulator-left')) log.push('user-simulator-left');
      return log.includes('user-simulator-left');
    }, 'the user simulator request to be aborted');
    await assert.rejects(run, (e: Error) => /cancel/i.test(`${e.name} ${e.message}`));
    const cancel = log.indexOf('cancel');
    assert.ok(cancel >= 0 && log.indexOf('user-simulator-left') > cancel, log.join(' '));
    assert.ok(log.slice(cancel).filter((e) => e === 'beat').length <= 1, log.join(' '));
  } finally {
    await llm.close();
  }
});
