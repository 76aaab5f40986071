/**
 * Runs the conformance suite against any server speaking the env protocol, in any language:
 *
 *   node --import tsx envs/protocol/conformance-main.ts http://127.0.0.1:9000 \
 *     [--task ID | --seed N] [--tool-call 'name' --tool-args '{"x":1}'] [--message 'Hello']
 *
 * Prints one line per check; exits 1 if any check fails.
 */
import { Command } from 'commander';
import { HttpEnvironment } from './client.js';
import { formatConformance, runConformance, type ConformanceOptions } from './conformance.js';

const program = new Command('env-conformance')
  .argument('<url>', 'base URL of the env server')
  .option('--task <id>', 'task to reset (default: the first listed task, else seed 0)')
  .option('--seed <n>', 'seed to reset')
  .option('--tool-call <name>', 'a deterministic, ideally state-changing tool for the step and fork checks')
  .option('--tool-args <json>', 'its arguments (JSON text)', '{}')
  .option('--message <text>', 'agent message for the message-step check')
  .parse();

const [url] = program.args;
const o = program.opts<{ task?: string; seed?: string; toolCall?: string; toolArgs: string; message?: string }>();
const opts: ConformanceOptions = {
  reset: o.task !== undefined ? { taskId: o.task } : o.seed !== undefined ? { seed: Number(o.seed) } : undefined,
  toolCall: o.toolCall ? { name: o.toolCall, arguments: o.toolArgs } : undefined,
  message: o.message,
};
const env = await HttpEnvironment.connect(url);
const checks = await runConformance(env, opts);
await env.close();
console.log(formatConformance(checks));
const failed = checks.filter((c) => !c.ok).length;
console.log(failed ? `${failed} of ${checks.length} checks failed` : `all ${checks.length} checks passed`);
process.exit(failed ? 1 : 0);
