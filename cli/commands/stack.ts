import type { Command } from 'commander';
import { CliError } from './common.js';

/** `trace stack up|down|status` and `trace worker`: the embedded stack and worker processes. */
export function registerStackCommands(program: Command): void {
  const stack = program
    .command('stack')
    .description('the embedded stack: Temporal dev server + Web UI, local LLM server, embedded worker');
  stack
    .command('up')
    .description('start (or reuse) the embedded stack in the background; idempotent')
    .option('--no-worker', 'do not start the embedded worker')
    .action(async (opts: { worker: boolean }) => {
      const { startEmbeddedStack } = await import('../../infra/stack.js');
      await startEmbeddedStack({ worker: opts.worker, log: (l) => console.log(`[stack] ${l}`) });
    });
  stack
    .command('down')
    .description('stop the daemons `stack up` started (history stays in .trace/temporal.db)')
    .action(async () => {
      const { stopEmbeddedStack } = await import('../../infra/stack.js');
      await stopEmbeddedStack((l) => console.log(`[stack] ${l}`));
    });
  stack
    .command('status')
    .description('show which embedded daemons are running')
    .action(async () => {
      const { stackDaemons } = await import('../../infra/stack.js');
      for (const [name, pid] of Object.entries(stackDaemons()))
        console.log(`${name}\t${pid ? `running (pid ${pid})` : 'stopped'}`);
    });

  program
    .command('worker')
    .description('run workers in the foreground until SIGINT/SIGTERM (graceful shutdown)')
    .option(
      '--queues <list>',
      'comma-separated: cpu (trace-cpu: workflows + CPU activities), gpu (trace-gpu: training)',
      'cpu,gpu',
    )
    .action(async (opts: { queues: string }) => {
      const queues = opts.queues
        .split(',')
        .map((q) => q.trim())
        .filter(Boolean);
      const bad = queues.find((q) => q !== 'cpu' && q !== 'gpu');
      if (bad || queues.length === 0)
        throw new CliError(`--queues: expected cpu, gpu or cpu,gpu; got '${opts.queues}'`);
      const { runWorkersMain } = await import('../../workers/run.js');
      await runWorkersMain(queues as ('cpu' | 'gpu')[]);
    });
}
