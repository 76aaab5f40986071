import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import path from 'node:path';
import {
  EMBEDDED_DB,
  EMBEDDED_PORT,
  EMBEDDED_UI_PORT,
  PROJECT_ROOT,
  startTemporalDevServer,
  temporalSettings,
  waitForTemporal,
} from './temporal.js';

/**
 * The embedded stack as background daemons that outlive the command that started them
 * (`trace stack up`, `npm run demo`): Temporal dev server (+ Web UI), the local LLM server (when
 * infra/llm-server.ts is in this checkout), the local artifact dir, and the embedded worker.
 * Each daemon has a pid file under .trace/stack/ and a log under .trace/logs/; starting is
 * idempotent (a healthy daemon is reused), stopping signals the process group.
 */
const STACK_DIR = path.join(PROJECT_ROOT, '.trace', 'stack');
const LOG_DIR = path.join(PROJECT_ROOT, '.trace', 'logs');
export const ARTIFACT_DIR = path.join(PROJECT_ROOT, '.trace', 'artifacts');
const LLM_MODULE = path.join(PROJECT_ROOT, 'infra', 'llm-server.ts');
export const LLM_PORT = Number(process.env.TRACE_LLM_PORT ?? 8765);
type Daemon = 'temporal' | 'llm' | 'worker';

interface PidFile {
  pid: number;
  /** For the worker: the code it loaded, so a changed checkout restarts it. */
  fingerprint?: string;
}

export interface StackInfo {
  temporal: { address: string; uiUrl: string; reused: boolean } | { address: string; external: true };
  llm: { baseURL: string; reused: boolean } | { skipped: string };
  worker: { pid: number; reused: boolean } | { skipped: string };
  artifacts: string;
  logs: string;
}

const pidPath = (d: Daemon) => path.join(STACK_DIR, `${d}.pid`);
const logPath = (d: Daemon) => path.join(LOG_DIR, `${d}.log`);

function readPid(d: Daemon): PidFile | undefined {
  try {
    const p = JSON.parse(readFileSync(pidPath(d), 'utf8')) as PidFile;
    process.kill(p.pid, 0);
    return p;
  } catch {
    return undefined;
  }
}

function writePid(d: Daemon, p: PidFile): void {
  mkdirSync(STACK_DIR, { recursive: true });
  writeFileSync(pidPath(d), JSON.stringify(p));
}

function spawnDaemon(d: Daemon, args: string[], env: NodeJS.ProcessEnv = process.env): number {
  mkdirSync(LOG_DIR, { recursive: true });
  const fd = openSync(logPath(d), 'w');
  const child = spawn(process.execPath, args, { cwd: PROJECT_ROOT, detached: true, stdio: ['ignore', fd, fd], env });
  closeSync(fd);
  child.unref();
  if (!child.pid) throw new Error(`could not start ${d}`);
  return child.pid;
}

async function llmHealthy(baseURL: string): Promise<boolean> {
  try {
    const r = await fetch(`${baseURL}/models`, { signal: AbortSignal.timeout(2000) });
    return r.ok;
  } catch {
    return false;
  }
}

async function waitFor(
  what: string,
  check: () => Promise<boolean> | boolean,
  timeoutMs: number,
  logFile: string,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 300));
  }
  const tail = existsSync(logFile) ? readFileSync(logFile, 'utf8').trim().split('\n').slice(-3).join(' | ') : '';
  throw new Error(
    `${what} not ready after ${timeoutMs / 1000} s (log ${path.relative(PROJECT_ROOT, logFile)}: ${tail})`,
  );
}

/** Sizes and mtimes of the code a worker loads: changes when any of it is edited or pulled. */
export function codeFingerprint(): string {
  const h = createHash('sha256');
  const walk = (dir: string) => {
    if (!existsSync(dir)) return;
    for (const e of readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (/\.(ts|json)$/.test(e.name)) {
        const s = statSync(p);
        h.update(`${p}:${s.size}:${s.mtimeMs}\n`);
      }
    }
  };
  for (const d of ['core', 'workflows', 'activities', 'workers', 'envs', 'store', 'infra'])
    walk(path.join(PROJECT_ROOT, d));
  return h.digest('hex').slice(0, 16);
}

export interface StackOptions {
  /** Start the embedded worker daemon too (default true). */
  worker?: boolean;
  log?: (line: string) => void;
}

export async function startEmbeddedStack(opts: StackOptions = {}): Promise<StackInfo> {
  const log = opts.log ?? (() => {});
  mkdirSync(ARTIFACT_DIR, { recursive: true });
  const settings = temporalSettings();

  let temporal: StackInfo['temporal'];
  if (!settings.embedded) {
    await waitForTemporal(settings, 15_000);
    temporal = { address: settings.address, external: true };
    log(`temporal: using ${settings.address} (TEMPORAL_ADDRESS)`);
  } else {
    const server = await startTemporalDevServer({
      dbFile: EMBEDDED_DB,
      port: EMBEDDED_PORT,
      uiPort: EMBEDDED_UI_PORT,
      detached: true,
      logFile: logPath('temporal'),
    });
    if (!server.reused && server.pid) writePid('temporal', { pid: server.pid });
    temporal = { address: server.address, uiUrl: server.uiUrl!, reused: server.reused };
    log(`temporal: ${server.reused ? 'running' : 'started'} at ${server.address}, UI ${server.uiUrl}`);
  }

  let llm: StackInfo['llm'];
  const baseURL = `http://127.0.0.1:${LLM_PORT}/v1`;
  if (process.env.TRACE_LLM_BASE_URL) {
    llm = { skipped: `TRACE_LLM_BASE_URL=${process.env.TRACE_LLM_BASE_URL}` };
  } else if (!existsSync(LLM_MODULE)) {
    llm = { skipped: 'infra/llm-server.ts not in this checkout' };
  } else if (await llmHealthy(baseURL)) {
    llm = { baseURL, reused: true };
  } else {
    const pid = spawnDaemon('llm', ['--import', 'tsx', LLM_MODULE, '--port', String(LLM_PORT)]);
    writePid('llm', { pid });
    await waitFor('local LLM server', () => llmHealthy(baseURL), 180_000, logPath('llm'));
    llm = { baseURL, reused: false };
  }
  log(
    `llm: ${'skipped' in llm ? `not started (${llm.skipped})` : `${llm.reused ? 'running' : 'started'} at ${llm.baseURL}`}`,
  );

  let worker: StackInfo['worker'] = { skipped: 'not requested' };
  if (opts.worker !== false) {
    const fingerprint = codeFingerprint();
    const running = readPid('worker');
    if (running && running.fingerprint === fingerprint) {
      worker = { pid: running.pid, reused: true };
    } else {
      if (running) {
        log('worker: code changed since it started; restarting');
        await stopDaemon('worker');
      }
      const pid = spawnDaemon('worker', [path.join(PROJECT_ROOT, 'cli', 'trace.mjs'), 'worker', '--queues', 'cpu,gpu']);
      writePid('worker', { pid, fingerprint });
      await waitFor(
        'embedded worker',
        () => /\[worker\] trace-cpu on/.test(readIfExists(logPath('worker'))) || !alive(pid),
        180_000,
        logPath('worker'),
      );
      if (!alive(pid))
        throw new Error(`embedded worker exited at start (log ${path.relative(PROJECT_ROOT, logPath('worker'))})`);
      worker = { pid, reused: false };
    }
    log(
      `worker: ${worker.reused ? 'running' : 'started'} (pid ${worker.pid}), log ${path.relative(PROJECT_ROOT, logPath('worker'))}`,
    );
  }
  return { temporal, llm, worker, artifacts: ARTIFACT_DIR, logs: LOG_DIR };
}

function readIfExists(file: string): string {
  return existsSync(file) ? readFileSync(file, 'utf8') : '';
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function stopDaemon(d: Daemon): Promise<boolean> {
  const p = readPid(d);
  rmSync(pidPath(d), { force: true });
  if (!p) return false;
  const signal = (s: NodeJS.Signals) => {
    try {
      process.kill(-p.pid, s);
    } catch {
      try {
        process.kill(p.pid, s);
      } catch {
        /* already gone */
      }
    }
  };
  signal('SIGTERM');
  const deadline = Date.now() + 40_000;
  while (alive(p.pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
  if (alive(p.pid)) signal('SIGKILL');
  return true;
}

/** Stops the daemons this project started (worker first, so it can finish its activity tasks). */
export async function stopEmbeddedStack(log: (line: string) => void = () => {}): Promise<void> {
  for (const d of ['worker', 'llm', 'temporal'] as const) {
    log(`${d}: ${(await stopDaemon(d)) ? 'stopped' : 'not running (or not started by this project)'}`);
  }
}

export function stackDaemons(): Record<Daemon, number | undefined> {
  return { temporal: readPid('temporal')?.pid, llm: readPid('llm')?.pid, worker: readPid('worker')?.pid };
}
