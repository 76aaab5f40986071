import type { Command } from 'commander';
import type { PipelineResult } from '../../workflows/types.js';
import { CliError, connectClient, formatRate, queryProgress, uiLink } from './common.js';
import { progressReport } from './progress.js';
import { printResult } from './run.js';

/** `trace status|list|cancel|report`: inspect and control runs through the Temporal client. */
export function registerRunCommands(program: Command): void {
  program
    .command('status')
    .description('show a run: workflow status, current stage, counts and per-capability status')
    .argument('<run>', 'run id (the workflow id)')
    .action(async (run: string) => {
      const { client, settings } = await connectClient();
      try {
        const handle = client.workflow.getHandle(run);
        const d = await describe(handle, run);
        console.log(
          `run ${run}: ${d.status.name} (started ${d.startTime.toISOString()}${d.closeTime ? `, closed ${d.closeTime.toISOString()}` : ''})`,
        );
        console.log(`UI: ${uiLink(run, settings)}`);
        if (d.status.name === 'RUNNING') {
          // A query needs a worker; without one it would wait for the server's query timeout.
          const p = await queryProgress(client, run);
          console.log(p ? progressReport(p) : 'no progress yet: no worker has answered (is one polling trace-cpu?)');
        } else if (d.status.name === 'COMPLETED') {
          printResult((await handle.result()) as PipelineResult);
        } else if (d.status.name === 'FAILED') {
          await handle.result().catch((e: Error) => console.log(`failure: ${rootMessage(e)}`));
        }
      } finally {
        await client.connection.close();
      }
    });

  program
    .command('list')
    .description('list pipeline runs (newest first) with stage, environment, pass rate and selected capabilities')
    .option('-n, --limit <n>', 'how many', '20')
    .option('-q, --query <visibility query>', 'extra visibility filter, e.g. "TraceEnv = \'tau2-airline\'"')
    .action(async (opts: { limit: string; query?: string }) => {
      const { client } = await connectClient();
      try {
        const query = `WorkflowType = 'tracePipeline'${opts.query ? ` AND (${opts.query})` : ''}`;
        let n = 0;
        const limit = Number(opts.limit) || 20;
        console.log(['RUN', 'STATUS', 'STAGE', 'ENV', 'PASS RATE', 'CAPABILITIES'].join('\t'));
        for await (const w of client.workflow.list({ query })) {
          const sa = w.searchAttributes as Record<string, unknown[] | undefined>;
          const first = (k: string) => sa[k]?.[0];
          console.log(
            [
              w.workflowId,
              w.status.name,
              first('TraceStage') ?? '-',
              first('TraceEnv') ?? '-',
              formatRate(first('TracePassRate') as number | undefined),
              (sa.TraceCapabilities ?? []).join(',') || '-',
            ].join('\t'),
          );
          if (++n >= limit) break;
        }
        if (n === 0) console.log('(no runs)');
      } finally {
        await client.connection.close();
      }
    });

  program
    .command('cancel')
    .description('cancel a run (running activities are cancelled through their heartbeats; children are cancelled too)')
    .argument('<run>', 'run id')
    .action(async (run: string) => {
      const { client } = await connectClient();
      try {
        const handle = client.workflow.getHandle(run);
        await describe(handle, run);
        await handle.cancel();
        console.log(`cancellation requested for ${run}`);
      } finally {
        await client.connection.close();
      }
    });

  program
    .command('report')
    .description("print a finished run's report summary and where its report artifact is")
    .argument('<run>', 'run id')
    .option('--json', 'print the full report JSON')
    .action(async (run: string, opts: { json?: boolean }) => {
      const { client } = await connectClient();
      let result: PipelineResult;
      try {
        const handle = client.workflow.getHandle(run);
        const d = await describe(handle, run);
        if (d.status.name !== 'COMPLETED')
          throw new CliError(`run ${run} is ${d.status.name}: no report yet (see \`trace status ${run}\`)`);
        result = (await handle.result()) as PipelineResult;
      } finally {
        await client.connection.close();
      }
      const { openStore } = await import('../../store/index.js');
      const store = openStore(result.store);
      const text = await store.getText(result.report);
      if (opts.json) {
        console.log(text);
        return;
      }
      // The full report has its own terminal summary; a report that does not parse as one (an older run's) prints the result.
      const { ReportSchema, formatSummary } = await import('../../core/report.js');
      const full = ReportSchema.safeParse(JSON.parse(text));
      if (full.success) {
        console.log(formatSummary(full.data));
        console.log(`report: ${result.report.uri} (HTML: ${result.report.uri.replace(/\.json$/, '.html')})`);
        return;
      }
      printResult(result);
    });
}

async function describe(handle: { describe(): Promise<any> }, run: string) {
  try {
    return await handle.describe();
  } catch (err) {
    if ((err as Error).name === 'WorkflowNotFoundError')
      throw new CliError(`no run '${run}' in this namespace (see \`trace list\`)`);
    throw err;
  }
}

function rootMessage(e: Error): string {
  let x: any = e;
  while (x?.cause) x = x.cause;
  return String(x?.message ?? e.message);
}
