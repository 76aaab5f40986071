import type { Command } from 'commander';
import type { Config } from '../../core/config.js';
import type { ImportedRollouts, PipelineInput, PipelineResult } from '../../workflows/types.js';
import { terminalSafe } from '../../core/terminal-text.js';
import { connectClient, formatRate, newRunId, queryProgress, uiLink } from './common.js';
import { progressLine } from './progress.js';

/** `trace run <config>`: validate, start tracePipeline, print id + UI link, follow progress. */
export function registerRun(program: Command): void {
  program
    .command('run')
    .description('start a TRACE pipeline run from a config file (YAML or JSON)')
    .argument('<config>', 'config file')
    .option('--detach', 'print the run id and return instead of following progress')
    .option('--id <runId>', 'run id (default: <name>-<timestamp>-<random>)')
    .option(
      '--rollouts <rollouts.json>',
      'start from imported rollouts (written by `trace import-tau2`) instead of collecting them',
    )
    .action(async (file: string, opts: { detach?: boolean; id?: string; rollouts?: string }) => {
      const { validateRunConfig, readImportedRollouts } = await import('./config-file.js');
      const config = validateRunConfig(file);
      const rollouts = opts.rollouts ? readImportedRollouts(opts.rollouts) : undefined;
      const { workflowId } = await startRun(config, opts.id, rollouts);
      if (opts.detach) return;
      const result = await followRun(workflowId);
      printResult(result);
    });
}

export async function startRun(
  config: Config,
  runId = newRunId(config),
  rollouts?: ImportedRollouts,
): Promise<{ workflowId: string }> {
  const { client, settings } = await connectClient();
  const { TASK_QUEUE_CPU } = await import('../../workflows/types.js');
  const input: PipelineInput = { runId, config, ...(rollouts ? { rollouts } : {}) };
  await client.workflow.start('tracePipeline', {
    taskQueue: TASK_QUEUE_CPU,
    workflowId: runId,
    args: [input],
    memo: { configName: config.name },
  });
  console.log(`run ${runId} started`);
  console.log(`UI: ${uiLink(runId, settings)}`);
  await client.connection.close();
  return { workflowId: runId };
}

/**
 * Polls the `progress` query once a second and redraws one line (a TTY) or prints each change
 * (logs), until the workflow closes; returns its result or throws its failure.
 */
export async function followRun(workflowId: string): Promise<PipelineResult> {
  const { client } = await connectClient();
  const handle = client.workflow.getHandle(workflowId);
  const tty = process.stdout.isTTY;
  let last = '';
  const show = (line: string) => {
    if (line === last) return;
    last = line;
    if (tty) process.stdout.write(`\r\x1b[2K${terminalSafe(line).slice(0, (process.stdout.columns ?? 120) - 1)}`);
    else console.log(line);
  };
  const resultP = handle.result() as Promise<PipelineResult>;
  let closed = false;
  resultP.then(
    () => (closed = true),
    () => (closed = true),
  );
  const waitingSince = Date.now();
  try {
    while (!closed) {
      const p = await queryProgress(client, workflowId);
      if (p) show(progressLine(p));
      else if (!closed && Date.now() - waitingSince > 5000)
        show('waiting for a worker on task queue trace-cpu (start one with `trace worker` or `trace stack up`)');
      await Promise.race([resultP.catch(() => undefined), sleep(1000)]);
    }
    return await resultP;
  } finally {
    if (tty) process.stdout.write('\n');
    await client.connection.close();
  }
}

export function printResult(r: PipelineResult): void {
  console.log(`\n${r.status}: ${r.summary}`);
  console.log(
    `rollouts: ${r.rollouts.trajectories} trajectories, pass rate ${formatRate(r.rollouts.passRate)}` +
      (r.rollouts.failedBatches ? `, ${r.rollouts.failedBatches} batch(es) failed` : ''),
  );
  if (r.analysis.summary) console.log(r.analysis.summary);
  for (const c of r.capabilities)
    console.log(`  ${c.name}${c.requestedByConfig ? ' (requested by config)' : ''}: ${c.status} — ${c.detail}`);
  const evaluation = r.evaluation as
    { split?: string; variants?: { name: string; passRate: number | null; n: number }[] } | undefined;
  for (const v of evaluation?.variants ?? [])
    console.log(
      `evaluation (${evaluation?.split}): ${v.name} pass rate ${formatRate(v.passRate)} over ${v.n} episode(s)`,
    );
  console.log(`report: ${r.report.uri}`);
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
