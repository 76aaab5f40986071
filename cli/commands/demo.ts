import path from 'node:path';
import type { Command } from 'commander';
import { PROJECT_ROOT } from '../../infra/temporal.js';
import { uiLink } from './common.js';
import { followRun, printResult, startRun } from './run.js';

/** `trace demo`: the embedded stack up (idempotent), then the demo config run to completion. */
export const DEMO_CONFIG = path.join(PROJECT_ROOT, 'configs', 'demo.yaml');

export function registerDemoCommand(program: Command): void {
  program
    .command('demo')
    .description(
      'bring up the embedded stack and run configs/demo.yaml to completion (npm run demo also does set-up first)',
    )
    .option('--config <file>', 'config to run', DEMO_CONFIG)
    .action(async (opts: { config: string }) => {
      const { validateRunConfig } = await import('./config-file.js');
      const config = validateRunConfig(opts.config);
      const { startEmbeddedStack } = await import('../../infra/stack.js');
      const stack = await startEmbeddedStack({ log: (l) => console.log(`[stack] ${l}`) });
      const { workflowId } = await startRun(config);
      const result = await followRun(workflowId);
      printResult(result);
      console.log(
        `\nreport: ${result.report.uri}${result.report.uri.endsWith('report.json') ? ` (HTML next to it: ${result.report.uri.replace(/\.json$/, '.html')})` : ''}`,
      );
      console.log(
        `Temporal UI: ${uiLink(workflowId)}${'uiUrl' in stack.temporal ? ` (all runs: ${stack.temporal.uiUrl})` : ''}`,
      );
      console.log('the stack keeps running for the UI; stop it with `npm run trace -- stack down`');
    });
}
