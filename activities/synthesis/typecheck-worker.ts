import { readFileSync } from 'node:fs';
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
const host: ts.CompilerHost = {
  ...base,
  getSourceFile(fileName, lang, onError, fresh) {
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
