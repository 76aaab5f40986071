import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import type { Config } from '../core/config.js';
import { torchThreadsEnv } from '../infra/cpu-share.js';
import { PROJECT_ROOT } from '../infra/temporal.js';

/**
 * A policy server for evaluation: `python -m trace_trainer serve` (OpenAI-compatible) for the base
 * model, base + one adapter, or base + the MoE gate, on an ephemeral loopback port, so every
 * variant of a run is evaluated through the same backend.
 */
export interface PolicyServer {
  baseURL: string;
  model: string;
  close(): Promise<void>;
}

const READY_TIMEOUT_MS = Number(process.env.TRACE_SERVE_READY_TIMEOUT_MS ?? 600_000);

export async function startPolicyServer(
  config: Config,
  variant: { name: string; adapterUri?: string; gateUri?: string },
  /** Servers running at once, which share the CPU cores. */
  shares = 1,
): Promise<PolicyServer> {
  const t = config.training;
  const resolve = (p: string) => (existsSync(path.resolve(PROJECT_ROOT, p)) ? path.resolve(PROJECT_ROOT, p) : p);
  const args = [
    '-m',
    'trace_trainer',
    'serve',
    '--model',
    resolve(t.model),
    '--port',
    '0',
    '--name',
    variant.name,
    '--device',
    t.device,
  ];
  if (t.tokenizer) args.push('--tokenizer', resolve(t.tokenizer));
  // Served variants decode as the adapters were trained (training.constrainedDecoding).
  args.push('--constrained-decoding', t.constrainedDecoding === 'auto' ? 'auto' : t.constrainedDecoding ? 'on' : 'off');
  if (variant.adapterUri) args.push('--adapter', variant.adapterUri);
  if (variant.gateUri) args.push('--gate', variant.gateUri);
  const child = spawn(path.resolve(PROJECT_ROOT, t.python), args, {
    cwd: PROJECT_ROOT,
    env: {
      ...process.env,
      ...torchThreadsEnv(shares),
      PYTHONPATH: path.join(PROJECT_ROOT, 'trainer'),
      PYTHONUNBUFFERED: '1',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr = (stderr + d).slice(-4000)));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  const close = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
  };
  try {
    const listening = await new Promise<{ url: string; model: string }>((resolveReady, reject) => {
      let buf = '';
      const timer = setTimeout(
        () => reject(new Error(`trace_trainer serve (${variant.name}): not listening after ${READY_TIMEOUT_MS} ms`)),
        READY_TIMEOUT_MS,
      );
      child.stdout!.on('data', (d) => {
        buf += d;
        for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
          const line = buf.slice(0, i);
          buf = buf.slice(i + 1);
          let ev: { event?: string; url?: string; model?: string; type?: string; message?: string };
          try {
            ev = JSON.parse(line);
          } catch {
            continue;
          }
          if (ev.event === 'listening' && ev.url) {
            clearTimeout(timer);
            resolveReady({ url: ev.url, model: ev.model ?? variant.name });
          } else if (ev.event === 'error') {
            clearTimeout(timer);
            reject(new Error(`trace_trainer serve (${variant.name}): ${ev.type}: ${ev.message}`));
          }
        }
      });
      exited.then((code) => {
        clearTimeout(timer);
        reject(
          new Error(
            `trace_trainer serve (${variant.name}) exited (${code}) before listening: ${stderr.trim().split('\n').slice(-2).join(' | ')}`,
          ),
        );
      });
    });
    return { baseURL: listening.url, model: listening.model, close };
  } catch (e) {
    await close();
    throw e;
  }
}
