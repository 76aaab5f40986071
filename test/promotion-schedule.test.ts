import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { ScheduleOverlapPolicy } from '@temporalio/client';
import { Command } from 'commander';
import { registerReportCommand } from '../cli/commands/report.js';
import { lineageKey } from '../store/keys.js';
import { LineageSchema } from '../core/promotion.js';
import { openStore } from '../store/index.js';
import type { RetrainResult } from '../workflows/retrain.js';
import { TASK_QUEUE_CPU } from '../workflows/types.js';
import {
  FAST_TIMEOUTS,
  itemOf,
  pipelineConfig,
  pipelineReply,
  startHarness,
  triggerSchedule,
} from './helpers/temporal.js';
import { traceAgentReply } from './helpers/toy-policy.js';

/**
 * Scheduled retraining on a real Temporal dev server: a Temporal Schedule (overlap SKIP) whose
 * action is traceRetrain, triggered twice. The second round starts from the first's artifacts
 * and compares its TRACE agent against the agent the first round promoted, in the same run.
 */
test("a retraining schedule runs twice: the second run reuses the first one's artifacts; promotion only by margin; lineage recorded", async (t) => {
  // The served TRACE agent (an external OpenAI-compatible endpoint): it states the pending total.
  const { dir, llm, agents, temporal, client } = await startHarness(t, pipelineReply, {
    prefix: 'trace-retrain-',
    agents: { 'trace-agent': traceAgentReply },
  });
  const traceAgent = agents['trace-agent'];
  const config = pipelineConfig(llm.baseURL, `${dir}/artifacts`, {
    name: 'retrain-test',
    evaluation: {
      maxTasks: 2,
      promotionMargin: 0.1,
      variants: [{ name: 'trace', kind: 'trace', baseURL: traceAgent.baseURL, model: 'trace-agent' }],
    },
  });

  const schedule = await client.schedule.create({
    scheduleId: 'retrain-sched',
    spec: { intervals: [{ every: '1d' }] },
    action: {
      type: 'startWorkflow',
      workflowType: 'traceRetrain',
      taskQueue: TASK_QUEUE_CPU,
      workflowId: 'retrain',
      args: [{ config, timeouts: FAST_TIMEOUTS }],
    },
    policies: { overlap: ScheduleOverlapPolicy.SKIP },
    state: { paused: true },
  });

  async function triggerAndWait(n: number): Promise<{ id: string; result: RetrainResult }> {
    const id = await triggerSchedule(schedule, n);
    return { id, result: (await client.workflow.getHandle(id).result()) as RetrainResult };
  }

  const first = await triggerAndWait(1);
  assert.equal(first.result.startedFrom, null);
  assert.equal(first.result.reusedDictionary, false);
  // base 0/2 held-out tasks, TRACE 1/2: +50 pp ≥ 10 pp margin.
  assert.equal(first.result.promotion.promote, true, first.result.promotion.reason);
  assert.equal(first.result.promotion.delta, 0.5);
  assert.equal(first.result.currentAgent, `${first.id}:trace`);
  const discoveries = () => llm.requests.filter((r) => itemOf(r).kind === 'discovery').length;
  assert.equal(discoveries(), 1);

  const second = await triggerAndWait(2);
  assert.notEqual(second.id, first.id);
  assert.equal(second.result.startedFrom, first.id);
  assert.equal(second.result.reusedDictionary, true);
  assert.equal(discoveries(), 1, "the second run reused the first run's capability dictionary (no discovery call)");
  const store = openStore(config.store);
  assert.equal(
    (await store.get(`runs/${second.id}/capabilities/dictionary.json`)).toString(),
    (await store.get(`runs/${first.id}/capabilities/dictionary.json`)).toString(),
  );
  // The promoted agent was evaluated again in the second run, on the same held-out tasks: a tie.
  const currentEpisodes = await store.list(`runs/${second.id}/evaluation/current/episodes/`);
  assert.equal(currentEpisodes.length, 2);
  assert.equal(second.result.promotion.promote, false);
  assert.match(second.result.promotion.reason, /below margin/);
  assert.equal(second.result.currentAgent, `${first.id}:trace`, 'the current agent stays');

  const lineage = LineageSchema.parse((await store.getJson<{ lineage: unknown }>(lineageKey(config.name))).lineage);
  assert.deepEqual(
    lineage.records.map((r) => [r.runId, r.promoted, r.parentAgentId]),
    [
      [first.id, true, 'base'],
      [second.id, false, `${first.id}:trace`],
    ],
  );
  const sa = (await client.workflow.getHandle(second.id).describe()).searchAttributes as Record<string, unknown[]>;
  assert.deepEqual(sa.TracePromotion, ['not_promoted']);
  // The run's report carries the promotion outcome.
  const report = await store.getJson<{
    promotion: { promote: boolean };
    links: { run: string; children: { url: string }[] };
  }>(`runs/${second.id}/report/report.json`);
  assert.equal(report.promotion.promote, false);
  assert.ok(report.links.run.endsWith(encodeURIComponent(`${second.id}/pipeline`)));
  assert.ok(
    report.links.children[0].url.endsWith(encodeURIComponent(`${second.id}/pipeline/capability/verify_preconditions`)),
  );

  // `trace report <run>` rebuilds the report of a finished pipeline run from Temporal + the store.
  process.env.TEMPORAL_ADDRESS = temporal.address;
  const program = new Command('trace').exitOverride();
  registerReportCommand(program);
  const out = path.join(dir, 'first.html');
  const lines: string[] = [];
  const log = console.log;
  console.log = (...args: unknown[]) => void lines.push(args.join(' '));
  try {
    await program.parseAsync(['node', 'trace', 'report', `${first.id}/pipeline`, '--out', out]);
  } finally {
    console.log = log;
  }
  const printed = lines.join('\n');
  assert.match(printed, new RegExp(`TRACE report — run ${first.id} \\(retrain-test\\) on toy-orders`));
  assert.match(printed, /trace\s+trace\s+2\s+50\.0%/);
  assert.match(printed, /\+50\.0 pp/);
  assert.match(await readFile(out, 'utf8'), /data-chart="pass-rates"/);
});
