import { createHash } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { transform } from 'esbuild';
import type { Environment } from '../../envs/environment.js';
import { isWeak, startSandboxedEnv, type SandboxedEnvironment, type SandboxLimits } from '../../envs/sandbox/index.js';

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
export async function staticProblem(source: string): Promise<string | undefined> {
  try {
    await transform(source, { loader: 'ts', format: 'esm', sourcefile: 'env.ts' });
  } catch (e) {
    const errs = (e as { errors?: { text: string; location?: { line: number; column: number } }[] }).errors ?? [];
    return `syntax error: ${
      errs
        .slice(0, 3)
        .map((x) => `${x.location ? `line ${x.location.line}:${x.location.column}: ` : ''}${x.text}`)
        .join('; ') || (e as Error).message
    }`;
  }
  const specifiers = [
    ...source.matchAll(/\b(?:import|export)\s[^'"`;]*?from\s*['"]([^'"]+)['"]|\bimport\s*['"]([^'"]+)['"]/g),
  ].map((m) => m[1] ?? m[2]);
  const bad = specifiers.filter((s) => s !== '#env-sdk');
  if (bad.length)
    return `imports ${bad.map((s) => `'${s}'`).join(', ')}; a generated environment may import only from '#env-sdk'`;
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

type Check = { resolve: (errors: string[]) => void; reject: (err: Error) => void };
let checker: { worker: Worker; pending: Map<number, Check>; nextId: number } | undefined;

/** The type-check thread (typecheck-worker.ts), started on first use and kept for its caches. */
function typeChecker() {
  if (checker) return checker;
  const ext = path.extname(fileURLToPath(import.meta.url)); // .ts under tsx, .js when compiled
  const url = new URL(`./typecheck-worker${ext}`, import.meta.url);
  // Node 20 does not carry tsx's loader hooks into worker threads: register them there first.
  const worker =
    ext === '.ts'
      ? new Worker(
          `import(${JSON.stringify(import.meta.resolve('tsx/esm/api'))}).then((t) => { t.register(); return import(${JSON.stringify(url.href)}); });`,
          { eval: true },
        )
      : new Worker(url);
  const c = { worker, pending: new Map<number, Check>(), nextId: 1 };
  worker.on('message', ({ id, errors, failure }: { id: number; errors?: string[]; failure?: string }) => {
    const p = c.pending.get(id);
    c.pending.delete(id);
    if (!c.pending.size) worker.unref(); // an idle checker does not keep the process alive
    if (failure !== undefined) p?.reject(new Error(`type-check: ${failure}`));
    else p?.resolve(errors!);
  });
  const died = (err: Error) => {
    if (checker === c) checker = undefined;
    for (const p of c.pending.values()) p.reject(new Error(`type-check thread stopped: ${err.message}`));
  };
  worker.on('error', died);
  worker.on('exit', (code) => died(new Error(`exit code ${code}`)));
  checker = c;
  return c;
}

/** tsc diagnostics of the module checked against the SDK (strict), at most `max` of them, computed off the event loop. */
export async function typeErrors(source: string, max = 5): Promise<string[]> {
  const file = await writeCandidate(source);
  const c = typeChecker();
  const id = c.nextId++;
  return new Promise<string[]>((resolve, reject) => {
    c.pending.set(id, { resolve, reject });
    c.worker.ref();
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
  signal?: AbortSignal,
): Promise<SandboxedEnvironment> {
  const { allowWeakIsolation, ...limits } = sandbox;
  return startSandboxedEnv({ ...module, limits, allowWeakIsolation, configPath: 'synthesis.sandbox', signal });
}

/** `signal` (validation's cancellation) kills the sandbox and fails its requests at once. */
export async function loadCandidate(
  source: string,
  runner: Runner,
  sandbox: SandboxSettings = {},
  signal?: AbortSignal,
): Promise<LoadedEnv> {
  if (runner === 'sandbox') {
    const env = await startGeneratedEnv({ source }, sandbox, signal);
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
