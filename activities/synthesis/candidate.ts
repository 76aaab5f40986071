import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { Environment } from '../../envs/environment.js';
import {
  BundleError,
  checkSyntax,
  isWeak,
  oneLine,
  startSandboxedEnv,
  type SandboxedEnvironment,
  type SandboxLimits,
  type SandboxOptions,
} from '../../envs/sandbox/index.js';

/**
 * Turning generated source into a running Environment: static checks (syntax, allowed imports,
 * optional type-check against the SDK), then a start in the sandbox — or in-process, which is
 * only for trusted modules (reference envs, development).
 */
const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export type Runner = 'sandbox' | 'in-process';

export interface LoadedEnv {
  env: Environment;
  close(): Promise<void>;
  /** Set when generated code runs without network and file-system isolation (allowed by config). */
  warning?: string;
  /** Sends the next episode to a fresh sandbox process (validation calls it between checks). */
  freshProcess?(): void;
}

/** The validation sandbox's settings: config `synthesis.sandbox`. */
export type SandboxSettings = SandboxLimits & { allowWeakIsolation?: boolean };

/** The first problem with the module's text, or undefined: syntax, then imports other than #env-sdk. */
export async function staticProblem(source: string, signal?: AbortSignal): Promise<string | undefined> {
  try {
    const syntax = await checkSyntax(source, signal);
    if (syntax) return syntax;
  } catch (e) {
    if (e instanceof BundleError) return e.message;
    throw e;
  }
  const specifiers = [
    // At most 1 000 characters from a keyword to its `from`, so that a text of bare "import"s costs
    // the worker linear time (rerun 60b: 4 s of its event loop at 224 KB); the bundler, not this
    // check, confines imports.
    ...source.matchAll(/\b(?:import|export)\s[^'"`;]{0,1000}?from\s*['"]([^'"]+)['"]|\bimport\s*['"]([^'"]+)['"]/g),
  ].map((m) => m[1] ?? m[2]);
  const bad = specifiers.filter((s) => s !== '#env-sdk');
  if (bad.length)
    // The module's own specifiers, quoted: one line, cut (rerun 59b: a 50 KB reason with ESC and NUL).
    return `imports ${oneLine(bad.map((s) => `'${s}'`).join(', '))}; a generated environment may import only from '#env-sdk'`;
  if (/\b(require|import)\s*\(/.test(source))
    return `uses require() or dynamic import(); a generated environment may import only from '#env-sdk'`;
  if (!/export\s+default\s/.test(source))
    return 'has no default export; end the module with `export default defineEnvironment({...})`';
  return undefined;
}

/** Writes the module where `#env-sdk` resolves through package.json imports (gitignored .trace/). */
async function writeCandidate(source: string): Promise<string> {
  const dir = path.join(
    repoRoot,
    '.trace',
    'tmp',
    'synthesis',
    createHash('sha256').update(source).digest('hex').slice(0, 16),
  );
  await mkdir(dir, { recursive: true });
  const file = path.join(dir, 'env.ts');
  await writeFile(file, source);
  return file;
}

/**
 * Limits of the type-check thread. tsc runs outside the sandbox on the module's text, and its type
 * system is a language of its own: a module's types can spin the checker or blow up its memory.
 */
export interface TypeCheckLimits {
  /** CPU seconds one check may use (the first check parses the lib and node typings: ~5 s). */
  cpuSeconds: number;
  /** Old-generation heap of the thread, MiB (the cached typings take ~300 MiB). */
  memoryMb: number;
}
export const TYPECHECK_LIMITS: TypeCheckLimits = { cpuSeconds: 60, memoryMb: 1536 };
/** How often the thread's CPU time is read while a check runs. */
const CPU_POLL_MS = 250;

/** A check that could not finish: the module's types broke a limit or crashed the checker. */
export class TypeCheckError extends Error {
  override name = 'TypeCheckError';
}

type Check = { resolve: (errors: string[]) => void; reject: (err: Error) => void; cpuAtStart?: number };
type Checker = {
  worker: Worker;
  limits: TypeCheckLimits;
  pending: Map<number, Check>;
  nextId: number;
  /** The thread's task in /proc, once it has said its thread id (Linux). */
  statFile?: string;
  poll?: NodeJS.Timeout;
  stopped?: TypeCheckError;
};
let checker: Checker | undefined;

/** CPU seconds a thread has used so far, from /proc/self/task/<tid>/stat (utime + stime in clock ticks). */
function threadCpuSeconds(statFile: string): number | undefined {
  try {
    const stat = readFileSync(statFile, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(') ') + 2).split(' '); // after the thread's name, which may hold ') '
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
  } catch {
    return undefined;
  }
}
/** USER_HZ: 100 on every Linux build Node supports. */
const CLOCK_TICKS = 100;

/** The type-check thread (typecheck-worker.ts), started on first use and kept for its caches. */
function typeChecker(limits: TypeCheckLimits): Checker {
  if (checker && checker.limits.cpuSeconds === limits.cpuSeconds && checker.limits.memoryMb === limits.memoryMb)
    return checker;
  if (checker) void stopChecker(checker, new TypeCheckError('type-check thread restarted with other limits'));
  const ext = path.extname(fileURLToPath(import.meta.url)); // .ts under tsx, .js when compiled
  const url = new URL(`./typecheck-worker${ext}`, import.meta.url);
  const resourceLimits = { maxOldGenerationSizeMb: limits.memoryMb };
  // Node 20 does not carry tsx's loader hooks into worker threads: register them there first.
  const worker =
    ext === '.ts'
      ? new Worker(
          `import(${JSON.stringify(import.meta.resolve('tsx/esm/api'))}).then((t) => { t.register(); return import(${JSON.stringify(url.href)}); });`,
          { eval: true, resourceLimits },
        )
      : new Worker(url, { resourceLimits });
  const c: Checker = { worker, limits, pending: new Map(), nextId: 1 };
  worker.on('message', (m: { tid: number } | { id: number; errors?: string[]; failure?: string }) => {
    if ('tid' in m) {
      c.statFile = `/proc/self/task/${m.tid}/stat`;
      for (const p of c.pending.values()) p.cpuAtStart ??= threadCpuSeconds(c.statFile);
      return;
    }
    const p = c.pending.get(m.id);
    c.pending.delete(m.id);
    if (!c.pending.size) idle(c);
    if (m.failure !== undefined) p?.reject(new TypeCheckError(`crashed the type-checker: ${m.failure}`));
    else p?.resolve(m.errors!);
    const next = c.pending.values().next().value;
    if (next && c.statFile) next.cpuAtStart = threadCpuSeconds(c.statFile);
  });
  const died = (err: Error) => {
    if (checker === c) checker = undefined;
    clearInterval(c.poll);
    const why =
      c.stopped ??
      ((err as { code?: string }).code === 'ERR_WORKER_OUT_OF_MEMORY'
        ? new TypeCheckError(`ran the type-checker out of memory (limit ${limits.memoryMb} MiB)`)
        : new TypeCheckError(`stopped the type-check thread: ${err.message}`));
    for (const p of c.pending.values()) p.reject(why);
    c.pending.clear();
  };
  worker.on('error', died);
  worker.on('exit', (code) => died(new Error(`exit code ${code}`)));
  checker = c;
  return c;
}

/** Stops the thread: its pending checks fail with `why`. */
function stopChecker(c: Checker, why: TypeCheckError): Promise<number> {
  c.stopped = why;
  if (checker === c) checker = undefined;
  return c.worker.terminate();
}

/** An idle checker keeps the process alive no longer and stops reading its CPU time. */
function idle(c: Checker): void {
  c.worker.unref();
  clearInterval(c.poll);
  c.poll = undefined;
}

/** While a check runs, its CPU time is read; past the limit the thread is stopped. */
function watchCpu(c: Checker): void {
  if (c.poll) return;
  c.poll = setInterval(() => {
    const check = c.pending.values().next().value;
    if (!check || !c.statFile || check.cpuAtStart === undefined) return;
    const used = (threadCpuSeconds(c.statFile) ?? check.cpuAtStart) - check.cpuAtStart;
    if (used > c.limits.cpuSeconds)
      void stopChecker(
        c,
        new TypeCheckError(`kept the type-checker busy past its CPU limit (${c.limits.cpuSeconds} s)`),
      );
  }, CPU_POLL_MS);
  c.poll.unref();
}

/**
 * tsc diagnostics of the module checked against the SDK (strict), at most `max` of them, computed
 * off the event loop. Throws TypeCheckError when the module's types break a limit or crash tsc.
 */
export async function typeErrors(source: string, max = 5, limits = TYPECHECK_LIMITS): Promise<string[]> {
  const file = await writeCandidate(source);
  const c = typeChecker(limits);
  const id = c.nextId++;
  return new Promise<string[]>((resolve, reject) => {
    const first = c.pending.size === 0;
    c.pending.set(id, {
      resolve,
      reject,
      cpuAtStart: first && c.statFile ? threadCpuSeconds(c.statFile) : undefined,
    });
    c.worker.ref();
    watchCpu(c);
    c.worker.postMessage({ id, file, max });
  });
}

/**
 * A generated (or reference) env module in the sandbox with config `synthesis.sandbox`: validation
 * and training both start theirs here, so training's processes live no longer (episodesPerProcess)
 * and get no more time or CPU than the ones validation judged.
 */
export function startGeneratedEnv(
  module: { source: string } | { modulePath: string },
  sandbox: SandboxSettings = {},
  opts: Pick<SandboxOptions, 'signal' | 'goldAnchor'> = {},
): Promise<SandboxedEnvironment> {
  const { allowWeakIsolation, ...limits } = sandbox;
  return startSandboxedEnv({
    ...module,
    limits,
    allowWeakIsolation,
    seedsOnly: true,
    configPath: 'synthesis.sandbox',
    ...opts,
  });
}

/** `signal` (validation's cancellation) kills the sandbox and fails its requests at once. */
export async function loadCandidate(
  source: string,
  runner: Runner,
  sandbox: SandboxSettings = {},
  signal?: AbortSignal,
): Promise<LoadedEnv> {
  if (runner === 'sandbox') {
    const env = await startGeneratedEnv({ source }, sandbox, { signal });
    const freshProcess = () => env.recycle();
    if (!isWeak(env.isolation)) return { env, close: () => env.close(), freshProcess };
    const warning = `WARNING: generated code ran at sandbox isolation level '${env.isolation.level}' (${env.isolation.networkBlocked ? 'no file-system namespace' : 'NO network and NO file-system namespace'}), allowed by synthesis.sandbox.allowWeakIsolation`;
    console.warn(warning);
    return { env, close: () => env.close(), warning, freshProcess };
  }
  const mod = await import(pathToFileURL(await writeCandidate(source)).href);
  const env = mod.default as Environment | undefined;
  if (!env || typeof env.reset !== 'function' || typeof env.tools !== 'function')
    throw new Error('the default export is not an Environment (use defineEnvironment)');
  return { env, close: async () => {} };
}
