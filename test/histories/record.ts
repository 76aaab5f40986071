import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import { execFileSync } from 'node:child_process';
import { TEMPORAL_BINARY } from '../../infra/temporal.js';
import { startWorkers } from '../../workers/run.js';
import { TASK_QUEUE_CPU, type PipelineInput } from '../../workflows/types.js';
import { startScriptedLlm } from '../helpers/scripted-llm.js';
import { scriptedRole, servedPolicyRole, stages24Config, stages24Reply } from '../helpers/stages24.js';
import { buildTinyModel } from '../helpers/trainer.js';
import { FAST_TIMEOUTS, pipelineConfig, startTestTemporal, tempDir } from '../helpers/temporal.js';

/**
 * Re-records the workflow histories test/replay.test.ts replays: real runs on a dev server with
 * the scripted policy/analyst (and, for stages 2–4, the real trainer on a tiny model). Run after an
 * intentional workflow change (with a patch or a new workflow type for in-flight runs):
 *   node --import tsx test/histories/record.ts [run file names…]   (default: every run)
 * Recording only new runs keeps the older histories, so runs started by older code stay covered.
 */
const HERE = path.dirname(fileURLToPath(import.meta.url));
const only = process.argv.slice(2);

const tmp = await tempDir('trace-record-');
const llm = await startScriptedLlm(stages24Reply);
const temporal = await startTestTemporal({ dbFile: path.join(tmp.dir, 'temporal.db') });
const connection = await Connection.connect({ address: temporal.address });
const storeDir = path.join(tmp.dir, 'artifacts');
const model = path.join(tmp.dir, 'model');
const role = scriptedRole(llm.baseURL);
interface RecordedRun {
  file: string;
  input: PipelineInput;
  children: Record<string, string>;
  stages24: boolean;
}
const allRuns: RecordedRun[] = [
  {
    // Stage 1 + base evaluation; the capability child ends 'not_configured' (stages 2–4 off by config).
    file: 'pipeline-stage1',
    stages24: false,
    input: {
      runId: 'replay-stage1',
      config: pipelineConfig(llm.baseURL, storeDir),
      timeouts: FAST_TIMEOUTS,
    },
    children: {
      'capability-not-configured': 'replay-stage1/capability/verify_preconditions',
      'evaluation-fanout': 'replay-stage1/evaluation',
    },
  },
  {
    // Stages 1–4: reference-env fallback, GRPO on a tiny model, a gate on gold demonstrations,
    // base vs TRACE served and evaluated on the GPU queue.
    file: 'pipeline-gate',
    stages24: true,
    input: {
      runId: 'replay-gate',
      config: stages24Config(llm.baseURL, storeDir, model, {
        llm: { policy: servedPolicyRole(llm.baseURL), analyst: role, generator: role },
        rollouts: { trialsPerTask: 2, batchSize: 3, maxConcurrentBatches: 2, maxSteps: 2 },
        stages: { synthesis: true, training: true, gate: true, evaluation: true },
        gate: { steps: 2, batchSize: 2, goldDemonstrations: 2 },
        evaluation: { maxTasks: 1 },
      }),
      // Served evaluation starts two trainer servers: more than FAST_TIMEOUTS' minute on a busy machine.
      timeouts: { ...FAST_TIMEOUTS, heartbeatMs: 60_000, longMs: 600_000 },
    },
    children: {
      'capability-trained': 'replay-gate/capability/verify_preconditions',
      'evaluation-served': 'replay-gate/evaluation',
    },
  },
];
const runs = allRuns.filter((r) => only.length === 0 || only.includes(r.file));

if (runs.some((r) => r.stages24)) {
  await buildTinyModel(model);
}
const workers = await startWorkers({ queues: ['cpu', 'gpu'], settings: temporal.settings, shutdownGraceMs: 2000 });
try {
  const client = new Client({ connection });
  for (const run of runs) {
    const id = run.input.runId!;
    const handle = await client.workflow.start('tracePipeline', {
      taskQueue: TASK_QUEUE_CPU,
      workflowId: id,
      args: [run.input],
    });
    await handle.result();
    const write = async (name: string, workflowId: string) => {
      // The CLI's proto-JSON export is the format Worker.runReplayHistories reads.
      const json = execFileSync(
        TEMPORAL_BINARY,
        ['workflow', 'show', '--workflow-id', workflowId, '--output', 'json', '--address', temporal.address],
        {
          encoding: 'utf8',
          maxBuffer: 64 * 1024 * 1024,
        },
      );
      // Replay needs the original workflow id (child ids derive from it), so it is stored alongside.
      await writeFile(
        path.join(HERE, `${name}.json`),
        JSON.stringify({ workflowId, history: JSON.parse(json) }, null, 1),
      );
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
