/**
 * Serves an environment over the env HTTP protocol from the command line, for processes in other
 * languages (the Python trainer):
 *
 *   node --import tsx envs/protocol/serve-main.ts --env toy-orders [--config run.yaml] [--port 0]
 *   node --import tsx envs/protocol/serve-main.ts --module synthesized-env.ts [--port 0]
 *
 * `--module` always runs the module inside the sandbox. When listening, prints one JSON line
 * `{"url": ..., "env": ..., "isolation"?: ...}` on stdout; stops on SIGTERM/SIGINT, and on stdin EOF
 * with --exit-with-stdin (so it cannot outlive a parent that dies).
 */
import { Command } from 'commander';
import { parseConfig } from '../../core/config.js';
import type { Environment } from '../environment.js';
import { serveEnvironment } from './server.js';

const program = new Command('serve-env')
  .option('--env <name>', 'environment name as in config env.name (toy-*, tau2-*, http:<url>)')
  .option('--config <file>', 'run config (YAML/JSON) whose env section and LLM roles the env uses')
  .option('--module <path>', 'an env module (TypeScript, default-exports an Environment), run sandboxed')
  .option('--port <n>', 'port (0 = ephemeral)', '0')
  .option('--host <host>', 'interface to listen on', '127.0.0.1')
  .option('--idle-timeout-ms <ms>', 'close episodes idle this long', String(10 * 60_000))
  .option('--exit-with-stdin', 'stop when stdin closes')
  .parse();

const o = program.opts<{
  env?: string;
  config?: string;
  module?: string;
  port: string;
  host: string;
  idleTimeoutMs: string;
  exitWithStdin?: boolean;
}>();
if (!o.env === !o.module && !o.config) program.error('give exactly one of --env/--config or --module');

let env: Environment;
let stopEnv = async () => {};
let isolation: string | undefined;
if (o.module) {
  const { startSandboxedEnv } = await import('../sandbox/index.js');
  const boxed = await startSandboxedEnv({ modulePath: o.module });
  env = boxed;
  stopEnv = () => boxed.close();
  isolation = boxed.isolation.level;
} else {
  const { openEnvironment } = await import('../registry.js');
  let config;
  if (o.config) {
    const { loadConfigFile } = await import('../../cli/commands/config-file.js');
    config = loadConfigFile(o.config);
    if (o.env) config = { ...config, env: { ...config.env, name: o.env } };
  } else {
    config = parseConfig({ env: { name: o.env } }, '--env');
  }
  // This entry point composes the env with the LLM client (τ²'s user simulator and judge); envs/ itself imports none.
  const { envLlm } = await import('../../llm/client.js');
  env = await openEnvironment(config.env, { config, llm: envLlm(config) });
}

const served = await serveEnvironment(env, {
  port: Number(o.port),
  host: o.host,
  idleTimeoutMs: Number(o.idleTimeoutMs),
});
process.stdout.write(
  JSON.stringify({ url: served.url, env: env.info.name, ...(isolation ? { isolation } : {}) }) + '\n',
);

let stopping = false;
async function stop() {
  if (stopping) return;
  stopping = true;
  await served.close();
  await stopEnv();
  process.exit(0);
}
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
if (o.exitWithStdin) {
  process.stdin.on('end', stop);
  process.stdin.resume();
}
