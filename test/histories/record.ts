import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import { execFileSync } from 'node:child_process';
import { TEMPORAL_BINARY } from '../../infra/temporal.js';
import { startWorkers } from '../../workers/run.js';
import { TASK_QUEUE_CPU, type PipelineInput } from '../../workflows/types.js';
import { startScriptedLlm } from '../helpers/scripted-llm.js';
import { FAST_TIMEOUTS, pipelineConfig, pipelineReply, startTestTemporal, tempDir } from '../helpers/temporal.js';

/**
 * Re-records the workflow histories test/replay.test.ts replays: real runs on a dev server with
 * the scripted policy/analyst. Run after an intentional workflow change (with a patch or a new
 * workflow type for in-flight runs):  node --import tsx test/histories/record.ts
 */
const HERE = path.dirname(fileURLToPath(import.meta.url));

const tmp = await tempDir('trace-record-');
const llm = await startScriptedLlm(pipelineReply);
const temporal = await startTestTemporal({ dbFile: path.join(tmp.dir, 'temporal.db') });
const workers = await startWorkers({
  queues: ['cpu'],
  settings: temporal.settings,
  exclude: ['synthesizeEnvironment', 'validateEnvironment', 'trainAdapter', 'fitGate'],
  shutdownGraceMs: 2000,
});
const connection = await Connection.connect({ address: temporal.address });
try {
  const client = new Client({ connection });
  const storeDir = path.join(tmp.dir, 'artifacts');
  const runs: { file: string; input: PipelineInput; children: Record<string, string> }[] = [
    {
      // Stage 1 + base evaluation; the capability child ends 'not_configured' (no stage-2 activities).
      file: 'pipeline-stage1',
      input: {
        runId: 'replay-stage1',
        config: pipelineConfig(llm.baseURL, storeDir, { stages: { synthesis: true, training: true, gate: true, evaluation: true } }),
        timeouts: FAST_TIMEOUTS,
      },
      children: { 'capability-not-configured': 'replay-stage1/capability/verify_preconditions', 'evaluation-fanout': 'replay-stage1/evaluation' },
    },
  ];
  for (const run of runs) {
    const id = run.input.runId!;
    const handle = await client.workflow.start('tracePipeline', { taskQueue: TASK_QUEUE_CPU, workflowId: id, args: [run.input] });
    await handle.result();
    const write = async (name: string, workflowId: string) => {
      // The CLI's proto-JSON export is the format Worker.runReplayHistories reads.
      const json = execFileSync(TEMPORAL_BINARY, ['workflow', 'show', '--workflow-id', workflowId, '--output', 'json', '--address', temporal.address], {
        encoding: 'utf8',
        maxBuffer: 64 * 1024 * 1024,
      });
      // Replay needs the original workflow id (child ids derive from it), so it is stored alongside.
      await writeFile(path.join(HERE, `${name}.json`), JSON.stringify({ workflowId, history: JSON.parse(json) }, null, 1));
      console.log(`recorded ${name}.json (${workflowId})`);
    };
    await write(run.file, id);
    for (const [name, workflowId] of Object.entries(run.children)) await write(name, workflowId);
  }
} finally {
  await connection.close();
  await workers.shutdown();
  await temporal.stop();
  await llm.close();
  await tmp.cleanup();
}
