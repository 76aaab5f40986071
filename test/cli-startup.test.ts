import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { PROJECT_ROOT } from '../infra/temporal.js';

/**
 * What every `trace` start loads (issue 13 item 12): the compiled entry and the chunks it imports
 * statically, read from the bundle and its source maps. Timing is bench/cli-startup.ts's job; this
 * checks what decides it, so a busy machine cannot fail it: the schemas (zod, the config), YAML and
 * the environments' code load only in the commands that use them.
 */

const build = (await import(pathToFileURL(path.join(PROJECT_ROOT, 'cli', 'build.mjs')).href)) as {
  BUNDLE: string;
  bundleIsFresh(): boolean;
  buildCli(): Promise<unknown>;
};

/** The files a module imports statically (not `import()`), and theirs, from `entry`. */
function staticGraph(entry: string): Set<string> {
  const seen = new Set<string>();
  const visit = (file: string) => {
    if (seen.has(file)) return;
    seen.add(file);
    const code = readFileSync(file, 'utf8');
    for (const m of code.matchAll(/(?:^|[;}\n])\s*import\s*(?:[^"'();]*?from\s*)?["'](\.\.?\/[^"']+)["']/g))
      visit(path.resolve(path.dirname(file), m[1]));
  };
  visit(entry);
  return seen;
}

/** The sources (relative to the project, node_modules/<package> for packages) bundled into `files`. */
function sourcesOf(files: Iterable<string>): Set<string> {
  const out = new Set<string>();
  for (const f of files) {
    const map = JSON.parse(readFileSync(`${f}.map`, 'utf8')) as { sources: string[] };
    for (const s of map.sources) {
      const rel = path.relative(PROJECT_ROOT, path.resolve(path.dirname(f), s));
      const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(rel);
      out.add(pkg ? `node_modules/${pkg[1]}` : rel);
    }
  }
  return out;
}

test('every trace start loads the command definitions only: no schemas, YAML or environments', async () => {
  if (!build.bundleIsFresh()) await build.buildCli();
  const eager = sourcesOf(staticGraph(build.BUNDLE));
  assert.ok(eager.has('cli/main.ts') && eager.has('node_modules/commander'), [...eager].join(', '));
  const heavy = [...eager].filter(
    (s) => /^node_modules\/(zod|yaml|@temporalio|openai|@aws-sdk)$/.test(s) || /^core\/config\.ts$|^envs\//.test(s),
  );
  assert.deepEqual(heavy, [], `loaded at every start: ${heavy.join(', ')}`);
});

test("a command that reads a config loads zod's English messages only, not its 64 locales", async () => {
  if (!build.bundleIsFresh()) await build.buildCli();
  const configFile = readFileSync(build.BUNDLE, 'utf8').match(/chunks\/config-file-[A-Z0-9]+\.mjs/)?.[0];
  assert.ok(configFile, 'config-file is its own chunk, imported on use');
  const loaded = staticGraph(path.join(path.dirname(build.BUNDLE), configFile));
  const sources = [...loaded].flatMap(
    (f) => (JSON.parse(readFileSync(`${f}.map`, 'utf8')) as { sources: string[] }).sources,
  );
  const locales = sources.filter((s) => /zod\/v4\/locales\//.test(s)).map((s) => path.basename(s));
  assert.deepEqual(locales, ['en.js']);
  assert.ok(sourcesOf(loaded).has('core/config.ts'));
});
