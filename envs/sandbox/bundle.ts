import { createHash } from 'node:crypto';
import { existsSync, realpathSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as acorn from 'acorn';
import { build, transform, type Plugin } from 'esbuild';
import { compile } from './compiler.js';
import { oneLine } from './process.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const repoRoot = path.resolve(here, '../..');
export const SDK_ENTRY = path.join(repoRoot, 'envs/sdk/index.ts');

/** The largest bundle a sandbox runs. */
export const MAX_BUNDLE_BYTES = 8 * 1024 * 1024;

/** Thrown when a module does not compile; the message carries esbuild's first errors. */
export class BundleError extends Error {
  override name = 'BundleError';
}

/** What to bundle: a module file, or module source held in memory (it never touches the disk). */
export type ModuleInput = { modulePath: string } | { source: string };

const SOURCE_SPECIFIER = 'sandbox-source:env.ts';
const NODE_MODULES = path.join(repoRoot, 'node_modules');
const CODE_FILE = /\.(ts|tsx|mts|cts|js|jsx|mjs|cjs)$/;
const BARE_PACKAGE = /^(@[\w.-]+\/)?[\w-][\w.-]*(\/.*)?$/;
const BUILTINS = new Set(builtinModules);

const inside = (dir: string, file: string) => {
  const rel = path.relative(dir, file);
  return rel !== '' && !rel.startsWith('..') && !path.isAbsolute(rel);
};
const real = (file: string) => {
  try {
    return realpathSync(file);
  } catch {
    return file;
  }
};

/**
 * The bundler runs outside the sandbox, as the worker: an import the module writes is read from the
 * host at bundle time (`import s from '/etc/shadow' with { type: 'text' }`, `'./package.json'`, a
 * JSON parse error quoting `/proc/uptime`: red-team rerun 5). So the module's own imports may name
 * only `#env-sdk`, Node builtins and packages in the repo's node_modules; a module given by path (the
 * repo's envs and fixtures, a saved module) may also import code files (no import attributes) of its
 * own directory or of the repo. The SDK, packages and repo files import what they like: they are
 * the repo's code. Refused before anything is resolved, so the message
 * does not tell whether a host file exists.
 */
function confineImports(modulePath: string | undefined): Plugin {
  const moduleDir = modulePath ? real(path.dirname(modulePath)) : undefined;
  const roots = moduleDir ? [moduleDir, real(repoRoot)] : [];
  const inRoots = (file: string) => roots.some((r) => inside(r, file));
  const moduleFiles = new Set(modulePath ? [modulePath, real(modulePath)] : []);
  const skip = Symbol('confine-imports');
  /** Every file an import resolved to: the only files the bundle may load. */
  const resolvedFiles = new Set<string>();
  const record = <R extends { path: string; namespace?: string; errors?: unknown[] }>(r: R): R => {
    if (!r.errors?.length && (r.namespace ?? 'file') === 'file') resolvedFiles.add(r.path);
    return r;
  };
  return {
    name: 'confine-imports',
    setup(b) {
      b.onResolve({ filter: /.*/ }, async (a) => {
        if (a.pluginData === skip) return undefined;
        const fromModule = a.namespace === 'sandbox-source' || moduleFiles.has(a.importer);
        const resolveOthers = (spec: string) =>
          b.resolve(spec, {
            kind: a.kind,
            resolveDir: a.resolveDir,
            importer: a.importer,
            namespace: a.namespace,
            pluginData: skip,
            with: a.with,
          });
        if (!fromModule) {
          const r = record(await resolveOthers(a.path));
          return r.errors.length ? { errors: r.errors } : r;
        }
        const spec = a.path;
        const refuse = (why: string) => ({
          errors: [
            {
              text: `sandbox: import ${JSON.stringify(spec)} refused (${why}); an env module may import '#env-sdk', Node builtins (node:…) and packages${moduleDir ? ', and code files of its own directory or of the repo' : ''}`,
            },
          ],
        });
        const attributes = Object.keys(a.with ?? {}).length > 0;
        if (spec === '#env-sdk') return attributes ? refuse('import attributes') : record(await resolveOthers(spec));
        if (spec.startsWith('node:') || BUILTINS.has(spec)) return undefined;
        if (spec.startsWith('.') || path.isAbsolute(spec)) {
          if (!moduleDir) return refuse('a file path');
          if (attributes) return refuse('import attributes');
          const file = path.resolve(a.resolveDir, spec);
          if (!inRoots(file)) return refuse("outside the module's directory and the repo");
          const r = await b.resolve(spec, {
            kind: a.kind,
            resolveDir: a.resolveDir,
            importer: a.importer,
            pluginData: skip,
          });
          if (r.errors.length) return { errors: r.errors };
          const resolved = real(r.path);
          if (!inRoots(resolved) || !CODE_FILE.test(resolved))
            return refuse("not a code file of the module's directory or the repo");
          // The module's own files are confined in turn; the repo's are its own code.
          if (inside(moduleDir, resolved)) {
            moduleFiles.add(r.path);
            moduleFiles.add(resolved);
          }
          return record({ path: resolved });
        }
        if (!BARE_PACKAGE.test(spec) || spec.split('/').includes('..')) return refuse('not a package name');
        const r = await b.resolve(spec, {
          kind: a.kind,
          resolveDir: repoRoot,
          importer: a.importer,
          pluginData: skip,
          with: a.with,
        });
        if (r.errors.length) return { errors: r.errors };
        if (r.external) return r;
        const resolved = real(r.path);
        if (!inside(real(NODE_MODULES), resolved)) return refuse('not in node_modules');
        return record({ path: resolved });
      });
      // esbuild expands an import() or require() of a template or a concatenation into every file
      // that matches, read from the host, and asks no onResolve (an outside pass, 2026-12-04:
      // `import(\`../../proc/self/env${x}\`, { with: { type: 'text' } })` bundled the worker's
      // environment, secrets included). The module's own files may hold no such call, and no file
      // is loaded that an import did not resolve to. Nothing says which file was matched.
      b.onLoad({ filter: /.*/, namespace: 'file' }, async (a) => {
        if (!resolvedFiles.has(a.path))
          return {
            errors: [{ text: 'sandbox: a file no import resolved to was loaded (an import() of a computed path?)' }],
          };
        if (!moduleFiles.has(a.path)) return undefined;
        const problem = await computedImport(await readFile(a.path, 'utf8'), a.path);
        return problem ? { errors: [{ text: problem }] } : undefined;
      });
    },
  };
}

/**
 * Whether `source` may declare a TypeScript enum. esbuild computes every enum member at compile
 * time, in the worker's process: 28 members each the last twice over (`M1 = M0 + M0`) took 21.8 s
 * and 3.2 GB, then crashed the worker with an exception esbuild's client throws where no caller can
 * catch it (rerun 56b). Read on the text as written, before esbuild sees it, comments allowed
 * between the words; a string that spells one out is refused too. A union of string literals or
 * an object `as const` does what an enum does.
 */
export function enumDeclaration(source: string): string | undefined {
  const gaps = gapSkipper(source);
  for (const m of source.matchAll(/\benum/g)) {
    const name = gaps(m.index + 4);
    if (name === m.index + 4 || !/[\p{ID_Start}$_\\]/u.test(String.fromCodePoint(source.codePointAt(name) ?? 32)))
      continue;
    let end = name;
    while (end < source.length && !/[\s{/]/.test(source[end])) end++;
    if (source[gaps(end)] === '{')
      return 'declares a TypeScript enum, which the bundler computes at compile time; use a union of string literals or an object `as const`';
  }
  return undefined;
}

/**
 * Where the run of whitespace and comments at `at` ends. Linear over a text: where a comment ends
 * is searched once and kept (each `enum` of `enum /*` repeated searched the rest of the text
 * again: rerun 59b; a regex split the runs every way: rerun 58b).
 */
function gapSkipper(source: string): (at: number) => number {
  const after = (what: RegExp) => {
    let from = -1;
    let found = -1;
    return (at: number) => {
      if (from < 0 || at < from || (found >= 0 && at > found)) {
        what.lastIndex = at;
        const m = what.exec(source);
        [from, found] = [at, m ? m.index : -1];
      }
      return found;
    };
  };
  const blockEnd = after(/\*\//g);
  const lineEnd = after(/[\n\r\u2028\u2029]/g);
  // Where each run walked ends, for every position walked: no run is walked twice (rerun 60b:
  // `// enum a` on every line walked the comments after each).
  const ends = new Map<number, number>();
  const next = (at: number): number | undefined => {
    if (/\s/.test(source[at] ?? '')) return at + 1;
    if (source.startsWith('/*', at)) {
      const close = blockEnd(at + 2);
      return close < 0 ? source.length : close + 2;
    }
    if (source.startsWith('//', at)) {
      const end = lineEnd(at + 2);
      return end < 0 ? source.length : end;
    }
    return undefined;
  };
  return (start) => {
    const walked: number[] = [];
    let at = start;
    for (let step = next(at); ; step = next(at)) {
      const known = ends.get(at);
      if (known !== undefined) {
        at = known;
        break;
      }
      if (step === undefined) break;
      walked.push(at);
      at = step;
    }
    for (const p of walked) ends.set(p, at);
    return at;
  };
}

/**
 * The first import() or require() (or require.resolve) in `source` whose path is a template with
 * substitutions or a concatenation, which esbuild would expand at bundle time. Parsed (esbuild
 * strips the types, acorn parses the JavaScript), so comments, parentheses, type assertions and
 * escaped names do not hide one; TypeScript's own parser took ~1 s of the worker's event loop to load.
 */
export async function computedImport(source: string, fileName = 'env.ts'): Promise<string | undefined> {
  const enumProblem = enumDeclaration(source);
  if (enumProblem) return `the module ${enumProblem}`;
  const loader = /\.[cm]?js$/.test(fileName) ? 'js' : /\.[jt]sx$/.test(fileName) ? 'tsx' : 'ts';
  let code: string;
  try {
    // es2022: decorators and newer syntax lowered, so that acorn reads what esbuild will bundle.
    code = (await transform(source, { loader, format: 'esm', target: 'es2022', sourcefile: fileName })).code;
  } catch {
    return undefined; // a syntax error: the bundle reports it
  }
  let ast: acorn.Node;
  try {
    ast = acorn.parse(code, { ecmaVersion: 'latest', sourceType: 'module' });
  } catch (e) {
    // Refused, not passed: code left unchecked is code esbuild may glob (a decorator acorn could
    // not read let a computed import through to probe host paths and walk the disk: rerun 15).
    return `the module could not be checked for computed imports (${(e as Error).message}); write plain ES2022`;
  }
  type N = acorn.Node & Record<string, unknown>;
  const isRequire = (e: N) => e.type === 'Identifier' && e.name === 'require';
  const computed = (a: N | undefined) =>
    !!a &&
    ((a.type === 'TemplateLiteral' && (a.expressions as unknown[]).length > 0) ||
      (a.type === 'BinaryExpression' && a.operator === '+'));
  let found: N | undefined;
  const visit = (node: unknown): void => {
    if (found || !node || typeof node !== 'object') return;
    if (Array.isArray(node)) return node.forEach(visit);
    const n = node as N;
    const callee = n.callee as N | undefined;
    const loads =
      n.type === 'ImportExpression'
        ? computed(n.source as N)
        : n.type === 'CallExpression' &&
          !!callee &&
          (isRequire(callee) ||
            (callee.type === 'MemberExpression' &&
              isRequire(callee.object as N) &&
              (callee.property as N).type === 'Identifier' &&
              (callee.property as N).name === 'resolve')) &&
          computed((n.arguments as N[])[0]);
    if (loads) found = n;
    else Object.values(n).forEach(visit);
  };
  visit(ast);
  if (!found) return undefined;
  const what = found.type === 'ImportExpression' ? 'import()' : 'require()';
  return `${what} of a computed path (a template or a concatenation) is refused: the bundler would read every matching host file; name the module as a string literal`;
}

/** The runner's own code: its builtin imports load first, before anything of the module runs. */
const RUNNER_DIRS = [path.join(repoRoot, 'envs', 'sandbox'), path.join(repoRoot, 'envs', 'protocol')];
const IDENTIFIER = /^[A-Za-z_$][\w$]*$/;

/**
 * Every other static import of a Node builtin (the module's, the SDK's, a package's) becomes a
 * module of the bundle's own that takes the builtin with `process.getBuiltinModule` where it stands
 * in the bundle: after the runner, whose changes it then sees. ESM loads every builtin a bundle
 * imports before any of its code runs, so a builtin the module named was loaded before the runner
 * had frozen the clocks and timers, and kept the real ones (`readline`'s keypress timer, the test
 * runner's `setTimeout` and `hrtime`), and a named import of `report` from `node:process` kept the
 * real one past the runner's refusal (red-team rerun 12). A name whose getter the runner refuses
 * reads `undefined`.
 */
function deferBuiltins(): Plugin {
  return {
    name: 'defer-builtins',
    setup(b) {
      b.onResolve({ filter: /.*/ }, (a) => {
        const id = a.path.startsWith('node:') ? a.path.slice('node:'.length) : a.path;
        if (a.kind !== 'import-statement' || !(a.path.startsWith('node:') || BUILTINS.has(a.path))) return undefined;
        if (RUNNER_DIRS.some((dir) => inside(dir, a.importer))) return undefined;
        return { path: `node:${id}`, namespace: 'sandbox-builtin' };
      });
      b.onLoad({ filter: /.*/, namespace: 'sandbox-builtin' }, (a) => {
        const mod = (process as unknown as { getBuiltinModule: (id: string) => object }).getBuiltinModule(a.path);
        const names = Object.keys(mod).filter((k) => IDENTIFIER.test(k) && k !== 'default');
        const lines = [
          `const m = process.getBuiltinModule(${JSON.stringify(a.path)});`,
          'const take = (k) => { try { return m[k]; } catch { return undefined; } };',
          'export default m;',
          ...names.map((k) => `export const ${k} = take(${JSON.stringify(k)});`),
        ];
        return { contents: lines.join('\n'), loader: 'js' };
      });
    },
  };
}

function plugins(source: string | undefined, modulePath: string | undefined): Plugin[] {
  return [
    confineImports(modulePath),
    deferBuiltins(),
    {
      // Generated modules import the SDK as `#env-sdk` wherever their source lives.
      name: 'env-sdk',
      setup(b) {
        b.onResolve({ filter: /^#env-sdk$/ }, () => {
          if (!existsSync(SDK_ENTRY)) return { errors: [{ text: `#env-sdk: ${SDK_ENTRY} does not exist` }] };
          return { path: SDK_ENTRY };
        });
      },
    },
    {
      name: 'sandbox-source',
      setup(b) {
        b.onResolve({ filter: /^sandbox-source:/ }, (a) => ({ path: a.path, namespace: 'sandbox-source' }));
        b.onLoad({ filter: /.*/, namespace: 'sandbox-source' }, async () => {
          const problem = await computedImport(source ?? '');
          if (problem) return { errors: [{ text: problem }] };
          return { contents: source ?? '', loader: 'ts', resolveDir: repoRoot };
        });
      },
    },
  ];
}

/**
 * Bundles are cached per module (path or source hash) and reused only while every input file
 * (module, SDK, runner, packages) still has the content it had: a stale bundle cannot be served.
 */
const cache = new Map<string, { code: string; inputs: [string, string][] }>();
const CACHE_ENTRIES = 16;

const sha256 = (data: string | Buffer) => createHash('sha256').update(data).digest('hex');

async function stillValid(inputs: [string, string][]): Promise<boolean> {
  for (const [file, hash] of inputs) {
    const now = await readFile(file).then(sha256, () => undefined);
    if (now !== hash) return false;
  }
  return true;
}

/**
 * Bundles the sandbox child runner and the environment module into one self-contained ESM file,
 * so the sandboxed process needs read access to nothing but that file. esbuild runs in a process
 * of its own (`compiler.ts`), killed past its limits: the module's text decides how much work and
 * memory it takes (rerun 57b).
 */
export async function bundleEnvModule(input: ModuleInput, outFile: string, signal?: AbortSignal): Promise<void> {
  const key = 'source' in input ? `source:${sha256(input.source)}` : `path:${path.resolve(input.modulePath)}`;
  const hit = cache.get(key);
  if (hit && (await stillValid(hit.inputs))) {
    cache.delete(key);
    cache.set(key, hit); // most recently used last
    await writeFile(outFile, hit.code);
    return;
  }
  const res = await compile({ op: 'bundle', input, outFile }, signal);
  if (!res.ok)
    throw new BundleError(
      res.message.startsWith('bundle failed') ? res.message : `bundle failed: the module ${res.message}`,
    );
  const code = await readFile(outFile, 'utf8');
  cache.set(key, {
    code,
    inputs: await Promise.all(
      (res.files ?? []).map(async (f): Promise<[string, string]> => [f, sha256(await readFile(f))]),
    ),
  });
  if (cache.size > CACHE_ENTRIES) cache.delete(cache.keys().next().value!);
}

/**
 * The first syntax error in a module's text (esbuild's first three), or undefined; run in the
 * compiler's process as bundling is.
 */
export async function checkSyntax(source: string, signal?: AbortSignal): Promise<string | undefined> {
  const res = await compile({ op: 'syntax', source }, signal);
  if (!res.ok) throw new BundleError(res.message);
  return res.problem;
}

/** What the compiler's process is asked: a bundle written to `outFile`, or a syntax check. */
export type CompileRequest = { op: 'bundle'; input: ModuleInput; outFile: string } | { op: 'syntax'; source: string };
/** Its answer: the bundle's input files, or the syntax problem; or esbuild's refusal. */
export type CompileResponse = { ok: true; files?: string[]; problem?: string } | { ok: false; message: string };

/** In the compiler's process: `checkSyntax`'s work. */
export async function syntaxProblem(source: string): Promise<string | undefined> {
  const enumProblem = enumDeclaration(source);
  if (enumProblem) return enumProblem;
  try {
    await transform(source, { loader: 'ts', format: 'esm', sourcefile: 'env.ts' });
    return undefined;
  } catch (e) {
    const errs = (e as { errors?: { text: string; location?: { line: number; column: number } }[] }).errors ?? [];
    // No error of the text's: esbuild itself failed (its service died past its memory limit).
    if (!errs.length) throw e;
    // esbuild quotes the text it found: a 100 KB token was a 100 KB reason (rerun 58b).
    return `syntax error: ${oneLine(
      errs
        .slice(0, 3)
        .map((x) => `${x.location ? `line ${x.location.line}:${x.location.column}: ` : ''}${x.text}`)
        .join('; '),
    )}`;
  }
}

const DIRECT_EVAL =
  "a direct eval is refused: it would see the sandbox runner's own names; use (0, eval)(…), which runs in the global scope";

/** In the compiler's process: `bundleEnvModule`'s work; the files the bundle was built from. */
export async function buildBundle(input: ModuleInput, outFile: string): Promise<string[]> {
  const source = 'source' in input ? input.source : undefined;
  const modulePath = 'modulePath' in input ? path.resolve(input.modulePath) : undefined;
  const target = modulePath ?? SOURCE_SPECIFIER;
  const entry = [
    `import { runSandboxChild } from ${JSON.stringify(path.join(here, 'child.ts'))};`,
    `import * as mod from ${JSON.stringify(target)};`,
    'runSandboxChild(mod.default);',
  ].join('\n');
  let result;
  try {
    result = await build({
      stdin: { contents: entry, resolveDir: repoRoot, sourcefile: 'sandbox-entry.ts', loader: 'ts' },
      absWorkingDir: repoRoot,
      bundle: true,
      platform: 'node',
      format: 'esm',
      target: 'node20',
      write: false,
      outfile: outFile,
      metafile: true,
      plugins: plugins(source, modulePath),
      nodePaths: [path.join(repoRoot, 'node_modules')],
      // CommonJS dependencies inside an ESM bundle still call require() for builtins.
      banner: {
        js: "import { createRequire as __sandboxRequire } from 'node:module'; const require = __sandboxRequire(import.meta.url);",
      },
      logLevel: 'silent',
      // A direct eval sees the scope it stands in, and the bundle has one top level: the runner's
      // functions there could be rebound (rerun 74a: `sha256`, which the MAC closure calls with the
      // key's pads, and the error classifier). Refused in every file, packages' included; `(0,
      // eval)(…)` runs in the global scope and is allowed.
      logOverride: { 'direct-eval': 'error' },
      legalComments: 'none',
    });
  } catch (err) {
    const errors = (
      err as { errors?: { id: string; text: string; location?: { file: string; line: number } | null }[] }
    ).errors;
    if (!errors?.length) throw err; // esbuild itself failed: the compiler's process reports it
    const where = (file: string) => (file.startsWith('sandbox-source:') ? 'env.ts' : path.resolve(repoRoot, file));
    const text = errors
      .slice(0, 3)
      .map((e) => ({ ...e, text: e.id === 'direct-eval' ? DIRECT_EVAL : e.text }))
      .map((e) => (e.location ? `${where(e.location.file)}:${e.location.line}: ${e.text}` : e.text))
      .join('; ');
    throw new BundleError(`bundle failed: ${text}`);
  }
  const code = result.outputFiles[0].text;
  // Each process gets a copy, outside its disk limit (rerun 56b: 34 MB from 2.5 KB of source); the
  // SDK with zod comes to under 1 MB.
  if (Buffer.byteLength(code) > MAX_BUNDLE_BYTES)
    throw new BundleError(`bundle failed: the bundle is ${Buffer.byteLength(code)} bytes; at most ${MAX_BUNDLE_BYTES}`);
  await writeFile(outFile, code);
  return Object.keys(result.metafile.inputs)
    .map((f) => path.resolve(repoRoot, f))
    .filter((f) => existsSync(f));
}
