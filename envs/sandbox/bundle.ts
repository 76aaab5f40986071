import { existsSync } from 'node:fs';
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

// Generated modules import the SDK as `#env-sdk` even when their source lives outside the package.
const envSdk: Plugin = {
  name: 'env-sdk',
  setup(b) {
    b.onResolve({ filter: /^#env-sdk$/ }, () => {
      if (!existsSync(SDK_ENTRY)) return { errors: [{ text: `#env-sdk: ${SDK_ENTRY} does not exist` }] };
      return { path: SDK_ENTRY };
    });
  },
};

/**
 * Bundles the sandbox child runner and the environment module into one self-contained ESM file,
 * so the sandboxed process needs read access to nothing but that file.
 */
export async function bundleEnvModule(modulePath: string, outFile: string): Promise<void> {
  const runner = path.join(here, 'child.ts');
  const entry = [
    `import { runSandboxChild } from ${JSON.stringify(runner)};`,
    `import * as mod from ${JSON.stringify(path.resolve(modulePath))};`,
    'runSandboxChild(mod.default);',
  ].join('\n');
  try {
    await build({
      stdin: { contents: entry, resolveDir: repoRoot, sourcefile: 'sandbox-entry.ts', loader: 'ts' },
      bundle: true,
      platform: 'node',
      format: 'esm',
      target: 'node20',
      outfile: outFile,
      plugins: [envSdk],
      nodePaths: [path.join(repoRoot, 'node_modules')],
      // CommonJS dependencies inside an ESM bundle still call require() for builtins.
      banner: { js: "import { createRequire as __sandboxRequire } from 'node:module'; const require = __sandboxRequire(import.meta.url);" },
      logLevel: 'silent',
      legalComments: 'none',
    });
  } catch (err) {
    const errors = (err as { errors?: { text: string; location?: { file: string; line: number } | null }[] }).errors;
    const text = errors?.length
      ? errors.slice(0, 3).map((e) => (e.location ? `${path.resolve(repoRoot, e.location.file)}:${e.location.line}: ${e.text}` : e.text)).join('; ')
      : (err as Error).message;
    throw new BundleError(`bundle failed: ${text}`);
  }
}
