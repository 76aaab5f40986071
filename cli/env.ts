import type { Command } from 'commander';
import { createTau2Environment, getDomain, goldReplayLine, replayGoldAll, TAU2_DOMAINS, type TaskSet } from '../envs/tau2/index.js';

/**
 * `trace env list | show <env> | replay <env> --gold`: inspect the target environments and check
 * the tau2 port against tau2-bench (replay prints one JSON line per task, as upstream would).
 */
export interface EnvCommandIo {
  out(text: string): void;
}

const stdoutIo: EnvCommandIo = { out: (t) => process.stdout.write(t) };

/** `tau2-airline` or `airline` → the domain name; other names get a one-line error. */
function tau2Domain(env: string) {
  const bare = env.replace(/^tau2-/, '');
  if (!(TAU2_DOMAINS as string[]).includes(bare)) {
    throw new Error(`env: '${env}' is not a built-in target environment (known: ${TAU2_DOMAINS.map((d) => `tau2-${d}`).join(', ')})`);
  }
  return getDomain(bare).name;
}

function taskSetOption(v: string | undefined): TaskSet {
  if (v === undefined || v === 'current' || v === 'legacy') return v ?? 'current';
  throw new Error(`--task-set: expected 'current' or 'legacy', got '${v}'`);
}

export function registerEnvCommands(program: Command, io: EnvCommandIo = stdoutIo): void {
  const env = program.command('env').description('inspect target environments (tau2-bench airline, retail, mock)');

  env
    .command('list')
    .description('list the built-in target environments')
    .action(async () => {
      for (const d of TAU2_DOMAINS) {
        const e = createTau2Environment(d);
        const tasks = await e.listTasks();
        io.out(`tau2-${d}\t${tasks.length} tasks\t${e.tools().length} tools\t${e.info.description}\n`);
      }
      io.out('other names: toy-*, http:<url> (see envs/registry.ts)\n');
    });

  env
    .command('show <env>')
    .description('tools (READ/WRITE), task splits and system prompt size of an environment')
    .option('--task-set <set>', "'current' or 'legacy' (v0.2.0) tasks", 'current')
    .action(async (name: string, opts: { taskSet?: string }) => {
      const d = tau2Domain(name);
      const e = createTau2Environment(d, { taskSet: taskSetOption(opts.taskSet) });
      const tasks = await e.listTasks();
      const splits = new Map<string, number>();
      for (const t of tasks) splits.set(t.split ?? '-', (splits.get(t.split ?? '-') ?? 0) + 1);
      const kinds = new Map(getDomain(d).agent.tools.map((t) => [t.name, t.type.toUpperCase()]));
      io.out(`${e.info.name}: ${e.info.description}\n`);
      io.out(`tasks: ${tasks.length} (${[...splits].map(([s, n]) => `${s} ${n}`).join(', ')})\n`);
      io.out(`system prompt: ${e.systemPrompt().length} characters\n`);
      io.out('tools:\n');
      for (const t of e.tools()) io.out(`  ${(kinds.get(t.function.name) ?? '?').padEnd(8)}${t.function.name}\n`);
    });

  env
    .command('replay <env>')
    .description("replay each task's gold actions on a fresh DB; print tool outputs and the tau2 DB hash")
    .requiredOption('--gold', 'replay the gold actions of the task file (the only mode)')
    .option('--task <id>', 'only this task')
    .option('--task-set <set>', "'current' or 'legacy' (v0.2.0) tasks", 'current')
    .option('--jsonl', 'one JSON line per task (the only output format)')
    .action((name: string, opts: { task?: string; taskSet?: string }) => {
      for (const r of replayGoldAll(tau2Domain(name), taskSetOption(opts.taskSet), opts.task)) io.out(`${goldReplayLine(r)}\n`);
    });
}
