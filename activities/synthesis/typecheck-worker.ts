import { readFileSync, realpathSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parentPort } from 'node:worker_threads';
import ts from 'typescript';

/**
 * Type-checks candidate modules against the SDK in a worker thread: `ts.createProgram` is seconds
 * of synchronous CPU work, which on the worker's event loop would delay workflow tasks and
 * heartbeats (a 13.8 s workflow task in the demo). One request at a time: { id, file, max }.
 */
const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

const TS_OPTIONS: ts.CompilerOptions = {
  target: ts.ScriptTarget.ES2022,
  module: ts.ModuleKind.NodeNext,
  moduleResolution: ts.ModuleResolutionKind.NodeNext,
  strict: true,
  noEmit: true,
  skipLibCheck: true,
  types: ['node'],
};
/** Parsed SDK, lib and node typings are reused across checks (the first check pays ~10 s). */
const sourceCache = new Map<string, ts.SourceFile>();
const base = ts.createCompilerHost(TS_OPTIONS);
const tmp = path.join(repoRoot, '.trace', 'tmp');

/**
 * tsc reads what the module names (`/// <reference path>`, `typeof import('/x.json')`) and its
 * diagnostics quote the types it found: a host file's string constants or a JSON file's keys came
 * back in the reasons the generator and the stored verdict get (an outside pass, 2026-12-04). The
 * checker sees only the candidates, the repo's code and data the SDK imports, the repo's
 * package.json and node_modules; anything else does not exist for it, so it tells no file's existence.
 */
const SEEN_ROOTS = [
  path.join(tmp, 'synthesis'),
  ...['envs', 'core', 'data', 'node_modules'].map((d) => path.join(repoRoot, d)),
];
const SEEN_FILES = new Set([path.join(repoRoot, 'package.json')]);
const within = (dir: string, p: string) => p === dir || p.startsWith(dir + path.sep);
const seenCache = new Map<string, boolean>();
function seen(p: string): boolean {
  let ok = seenCache.get(p);
  if (ok === undefined) {
    let r = path.resolve(p);
    try {
      r = realpathSync(r); // a link in a seen tree may point anywhere
    } catch {
      // a path that does not exist is judged by its name
    }
    ok = SEEN_FILES.has(r) || SEEN_ROOTS.some((root) => within(root, r));
    // The ancestors of what it may see (module resolution walks up from the candidate).
    ok ||= SEEN_ROOTS.some((root) => within(r, root));
    seenCache.set(p, ok);
  }
  return ok;
}

const host: ts.CompilerHost = {
  ...base,
  fileExists: (f) => seen(f) && base.fileExists(f),
  readFile: (f) => (seen(f) ? base.readFile(f) : undefined),
  directoryExists: (d) => seen(d) && (base.directoryExists?.(d) ?? true),
  getDirectories: (d) => (seen(d) ? (base.getDirectories?.(d) ?? []) : []),
  realpath: (p) => (seen(p) ? (base.realpath?.(p) ?? p) : p),
  getSourceFile(fileName, lang, onError, fresh) {
    if (!seen(fileName)) return undefined;
    if (fileName.startsWith(tmp)) return base.getSourceFile(fileName, lang, onError, fresh);
    let sf = sourceCache.get(fileName);
    if (!sf) {
      sf = base.getSourceFile(fileName, lang, onError, fresh);
      if (sf) sourceCache.set(fileName, sf);
    }
    return sf;
  },
};

function typeErrors(file: string, max: number): string[] {
  const program = ts.createProgram([file], TS_OPTIONS, host);
  const diags = ts.getPreEmitDiagnostics(program).filter((d) => d.file?.fileName === file || !d.file);
  return diags.slice(0, max).map((d) => {
    const msg = ts.flattenDiagnosticMessageText(d.messageText, ' ');
    if (!d.file || d.start === undefined) return msg;
    const { line, character } = d.file.getLineAndCharacterOfPosition(d.start);
    return `line ${line + 1}:${character + 1}: ${msg}`;
  });
}

// The thread's own id, so that the parent can read this thread's CPU time (/proc/self/task/<tid>).
try {
  parentPort!.postMessage({ tid: Number(readFileSync('/proc/thread-self/stat', 'utf8').split(' ')[0]) });
} catch {
  // no procfs: the parent cannot bound the check's CPU time (only its memory)
}

parentPort!.on('message', ({ id, file, max }: { id: number; file: string; max: number }) => {
  try {
    parentPort!.postMessage({ id, errors: typeErrors(file, max) });
  } catch (err) {
    parentPort!.postMessage({ id, failure: (err as Error).message });
  }
});
