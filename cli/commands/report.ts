import { execFile } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Command } from 'commander';
import type { Config } from '../../core/config.js';
import { PROJECT_ROOT } from '../../infra/temporal.js';
import { CliError, connectClient } from './common.js';

/**
 * `trace report <run>`: rebuilds the run's report from its stored artifacts (so a report can be
 * regenerated after the fact), writes the HTML and JSON to the artifact store and a local copy,
 * and prints the terminal summary. The run's config comes from its workflow start input.
 */
export function registerReportCommand(program: Command): void {
  program
    .command('report')
    .description('build the run report (self-contained HTML + JSON) and print its summary')
    .argument('<run>', 'run id (the pipeline workflow id)')
    .option('--out <file>', 'local copy of the HTML report', '')
    .option('--json', 'print the report JSON instead of the summary')
    .option('--open', 'open the HTML report in a browser (xdg-open)')
    .action(async (run: string, opts: { out: string; json?: boolean; open?: boolean }) => {
      const { config, result } = await fetchRun(run);
      const { createReportActivities } = await import('../../activities/report.js');
      const { openStore } = await import('../../store/index.js');
      const store = openStore(config.store);
      const out = await createReportActivities({ openStore: () => store, now: () => new Date() }).buildReport({
        config,
        runId: (result.runId as string | undefined) ?? run,
        result: { ...result, runId: (result.runId as string | undefined) ?? run },
        pipelineWorkflowId: run,
      });
      const file = path.resolve(opts.out || path.join(PROJECT_ROOT, '.trace', 'reports', `${run}.html`));
      await mkdir(path.dirname(file), { recursive: true });
      await writeFile(file, await store.get(out.htmlRef));
      if (opts.json) {
        console.log(await store.getText(out.jsonRef));
      } else {
        console.log(out.summary);
        console.log(`\nHTML report: ${file}\nstored: ${out.htmlRef.uri}\n        ${out.jsonRef.uri}`);
      }
      if (opts.open) execFile('xdg-open', [file], () => undefined);
    });
}

/** The finished run's result and the config it was started with (first history event). */
async function fetchRun(run: string): Promise<{ config: Config; result: Record<string, unknown> }> {
  const { client } = await connectClient();
  try {
    const handle = client.workflow.getHandle(run);
    let status: string;
    try {
      status = (await handle.describe()).status.name;
    } catch (err) {
      if ((err as Error).name === 'WorkflowNotFoundError')
        throw new CliError(`no run '${run}' in this namespace (see \`trace list\`)`);
      throw err;
    }
    if (status !== 'COMPLETED')
      throw new CliError(`run ${run} is ${status}: no report yet (see \`trace status ${run}\`)`);
    const result = (await handle.result()) as Record<string, unknown>;
    const history = await handle.fetchHistory();
    const payload = history.events?.[0]?.workflowExecutionStartedEventAttributes?.input?.payloads?.[0];
    if (!payload) throw new CliError(`run ${run}: its start input (the config) is not in the history`);
    const { defaultPayloadConverter } = await import('@temporalio/common');
    const input = defaultPayloadConverter.fromPayload<{ config?: unknown }>(
      payload as Parameters<typeof defaultPayloadConverter.fromPayload>[0],
    );
    const { parseConfig } = await import('../../core/config.js');
    return { config: parseConfig(input.config, `run ${run} input`), result };
  } finally {
    await client.connection.close();
  }
}
