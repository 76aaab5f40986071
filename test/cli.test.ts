import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { statSync, utimesSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { terminalSafe } from '../core/terminal-text.js';
import { PROJECT_ROOT } from '../infra/temporal.js';
import { startTestTemporal, tempDir } from './helpers/temporal.js';

/**
 * The `trace` command as a user runs it (node cli/trace.mjs): help, one-line config errors,
 * starting and inspecting runs, schedules and tau2 import against a real dev server.
 */
const run = promisify(execFile);
const TRACE = path.join(PROJECT_ROOT, 'cli', 'trace.mjs');

async function trace(args: string[], env: Record<string, string> = {}) {
  try {
    const r = await run(process.execPath, [TRACE, ...args], {
      cwd: PROJECT_ROOT,
      env: { ...process.env, ...env },
      timeout: 60_000,
    });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (e) {
    const err = e as { code?: number; stdout: string; stderr: string };
    return { code: err.code ?? 1, stdout: err.stdout, stderr: err.stderr };
  }
}

test('trace CLI: --help everywhere, one-line config errors naming the field', async (t) => {
  const tmp = await tempDir('trace-cli-');
  t.after(() => tmp.cleanup());
  const help = await trace(['--help']);
  assert.equal(help.code, 0);
  for (const c of ['run', 'status', 'list', 'cancel', 'report', 'schedule', 'import-tau2', 'demo', 'worker', 'stack']) {
    assert.match(help.stdout, new RegExp(`\\n  ${c}\\b`), `--help lists ${c}`);
  }
  for (const sub of [['run'], ['schedule', 'create'], ['schedule', 'trigger'], ['import-tau2'], ['stack', 'up']]) {
    const r = await trace([...sub, '--help']);
    assert.equal(r.code, 0, `${sub.join(' ')} --help`);
    assert.match(r.stdout, /^Usage: trace /);
  }

  const bad = path.join(tmp.dir, 'bad.yaml');
  await writeFile(bad, 'env: {name: toy-orders}\nrollouts: {batchSize: 0}\n');
  const r1 = await trace(['run', bad]);
  assert.equal(r1.code, 1);
  assert.deepEqual(r1.stderr.trim().split('\n'), [r1.stderr.trim()], 'one line');
  assert.match(r1.stderr, /^trace: bad\.yaml: rollouts\.batchSize: /);

  const unknownEnv = path.join(tmp.dir, 'env.json');
  await writeFile(unknownEnv, JSON.stringify({ env: { name: 'no-such-env' } }));
  const r2 = await trace(['run', unknownEnv]);
  assert.equal(r2.code, 1);
  assert.match(r2.stderr, /^trace: .*env\.json: env\.name: unknown environment 'no-such-env'/);

  const typo = path.join(tmp.dir, 'typo.yaml');
  await writeFile(typo, 'env: {name: toy-orders}\nanalysis: {pases: 3}\n');
  const r3 = await trace(['run', typo]);
  assert.match(r3.stderr, /analysis/);
  assert.equal(r3.stderr.trim().split('\n').length, 1);
});

test('trace CLI: bad input to env show / env replay ends in one line naming the value, no stack', async () => {
  const cases: [string[], RegExp][] = [
    [['env', 'show', 'nope'], /^trace: env: 'nope' is not a built-in target environment/],
    [
      ['env', 'replay', 'tau2-airline', '--gold', '--task', 'NOPE'],
      /^trace: --task: task 'NOPE' not found in tau2-airline/,
    ],
  ];
  for (const [args, message] of cases) {
    const r = await trace(args);
    const what = args.join(' ');
    assert.notEqual(r.code, 0, what);
    assert.equal(r.stderr.trim().split('\n').length, 1, `${what}: one line on stderr, got:\n${r.stderr}`);
    assert.match(r.stderr, message, what);
    assert.doesNotMatch(r.stderr, /^\s*at /m, `${what}: no stack frames`);
    assert.equal(r.stdout, '', what);
  }
});

test('trace CLI: text it prints never drives the terminal (escape sequences shown, not sent)', async () => {
  // A title-setting OSC, a cursor move and a line erase inside a value the error echoes.
  const r = await trace(['env', 'show', 'nope\x1b]0;owned\x07\x1b[1A\x1b[2K']);
  assert.notEqual(r.code, 0);
  assert.doesNotMatch(r.stderr, /[\x00-\x08\x0b-\x1f\x7f-\x9f]/, `raw control characters: ${JSON.stringify(r.stderr)}`);
  assert.match(r.stderr, /'nope\^\[\]0;owned\^G\^\[\[1A\^\[\[2K'/);
  assert.equal(terminalSafe('ok\tline\nnext\r\u009b31m\u007f'), 'ok\tline\nnext^M\\u009b31m^?');
});

test('trace CLI against a dev server: run --detach, status, list, cancel, schedules, import-tau2', async (t) => {
  const tmp = await tempDir('trace-cli-srv-');
  const temporal = await startTestTemporal({ dbFile: path.join(tmp.dir, 'temporal.db') });
  t.after(async () => {
    await temporal.stop();
    await tmp.cleanup();
  });
  const env = { TEMPORAL_ADDRESS: temporal.address, TEMPORAL_UI_URL: 'http://ui.test' };
  const config = path.join(tmp.dir, 'c.yaml');
  await writeFile(
    config,
    `name: cli-test\nenv: {name: toy-orders}\nstore: {kind: local, dir: ${JSON.stringify(path.join(tmp.dir, 'artifacts'))}}\n`,
  );

  // No worker polls in this test: the run is accepted and stays pending, which is all the CLI needs.
  const started = await trace(['run', config, '--detach', '--id', 'cli-run-1'], env);
  assert.equal(started.code, 0, started.stderr);
  assert.match(started.stdout, /run cli-run-1 started/);
  assert.match(started.stdout, /UI: http:\/\/ui\.test\/namespaces\/default\/workflows\/cli-run-1/);

  const status = await trace(['status', 'cli-run-1'], env);
  assert.equal(status.code, 0, status.stderr);
  assert.match(status.stdout, /run cli-run-1: RUNNING/);

  let listed = '';
  for (let i = 0; i < 20 && !listed.includes('cli-run-1'); i++) listed = (await trace(['list'], env)).stdout;
  assert.match(listed, /cli-run-1\tRUNNING/);

  const cancel = await trace(['cancel', 'cli-run-1'], env);
  assert.equal(cancel.code, 0, cancel.stderr);
  const missing = await trace(['status', 'no-such-run'], env);
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /^trace: no run 'no-such-run'/);

  const created = await trace(['schedule', 'create', config, '--id', 'nightly', '--every', '1d'], env);
  assert.equal(created.code, 0, created.stderr);
  assert.match(created.stdout, /overlap SKIP/);
  assert.match((await trace(['schedule', 'list'], env)).stdout, /nightly\tactive/);
  assert.equal((await trace(['schedule', 'trigger', 'nightly'], env)).code, 0);
  assert.equal((await trace(['schedule', 'pause', 'nightly', '--note', 'test'], env)).code, 0);
  let described = '';
  for (let i = 0; i < 20 && !/nightly-/.test(described); i++)
    described = (await trace(['schedule', 'describe', 'nightly'], env)).stdout;
  assert.match(described, /schedule nightly: paused \(test\)/);
  assert.match(described, /overlap SKIP/);
  assert.match(described, /nightly-\S+\s+RUNNING/, 'the triggered run is listed with its status');
  assert.equal((await trace(['schedule', 'delete', 'nightly'], env)).code, 0);
  const gone = await trace(['schedule', 'describe', 'nightly'], env);
  assert.equal(gone.code, 1);

  const out = path.join(tmp.dir, 'imported');
  const imported = await trace(
    [
      'import-tau2',
      path.join(PROJECT_ROOT, 'test', 'fixtures', 'tau2-results.json'),
      '--out',
      out,
      '--store',
      path.join(tmp.dir, 'artifacts'),
    ],
    env,
  );
  assert.equal(imported.code, 0, imported.stderr);
  assert.match(imported.stdout, /^\d+ trajectories \(\d+ successes\) from tau2-/);
  assert.match(imported.stdout, /--rollouts .*rollouts\.json/);
});

test('trace CLI: runs compiled (.build/cli), rebuilt when a source changes, with the same errors as the tsx sources', async (t) => {
  const { BUNDLE, bundleIsFresh } = (await import(pathToFileURL(path.join(PROJECT_ROOT, 'cli', 'build.mjs')).href)) as {
    BUNDLE: string;
    bundleIsFresh(): boolean;
  };
  const tmp = await tempDir('trace-cli-build-');
  t.after(() => tmp.cleanup());
  const bad = path.join(tmp.dir, 'bad.yaml');
  await writeFile(bad, 'env: {name: toy-orders}\nrollouts: {batchSize: 0}\n');
  const compiled = await trace(['run', bad]);
  assert.ok(bundleIsFresh(), 'a trace run leaves a fresh bundle');
  // A changed input (here only its mtime) makes the bundle stale; the next trace rebuilds it.
  const source = path.join(PROJECT_ROOT, 'cli', 'commands', 'demo.ts');
  const built = statSync(BUNDLE).mtimeMs;
  const changed = new Date(statSync(source).mtimeMs - 1000); // earlier, so the rebuild can record it
  utimesSync(source, changed, changed);
  assert.equal(bundleIsFresh(), false, 'stale after a source changed');
  assert.deepEqual(await trace(['run', bad]), compiled);
  assert.ok(bundleIsFresh() && statSync(BUNDLE).mtimeMs > built, 'rebuilt');
  assert.deepEqual(await trace(['run', bad], { TRACE_CLI_TSX: '1' }), compiled, 'tsx and compiled runs answer alike');
  assert.match(compiled.stderr, /^trace: bad\.yaml: rollouts\.batchSize: /);
});
