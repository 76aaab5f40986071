#!/usr/bin/env node
// The `trace` command: runs the compiled CLI (.build/cli, see cli/build.mjs), rebuilding it first
// when a source changed since the last build. TRACE_CLI_TSX=1, or a build that fails, runs the
// TypeScript sources through tsx instead (~2 s more per start on 2 cores).
import { buildCli, bundleIsFresh, BUNDLE } from './build.mjs';

async function compiled() {
  if (process.env.TRACE_CLI_TSX === '1') return false;
  if (bundleIsFresh()) return true;
  try {
    await buildCli();
    return true;
  } catch (err) {
    console.error(
      `trace: the compiled CLI could not be built (${String(err.message ?? err).split('\n')[0]}); running the sources through tsx`,
    );
    return false;
  }
}

const useBundle = await compiled();
// A worker also imports TypeScript at run time (in-process candidate modules), so it gets tsx's
// loader too; its own code still runs compiled.
if (!useBundle || process.argv[2] === 'worker') (await import('tsx/esm/api')).register();
await import(useBundle ? BUNDLE : './main.ts');
