import { Command, Option } from 'commander';
import type { PipelineInput } from '../../workflows/types.js';
import { CliError, connectClient } from './common.js';

/**
 * `trace schedule …`: periodic pipeline runs through Temporal Schedules. Each scheduled run's
 * workflow id is `<schedule id>-<timestamp>` (set by Temporal) and doubles as its run id.
 */
const OVERLAP = ['SKIP', 'BUFFER_ONE', 'BUFFER_ALL', 'CANCEL_OTHER', 'TERMINATE_OTHER', 'ALLOW_ALL'] as const;
type Overlap = (typeof OVERLAP)[number];

async function withClient<T>(fn: (c: Awaited<ReturnType<typeof connectClient>>['client']) => Promise<T>): Promise<T> {
  const { client } = await connectClient();
  try {
    return await fn(client);
  } catch (err) {
    if ((err as Error).name === 'ScheduleNotFoundError') throw new CliError((err as Error).message);
    throw err;
  } finally {
    await client.connection.close();
  }
}

export function registerScheduleCommands(program: Command): void {
  const schedule = program
    .command('schedule')
    .description('periodic pipeline runs (Temporal Schedules; overlap policy SKIP by default)');

  schedule
    .command('create')
    .description('create a schedule that runs the pipeline on a config')
    .argument('<config>', 'config file (YAML or JSON)')
    .requiredOption('--id <scheduleId>', 'schedule id')
    .option('--every <interval>', "interval, e.g. '1d', '6h', '30m'")
    .option('--cron <expr>', "cron expression, e.g. '0 3 * * *'")
    .addOption(
      new Option('--overlap <policy>', 'what to do when the previous run is still going')
        .choices([...OVERLAP])
        .default('SKIP'),
    )
    .option('--paused', 'create paused')
    .action(
      async (file: string, opts: { id: string; every?: string; cron?: string; overlap: Overlap; paused?: boolean }) => {
        if (!opts.every === !opts.cron)
          throw new CliError('schedule create: give exactly one of --every <interval> or --cron <expr>');
        const { validateRunConfig } = await import('./config-file.js');
        const config = validateRunConfig(file);
        const { TASK_QUEUE_CPU } = await import('../../workflows/types.js');
        await withClient(async (client) => {
          const input: PipelineInput = { config };
          await client.schedule.create({
            scheduleId: opts.id,
            spec: opts.every
              ? { intervals: [{ every: opts.every as `${number}${'d' | 'h' | 'm' | 's'}` }] }
              : { cronExpressions: [opts.cron!] },
            action: {
              type: 'startWorkflow',
              workflowType: 'tracePipeline',
              taskQueue: TASK_QUEUE_CPU,
              args: [input],
              workflowId: opts.id,
            },
            policies: { overlap: opts.overlap },
            state: { paused: !!opts.paused },
            memo: { configName: config.name, env: config.env.name },
          });
          console.log(
            `schedule ${opts.id} created (${opts.every ? `every ${opts.every}` : `cron ${opts.cron}`}, overlap ${opts.overlap}${opts.paused ? ', paused' : ''})`,
          );
        });
      },
    );

  schedule
    .command('list')
    .description('list schedules')
    .action(async () =>
      withClient(async (client) => {
        let n = 0;
        for await (const s of client.schedule.list()) {
          const next = s.info.nextActionTimes[0]?.toISOString() ?? '-';
          console.log(
            `${s.scheduleId}\t${s.state.paused ? 'paused' : 'active'}\tnext ${next}\t${s.info.recentActions.length} recent run(s)`,
          );
          n++;
        }
        if (n === 0) console.log('(no schedules)');
      }),
    );

  schedule
    .command('describe')
    .description('show a schedule: spec, state, next times, and its last runs with their outcomes')
    .argument('<scheduleId>')
    .action(async (id: string) =>
      withClient(async (client) => {
        const d = await client.schedule.getHandle(id).describe();
        const spec =
          d.spec.intervals?.map((i) => `every ${JSON.stringify(i.every)}`).join(', ') ||
          JSON.stringify(d.spec.calendars ?? d.spec);
        console.log(
          `schedule ${id}: ${d.state.paused ? 'paused' : 'active'}${d.state.note ? ` (${d.state.note})` : ''}`,
        );
        console.log(
          `spec: ${spec}; overlap ${d.policies.overlap}; actions taken ${d.info.numActionsTaken}, skipped for overlap ${d.info.numActionsSkippedOverlap}`,
        );
        console.log(
          `next: ${
            d.info.nextActionTimes
              .slice(0, 3)
              .map((t) => t.toISOString())
              .join(', ') || '-'
          }`,
        );
        for (const a of d.info.recentActions) {
          const wid = a.action.workflow.workflowId;
          const status = await client.workflow
            .getHandle(wid)
            .describe()
            .then(
              (w) => w.status.name,
              () => 'UNKNOWN',
            );
          console.log(`  ${a.takenAt.toISOString()}  ${wid}  ${status}`);
        }
      }),
    );

  schedule
    .command('trigger')
    .description('start a run of the schedule now (subject to its overlap policy)')
    .argument('<scheduleId>')
    .action(async (id: string) =>
      withClient(async (client) => {
        await client.schedule.getHandle(id).trigger();
        console.log(`schedule ${id} triggered`);
      }),
    );

  schedule
    .command('pause')
    .description('pause a schedule (or --resume it)')
    .argument('<scheduleId>')
    .option('--resume', 'unpause instead')
    .option('--note <text>', 'why')
    .action(async (id: string, opts: { resume?: boolean; note?: string }) =>
      withClient(async (client) => {
        const h = client.schedule.getHandle(id);
        if (opts.resume) await h.unpause(opts.note);
        else await h.pause(opts.note);
        console.log(`schedule ${id} ${opts.resume ? 'resumed' : 'paused'}`);
      }),
    );

  schedule
    .command('delete')
    .description('delete a schedule (runs it started are kept)')
    .argument('<scheduleId>')
    .action(async (id: string) =>
      withClient(async (client) => {
        await client.schedule.getHandle(id).delete();
        console.log(`schedule ${id} deleted`);
      }),
    );
}
