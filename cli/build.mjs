// The compiled CLI: cli/main.ts and everything it imports, bundled by esbuild into ES modules under
// .build/cli (git-ignored), so `trace` starts without compiling TypeScript (tsx costs ~0.6 s before
// the first line and more per module on 2 cores). Packages stay in node_modules. Code splitting
// keeps lazy imports lazy: without it the packages of every command (Temporal worker, S3 client,
// …) would load at every start.
// Built by scripts/setup.sh, and again by cli/trace.mjs whenever an input changed.
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const OUT_DIR = path.join(ROOT, '.build');
const CLI_DIR = path.join(OUT_DIR, 'cli');
export const BUNDLE = path.join(CLI_DIR, 'main.mjs');
const MANIFEST = path.join(CLI_DIR, 'manifest.json');
// Chunks of earlier builds stay a day: a running worker may still import one lazily.
const KEEP_OLD_CHUNKS_MS = 24 * 3600 * 1000;

/**
 * Each input's size and mtime: a changed, added or removed input makes the bundle stale (the
 * lock file stands for the inlined packages, and this file for the build options).
 */
const stamp = (file) => {
  const s = statSync(file);
  return `${s.size}:${s.mtimeMs}`;
};

/** True when the bundle exists and was built from the sources as they are now, in this checkout. */
export function bundleIsFresh() {
  let manifest;
  try {
    manifest = JSON.parse(readFileSync(MANIFEST, 'utf8'));
    statSync(BUNDLE);
  } catch {
    return false;
  }
  if (manifest.root !== ROOT || manifest.node !== process.version) return false;
  try {
    return Object.entries(manifest.inputs).every(([rel, s]) => stamp(path.join(ROOT, rel)) === s);
  } catch {
    return false; // an input was removed
  }
}

/**
 * Each module keeps the import.meta.url of its source file: modules find data, SDK sources and
 * worker scripts relative to where they live in the tree, not where the bundle is.
 */
const sourceUrls = (esbuild, tsconfigRaw) => ({
  name: 'source-import-meta-url',
  setup(build) {
    build.onLoad({ filter: /\.[cm]?[jt]s$/ }, async (args) => {
      if (args.path.includes(`${path.sep}node_modules${path.sep}`)) return undefined;
      const source = readFileSync(args.path, 'utf8');
      if (!source.includes('import.meta')) return undefined;
      const { code } = await esbuild.transform(source, {
        loader: args.path.endsWith('ts') ? 'ts' : 'js',
        format: 'esm',
        target: 'node20',
        sourcefile: args.path,
        tsconfigRaw,
        define: { 'import.meta.url': JSON.stringify(pathToFileURL(args.path).href) },
      });
      return { contents: code, loader: 'js' };
    });
  },
});

/**
 * Packages load from node_modules, except the three every command needs (argument parsing, YAML
 * and schemas): zod alone is ~300 files, and reading them took longer than the rest of a start.
 */
const INLINE = new Set(['commander', 'yaml', 'zod']);
const externalPackages = {
  name: 'external-packages',
  setup(build) {
    build.onResolve({ filter: /^[^./#]/ }, (args) => {
      if (args.path.startsWith('node:')) return { external: true };
      const name = args.path.startsWith('@') ? args.path.split('/').slice(0, 2).join('/') : args.path.split('/')[0];
      return INLINE.has(name) ? undefined : { external: true };
    });
  },
};

/**
 * zod re-exports all 64 of its locales (`z.locales`) from its entry, so every start parsed and ran
 * them (about 40% of the zod code loaded). The project never calls z.config, and zod registers
 * English itself on first use, so the bundle's `locales` namespace holds English only.
 */
const zodEnglishOnly = {
  name: 'zod-english-only',
  setup(build) {
    build.onResolve({ filter: /^\.\.\/locales\/index\.js$/ }, (args) => {
      if (!/[\\/]node_modules[\\/]zod[\\/]/.test(args.importer)) return undefined;
      return {
        path: 'zod-locales-en',
        namespace: 'zod-locales',
        pluginData: path.resolve(path.dirname(args.importer), '../locales/en.js'),
      };
    });
    build.onLoad({ filter: /.*/, namespace: 'zod-locales' }, (args) => ({
      contents: `export { default as en } from ${JSON.stringify(args.pluginData)};`,
      loader: 'js',
      resolveDir: path.dirname(args.pluginData),
    }));
  },
};

/** Builds the bundle (a few hundred ms); written to temporary names and renamed, so concurrent builds are safe. */
export async function buildCli() {
  const started = Date.now();
  const esbuild = await import('esbuild');
  const tsconfigRaw = {
    compilerOptions: JSON.parse(readFileSync(path.join(ROOT, 'tsconfig.json'), 'utf8')).compilerOptions,
  };
  const result = await esbuild.build({
    absWorkingDir: ROOT,
    entryPoints: [path.join(ROOT, 'cli', 'main.ts')],
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    splitting: true,
    // Less to parse at every start; identifiers kept so stack traces read (with the linked map).
    minifyWhitespace: true,
    minifySyntax: true,
    write: false,
    metafile: true,
    sourcemap: 'linked',
    outdir: CLI_DIR,
    outExtension: { '.js': '.mjs' },
    chunkNames: 'chunks/[name]-[hash]',
    logLevel: 'silent',
    tsconfigRaw,
    // commander is CommonJS and requires node builtins.
    banner: {
      js: "import { createRequire as __traceRequire } from 'node:module'; const require = __traceRequire(import.meta.url);",
    },
    plugins: [zodEnglishOnly, externalPackages, sourceUrls(esbuild, tsconfigRaw)],
  });
  mkdirSync(path.join(CLI_DIR, 'chunks'), { recursive: true });
  const tmp = `.${process.pid}.tmp`;
  for (const f of result.outputFiles) writeFileSync(f.path + tmp, f.contents);
  // Chunks first: the entry imports them by name.
  const written = result.outputFiles.map((f) => f.path).sort((a, b) => Number(a === BUNDLE) - Number(b === BUNDLE));
  for (const f of written) renameSync(f + tmp, f);
  for (const name of readdirSync(path.join(CLI_DIR, 'chunks'))) {
    const file = path.join(CLI_DIR, 'chunks', name);
    if (!written.includes(file) && Date.now() - statSync(file).mtimeMs > KEEP_OLD_CHUNKS_MS)
      rmSync(file, { force: true });
  }
  const inputs = Object.fromEntries(
    [
      ...Object.keys(result.metafile.inputs).filter(
        (rel) => !rel.includes('node_modules/') && !rel.startsWith('zod-locales:'),
      ),
      'tsconfig.json',
      'package.json',
      'package-lock.json',
      'cli/build.mjs',
    ].map((rel) => [rel, stamp(path.join(ROOT, rel))]),
  );
  // A source saved while esbuild read it may not be in this bundle: leave it stale for the next start.
  if (Object.keys(inputs).some((rel) => statSync(path.join(ROOT, rel)).mtimeMs >= started))
    return { inputs: Object.keys(inputs).length };
  writeFileSync(MANIFEST + tmp, JSON.stringify({ root: ROOT, node: process.version, inputs }));
  renameSync(MANIFEST + tmp, MANIFEST);
  return { inputs: Object.keys(inputs).length };
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  const t0 = performance.now();
  const { inputs } = await buildCli();
  console.log(
    `[build] ${path.relative(ROOT, BUNDLE)} from ${inputs} sources in ${Math.round(performance.now() - t0)} ms`,
  );
}
