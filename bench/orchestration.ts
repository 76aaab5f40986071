import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime, Worker } from '@temporalio/worker';
import { loadConfigFile } from '../cli/commands/config-file.js';
import { startTemporalDevServer } from '../infra/temporal.js';
import { chunk, settlePool } from '../workflows/pool.js';

/**
 * Orchestration overhead: N trivial activities through Temporal (a real dev server, the
 * pipeline's activity options and fan-out pool) vs the same function called in-process, sequential
 * and at the pipeline's fan-out width. Prints ms per activity, the ratio, and the overhead share
 * of a demo run given its activity count and wall time.
 *
 *   node --import tsx bench/orchestration.ts [--n 200] [--concurrency 4] [--demo-seconds <measured demo wall time>]
 */
const HERE = path.dirname(fileURLToPath(import.meta.url));
const arg = (name: string, dflt: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
};
const N = arg('n', 200);
const CONCURRENCY = arg('concurrency', 4);
const DEMO_SECONDS = arg('demo-seconds', NaN);

async function trivial(i: number): Promise<number> {
  return i + 1;
}

async function timeIt(fn: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
}

/** Activities one demo run schedules: plan, task list, batches, discovery, R passes, selection, evaluation, report + one child per capability. */
function demoActivityCount(): { activities: number; note: string } {
  const c = loadConfigFile(path.join(HERE, '..', 'configs', 'demo.yaml'));
  const tasks = c.env.maxTasks ?? 6; // toy-orders has 6 train tasks
  const batches = chunk(Array.from({ length: tasks * c.rollouts.trialsPerTask }), c.rollouts.batchSize).length;
  const activities = 2 + batches + 1 + c.analysis.passes + 1 + (c.stages.evaluation ? 1 : 0) + 1;
  return {
    activities,
    note: `2 setup + ${batches} rollout batches + discovery + ${c.analysis.passes} labeling passes + selection + evaluation + report`,
  };
}

Runtime.install({ logger: new DefaultLogger('WARN') });
const server = await startTemporalDevServer({
  port: 0,
  uiPort: false,
  dbFile: path.join(HERE, '..', '.trace', 'bench-temporal.db'),
});
try {
  const inSeq = await timeIt(async () => {
    for (let i = 0; i < N; i++) await trivial(i);
  });
  const inPar = await timeIt(() =>
    settlePool(
      Array.from({ length: N }, (_, i) => i),
      CONCURRENCY,
      trivial,
    ),
  );

  const connection = await NativeConnection.connect({ address: server.address });
  const worker = await Worker.create({
    connection,
    taskQueue: 'bench-orchestration',
    workflowsPath: path.join(HERE, 'orchestration-workflows.ts'),
    activities: { trivial },
  });
  const client = new Client({ connection: await Connection.connect({ address: server.address }) });
  const run = (n: number, c: number) =>
    client.workflow.execute('trivialFanOut', {
      taskQueue: 'bench-orchestration',
      workflowId: `bench-${n}-${c}-${Date.now()}`,
      args: [n, c],
    });
  const results = await worker.runUntil(async () => {
    await run(10, CONCURRENCY); // warm-up: workflow cache, connections
    const seq = await timeIt(() => run(N, 1));
    const par = await timeIt(() => run(N, CONCURRENCY));
    return { seq, par };
  });
  await client.connection.close();
  await connection.close();

  const per = (ms: number) => ms / N;
  const overheadSeq = per(results.seq) - per(inSeq);
  const overheadPar = per(results.par) - per(inPar);
  console.log(
    `orchestration overhead, N = ${N} trivial activities, fan-out width ${CONCURRENCY}, server ${server.address}`,
  );
  console.log(
    `  in-process  sequential ${per(inSeq).toFixed(4)} ms/call   width ${CONCURRENCY} ${per(inPar).toFixed(4)} ms/call`,
  );
  console.log(
    `  Temporal    sequential ${per(results.seq).toFixed(2)} ms/activity   width ${CONCURRENCY} ${per(results.par).toFixed(2)} ms/activity`,
  );
  console.log(
    `  overhead    sequential ${overheadSeq.toFixed(2)} ms/activity   width ${CONCURRENCY} ${overheadPar.toFixed(2)} ms/activity`,
  );
  const demo = demoActivityCount();
  const demoOverheadMs = demo.activities * overheadSeq;
  console.log(
    `  a demo run schedules ${demo.activities} activities (${demo.note}) → ≈ ${demoOverheadMs.toFixed(0)} ms of orchestration`,
  );
  if (Number.isFinite(DEMO_SECONDS)) {
    console.log(
      `  overhead share of a ${DEMO_SECONDS} s demo run: ${((100 * demoOverheadMs) / (DEMO_SECONDS * 1000)).toFixed(3)}% (goal < 2%)`,
    );
  } else {
    console.log('  pass --demo-seconds <measured demo wall time> for the overhead share of a demo run');
  }
} finally {
  await server.stop();
}
