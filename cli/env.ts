import type { Command } from 'commander';
import { terminalSafe } from '../core/terminal-text.js';

/**
 * `trace env list | show <env> | replay <env> --gold`: inspect the target environments and the
 * reference capability environments, and check the tau2 port against tau2-bench (replay prints
 * one JSON line per task, as upstream would).
 */
export interface EnvCommandIo {
  out(text: string): void;
}

// An env's descriptions are its author's text (an `http:` env is anyone's): shown, never sent as control sequences.
const stdoutIo: EnvCommandIo = { out: (t) => process.stdout.write(terminalSafe(t)) };

// The environments' code (tau2 data, reference envs, the registry and its schemas) loads only
// when an env command runs, not at every `trace` start.
const actions = () => import('./env-actions.js');

export function registerEnvCommands(program: Command, io: EnvCommandIo = stdoutIo): void {
  const env = program
    .command('env')
    .description(
      'inspect target environments (tau2-bench, toy-orders, showcase-desk) and reference capability environments',
    );

  env
    .command('list')
    .description('list the built-in target environments and the reference capability environments')
    .action(async () => (await actions()).listEnvironments(io));

  env
    .command('show <env>')
    .description('tools (READ/WRITE), task splits and system prompt size of an environment')
    .option('--task-set <set>', "'current' or 'legacy' (v0.2.0) tasks", 'current')
    .action(async (name: string, opts: { taskSet?: string }) => (await actions()).showEnvironment(name, opts, io));

  env
    .command('replay <env>')
    .description(
      "replay each task's gold actions on a fresh DB; print tool outputs and the tau2 DB hash (other envs: the reward)",
    )
    .requiredOption('--gold', 'replay the gold actions of the task file (the only mode)')
    .option('--task <id>', 'only this task')
    .option('--task-set <set>', "'current' or 'legacy' (v0.2.0) tasks", 'current')
    .option('--jsonl', 'one JSON line per task (the only output format)')
    .option('--seeds <n>', 'reference envs: replay seeds 0…n-1', '10')
    .action(async (name: string, opts: { task?: string; taskSet?: string; seeds: string }) =>
      (await actions()).replayGold(name, opts, io),
    );
}
