import { existsSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Command } from 'commander';
import { PROJECT_ROOT } from '../infra/temporal.js';
import { failureText } from './commands/common.js';
import { registerDemoCommand } from './commands/demo.js';
import { registerImportTau2 } from './commands/import-tau2.js';
import { registerRun } from './commands/run.js';
import { registerRunCommands } from './commands/runs.js';
import { registerScheduleCommands } from './commands/schedule.js';
import { registerStackCommands } from './commands/stack.js';

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

// `trace env …` comes from cli/env.ts when that module is in this checkout.
const envModule = path.join(PROJECT_ROOT, 'cli', 'env.ts');
if (existsSync(envModule)) {
  const { registerEnvCommands } = (await import(pathToFileURL(envModule).href)) as { registerEnvCommands(p: Command): void };
  registerEnvCommands(program);
}

try {
  await program.parseAsync(process.argv);
} catch (err) {
  console.error(failureText(err));
  process.exitCode = 1;
}
