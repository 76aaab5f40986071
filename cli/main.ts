import { Command } from 'commander';
import { terminalSafe } from '../core/terminal-text.js';
import { failureText } from './commands/common.js';
import { registerDemoCommand } from './commands/demo.js';
import { registerImportTau2 } from './commands/import-tau2.js';
import { registerRun } from './commands/run.js';
import { registerRunCommands } from './commands/runs.js';
import { registerScheduleCommands } from './commands/schedule.js';
import { registerStackCommands } from './commands/stack.js';
import { registerEnvCommands } from './env.js';

/**
 * The `trace` command. Every command fails through failureText (commands/common.ts): bad input
 * (bad config, unknown env or task, unreachable Temporal, unknown run) prints one line and exits 1;
 * anything else prints its stack.
 */
// `trace list | head` closes stdout early: that is the reader's choice, not an error.
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code === 'EPIPE') process.exit(0);
  throw err;
});

// Everything a command prints passes here: text from a run (a generated module's error, tool
// names, LLM replies) must not drive the terminal with escape sequences.
for (const level of ['log', 'info', 'warn', 'error'] as const) {
  const print = console[level].bind(console);
  console[level] = (...args: unknown[]) => print(...args.map((a) => (typeof a === 'string' ? terminalSafe(a) : a)));
}

const program = new Command('trace')
  .description('TRACE on Temporal: capability-targeted training of LLM agents as durable workflows')
  .showHelpAfterError()
  .configureOutput({ outputError: (s, write) => write(s) });

registerRun(program);
registerRunCommands(program);
registerScheduleCommands(program);
registerImportTau2(program);
registerDemoCommand(program);
registerStackCommands(program);

registerEnvCommands(program);

try {
  await program.parseAsync(process.argv);
} catch (err) {
  console.error(failureText(err));
  process.exitCode = 1;
}
