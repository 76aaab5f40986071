import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build, type Plugin } from 'esbuild';

const here = path.dirname(fileURLToPath(import.meta.url));
const repoRoot = path.resolve(here, '../..');
export const SDK_ENTRY = path.join(repoRoot, 'envs/sdk/index.ts');

/** Thrown when a module does not compile; the message carries esbuild's first errors. */
export class BundleError extends Error {
  override name = 'BundleError';
}

/** What to bundle: a module file, or module source held in memory (it never touches the disk). */
export type ModuleInput = { modulePath: string } | { source: string };

const SOURCE_SPECIFIER = 'sandbox-source:env.ts';

function plugins(source: string | undefined): Plugin[] {
  return [
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
        b.onLoad({ filter: /.*/, namespace: 'sandbox-source' }, () => ({
          contents: source ?? '',
          loader: 'ts',
          resolveDir: repoRoot,
        }));
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
 * so the sandboxed process needs read access to nothing but that file.
 */
export async function bundleEnvModule(input: ModuleInput, outFile: string): Promise<void> {
  const source = 'source' in input ? input.source : undefined;
  const modulePath = 'modulePath' in input ? path.resolve(input.modulePath) : undefined;
  const key = source !== undefined ? `source:${sha256(source)}` : `path:${modulePath}`;
  const hit = cache.get(key);
  if (hit && (await stillValid(hit.inputs))) {
    cache.delete(key);
    cache.set(key, hit); // most recently used last
    await writeFile(outFile, hit.code);
    return;
  }
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
      plugins: plugins(source),
      nodePaths: [path.join(repoRoot, 'node_modules')],
      // CommonJS dependencies inside an ESM bundle still call require() for builtins.
      banner: {
        js: "import { createRequire as __sandboxRequire } from 'node:module'; const require = __sandboxRequire(import.meta.url);",
      },
      logLevel: 'silent',
      legalComments: 'none',
    });
  } catch (err) {
    const errors = (err as { errors?: { text: string; location?: { file: string; line: number } | null }[] }).errors;
    const where = (file: string) => (file.startsWith('sandbox-source:') ? 'env.ts' : path.resolve(repoRoot, file));
    const text = errors?.length
      ? errors
          .slice(0, 3)
          .map((e) => (e.location ? `${where(e.location.file)}:${e.location.line}: ${e.text}` : e.text))
          .join('; ')
      : (err as Error).message;
    throw new BundleError(`bundle failed: ${text}`);
  }
  const code = result.outputFiles[0].text;
  const files = Object.keys(result.metafile.inputs)
    .map((f) => path.resolve(repoRoot, f))
    .filter((f) => existsSync(f));
  cache.set(key, {
    code,
    inputs: await Promise.all(files.map(async (f): Promise<[string, string]> => [f, sha256(await readFile(f))])),
  });
  if (cache.size > CACHE_ENTRIES) cache.delete(cache.keys().next().value!);
  await writeFile(outFile, code);
}
