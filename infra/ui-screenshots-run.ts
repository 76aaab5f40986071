/**
 * Drives two rounds of a retraining schedule on an isolated dev server with the Web UI, using the
 * test suite's scripted policy/analyst and a scripted served TRACE agent (OpenAI wire protocol),
 * then takes the docs/screenshots with infra/ui-screenshots.ts. Illustration only: the numbers in
 * the screenshots come from scripted replies, not a model.
 *   node --import tsx infra/ui-screenshots-run.ts
 */
import { Client, Connection, ScheduleOverlapPolicy } from '@temporalio/client';
import { execFileSync } from 'node:child_process';
import { freePort, startTemporalDevServer } from './temporal.js';
import { startWorkers } from '../workers/run.js';
import { TASK_QUEUE_CPU } from '../workflows/types.js';
import { startScriptedLlm } from '../test/helpers/scripted-llm.js';
import { FAST_TIMEOUTS, pipelineConfig, pipelineReply, tempDir } from '../test/helpers/temporal.js';
import { traceAgentReply } from '../test/helpers/toy-policy.js';

const tmp = await tempDir('trace-ui-');
const llm = await startScriptedLlm(pipelineReply);
const traceAgent = await startScriptedLlm(traceAgentReply, 'trace-agent');
const uiPort = await freePort();
const server = await startTemporalDevServer({ dbFile: `${tmp.dir}/temporal.db`, port: 0, uiPort });
const settings = {
  address: server.address,
  namespace: 'default',
  embedded: true,
  uiBase: `http://127.0.0.1:${uiPort}`,
};
const workers = await startWorkers({ queues: ['cpu'], settings, shutdownGraceMs: 2000 });
const connection = await Connection.connect({ address: server.address });
const client = new Client({ connection });
const config = pipelineConfig(llm.baseURL, `${tmp.dir}/artifacts`, {
  name: 'nightly-retrain',
  evaluation: {
    maxTasks: 2,
    promotionMargin: 0.1,
    promptOnly: true,
    variants: [{ name: 'trace', kind: 'trace', baseURL: traceAgent.baseURL, model: 'trace-agent' }],
  },
});
const schedule = await client.schedule.create({
  scheduleId: 'nightly-retrain',
  spec: { intervals: [{ every: '1d' }] },
  action: {
    type: 'startWorkflow',
    workflowType: 'traceRetrain',
    taskQueue: TASK_QUEUE_CPU,
    workflowId: 'nightly-retrain',
    args: [{ config, timeouts: FAST_TIMEOUTS }],
  },
  policies: { overlap: ScheduleOverlapPolicy.SKIP },
  state: { paused: true },
});
const ids: string[] = [];
for (let n = 1; n <= 2; n++) {
  await schedule.trigger();
  let id: string | undefined;
  while (!id) {
    const a = (await schedule.describe()).info.recentActions;
    if (a.length >= n) id = a[n - 1].action.workflow.workflowId;
    else await new Promise((r) => setTimeout(r, 100));
  }
  await client.workflow.getHandle(id).result();
  ids.push(id);
}
execFileSync(
  process.execPath,
  [
    '--import',
    'tsx',
    'infra/ui-screenshots.ts',
    '--ui',
    settings.uiBase,
    '--workflow',
    `pipeline-run=${ids[0]}/pipeline`,
    '--workflow',
    `retrain-round=${ids[1]}`,
    '--out',
    'docs/screenshots',
  ],
  { stdio: 'inherit' },
);
await connection.close();
await workers.shutdown();
await server.stop();
await llm.close();
await traceAgent.close();
await tmp.cleanup();
