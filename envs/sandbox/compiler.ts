import { spawn, spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { CompileRequest, CompileResponse } from './bundle.js';

/**
 * esbuild on a module's text, in a process of its own for each compile (`compile-child.ts`). The
 * text decides esbuild's work: nested blocks printed 2n² characters from 2n bytes, a long error
 * list took 823 MB for 16 KB, nested arrows 17 s for 6 KB, a deep chain overflowed its stack; and
 * esbuild's one shared service, once dead, failed every later compile in the worker (rerun 57b).
 * Here each process and its service die with the compile, past a memory, CPU or wall-clock
 * limit, and the worker goes on.
 */
export async function compile(req: CompileRequest, signal?: AbortSignal): Promise<CompileResponse> {
  await turn(signal);
  try {
    return await compileNow(req, signal);
  } finally {
    running--;
    waiting.shift()?.();
  }
}

/** Compiles at once in this worker: each may take its memory limit twice over, in its process and esbuild's (rerun 62b: three took 2.46 GiB). */
const MAX_COMPILES = 2;
let running = 0;
const waiting: (() => void)[] = [];

/** Waits for a compile's turn; a cancelled caller stops waiting. */
async function turn(signal?: AbortSignal): Promise<void> {
  while (running >= MAX_COMPILES) {
    signal?.throwIfAborted();
    await new Promise<void>((resolve) => {
      const wake = () => {
        signal?.removeEventListener('abort', wake);
        const at = waiting.indexOf(wake);
        if (at >= 0) waiting.splice(at, 1);
        resolve();
      };
      waiting.push(wake);
      signal?.addEventListener('abort', wake, { once: true });
    });
  }
  signal?.throwIfAborted();
  running++;
}

async function compileNow(req: CompileRequest, signal?: AbortSignal): Promise<CompileResponse> {
  const [bin, ...args] = compilerCommand();
  const child = spawn(bin, args, { detached: true, stdio: ['pipe', 'pipe', 'pipe'] });
  const killGroup = () => {
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      // already gone
    }
  };
  // A cancelled validation or sandbox start stops its compile at once (rerun 61b: it ran on 12 s).
  signal?.addEventListener('abort', killGroup, { once: true });
  let out = '';
  let err = '';
  child.stdout
    .setEncoding('utf8')
    .on('data', (d: string) => (out.length < MAX_ANSWER_CHARS ? (out += d) : killGroup()));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (err = (err + d).slice(-2000)));
  const timer = setTimeout(killGroup, COMPILE_WALL_MS);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('close', (code, signal) => resolve({ code, signal })),
  );
  child.on('error', () => {}); // reported through close
  child.stdin.on('error', () => {}); // a child that died before reading
  child.stdin.end(JSON.stringify(req));
  const { code, signal: killedBy } = await exited;
  clearTimeout(timer);
  signal?.removeEventListener('abort', killGroup);
  killGroup(); // esbuild's service, if the child left it behind
  signal?.throwIfAborted();
  if (code === 0 && out.endsWith('\n')) return JSON.parse(out) as CompileResponse;
  const why =
    killedBy === 'SIGXCPU'
      ? `use more than ${COMPILE_CPU_SECONDS} s of CPU`
      : killedBy === 'SIGKILL'
        ? `run past ${COMPILE_WALL_MS / 1000} s or answer past ${MAX_ANSWER_CHARS} characters`
        : `fail (${killedBy ?? `exit code ${code}`}${lastLine(err) ? `: ${lastLine(err)}` : ''})`;
  return {
    ok: false,
    message: `made the compiler ${why}; it has ${COMPILE_DATA_MB} MiB of memory and ${COMPILE_CPU_SECONDS} s of CPU: simplify the code`,
  };
}

/** The error line of what the process printed last (Node prints its version after it). */
const lastLine = (text: string) =>
  text
    .split('\n')
    .filter((l) => /\b(?:Error|error|fatal)\b/.test(l) && !/^\s+at /.test(l))
    .slice(-1)[0]
    ?.trim()
    .slice(0, 300);

/** CPU of one compile (the SDK with zod bundles in about 1 s). */
const COMPILE_CPU_SECONDS = 60;
/** Wall clock of one compile: generous, for a busy machine; CPU bounds the work. */
const COMPILE_WALL_MS = 180_000;
/** Data segment of the compiler's process and of esbuild's (each). */
const COMPILE_DATA_MB = 1024;
/** The answer is a line of file names or a syntax problem; the bundle goes to its file. */
const MAX_ANSWER_CHARS = 1024 * 1024;

const here = path.dirname(fileURLToPath(import.meta.url));
const ext = path.extname(fileURLToPath(import.meta.url)); // .ts under tsx, .js when compiled
/** TypeScript sources (under tsx, and the compiled CLI, whose modules keep their sources' URLs) need tsx's loader. */
const loaderArgs = ext === '.ts' ? ['--import', import.meta.resolve('tsx')] : [];
const NODE = [process.execPath, ...loaderArgs, path.join(here, `compile-child${ext}`)];
/**
 * Under prlimit where it is installed (as the sandbox is), else Node and the wall clock alone; and
 * killed with the worker where setpriv is (rerun 61b: a killed worker's compile ran on, past the
 * wall clock that died with it); found at the first compile.
 */
let command: string[] | undefined;
const installed = (tool: string) => spawnSync(tool, ['--version']).status === 0;
const compilerCommand = (): string[] =>
  (command ??= [
    ...(installed('prlimit')
      ? [
          'prlimit',
          `--data=${COMPILE_DATA_MB * 1024 * 1024}`,
          `--cpu=${COMPILE_CPU_SECONDS}:${COMPILE_CPU_SECONDS + 1}`,
          '--',
        ]
      : []),
    ...(installed('setpriv') ? ['setpriv', '--pdeathsig', 'KILL', '--'] : []),
    ...NODE,
  ]);
