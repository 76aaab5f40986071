import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';
import type { ImportedRollouts } from '../../workflows/types.js';
import { CliError } from './common.js';

/**
 * `trace import-tau2 <results.json>`: tau2-bench results → trajectories (cli/import-tau2.ts) →
 * one JSONL artifact in the local artifact store, plus `rollouts.json` that `trace run --rollouts`
 * takes to start stage 1 from them instead of collecting new rollouts.
 */
export function registerImportTau2(program: Command): void {
  program
    .command('import-tau2')
    .description('turn tau2-bench simulation results into a rollout set for stage 1 analysis')
    .argument('<results.json>', 'a tau2 `Results` file (or one simulation with --env)')
    .option('--out <dir>', 'where to write trajectories.jsonl and rollouts.json (default .trace/imports/<name>)')
    .option('--env <name>', 'environment name for the trajectories (default tau2-<domain> from the results)')
    .option('--store <dir>', 'local artifact store dir the run will use', '.trace/artifacts')
    .action(async (file: string, opts: { out?: string; env?: string; store: string }) => {
      let text: string;
      try {
        text = readFileSync(file, 'utf8');
      } catch (err) {
        throw new CliError(`${file}: cannot read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
      }
      const { importTau2Results } = await import('../import-tau2.js');
      const trajectories = importTau2Results(text, { env: opts.env });
      const jsonl = trajectories.map((t) => JSON.stringify(t)).join('\n') + (trajectories.length ? '\n' : '');
      const out = opts.out ?? path.join('.trace', 'imports', path.basename(file).replace(/\.json$/i, ''));
      mkdirSync(out, { recursive: true });
      writeFileSync(path.join(out, 'trajectories.jsonl'), jsonl);
      const { openStore } = await import('../../store/index.js');
      const store = openStore({ kind: 'local', dir: opts.store });
      const ref = await store.putContent('imports/tau2', jsonl, '.jsonl');
      const imported: ImportedRollouts = {
        refs: [ref],
        trajectories: trajectories.length,
        successes: trajectories.filter((t) => t.success).length,
      };
      writeFileSync(path.join(out, 'rollouts.json'), JSON.stringify(imported, null, 2));
      const envs = [...new Set(trajectories.map((t) => t.env))].join(', ');
      console.log(
        `${trajectories.length} trajectories (${imported.successes} successes) from ${envs || 'no environment'} → ${path.join(out, 'trajectories.jsonl')}`,
      );
      console.log(`stored as ${ref.uri}`);
      console.log(`start stage 1 from them: trace run <config> --rollouts ${path.join(out, 'rollouts.json')}`);
    });
}
