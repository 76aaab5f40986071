import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { TEMPORAL_BINARY, devServerDeath, isTemporalHealthy, startTemporalDevServer } from '../infra/temporal.js';
import { tempDir } from './helpers/temporal.js';

const PANIC = [
  'panic: listen tcp 127.0.0.1:41433: bind: address already in use',
  '',
  'goroutine 1 [running]:',
  'main.main()',
  '\t/home/runner/work/cli/cli/cmd/temporal/main.go:18 +0x1a5',
].join('\n');

/** A stand-in for the CLI that counts its starts and panics as Go does for the first `panics` of them, then is the real one. */
function flakyCli(dir: string, panics: number): { binary: string; starts: () => number } {
  const count = path.join(dir, 'starts');
  writeFileSync(count, '');
  const binary = path.join(dir, 'temporal');
  writeFileSync(
    binary,
    `#!/bin/sh
echo x >> '${count}'
if [ "$(wc -l < '${count}')" -le ${panics} ]; then printf '%s\\n' '${PANIC.replace(/\t/g, '    ')}' >&2; exit 2; fi
exec '${TEMPORAL_BINARY}' "$@"
`,
  );
  chmodSync(binary, 0o755);
  return { binary, starts: () => readFileSync(count, 'utf8').split('\n').filter(Boolean).length };
}

test('dev server: one that dies before it answers on a picked port is started again on another (CI: a server panicked at start, exit 2)', async () => {
  const tmp = await tempDir('devserver-');
  try {
    const cli = flakyCli(tmp.dir, 1);
    const server = await startTemporalDevServer({
      port: 0,
      uiPort: false,
      binary: cli.binary,
      dbFile: path.join(tmp.dir, 't.db'),
    });
    try {
      assert.equal(cli.starts(), 2);
      assert.equal(
        await isTemporalHealthy({ address: server.address, namespace: 'default', embedded: true, uiBase: '' }),
        true,
      );
    } finally {
      await server.stop();
    }
  } finally {
    await tmp.cleanup();
  }
});

test("dev server: one that keeps dying is a one-line error quoting Go's panic, not its stack's last frame", async () => {
  const tmp = await tempDir('devserver-');
  try {
    const cli = flakyCli(tmp.dir, 99);
    await assert.rejects(
      startTemporalDevServer({ port: 0, uiPort: false, binary: cli.binary, dbFile: path.join(tmp.dir, 't.db') }),
      /^Error: temporal server start-dev exited with 2 before becoming healthy: panic: listen tcp 127\.0\.0\.1:41433: bind: address already in use$/,
    );
    assert.equal(cli.starts(), 3);
  } finally {
    await tmp.cleanup();
  }
});

test('dev server: the death line is the panic, then an error line, else the last line', () => {
  assert.equal(devServerDeath(PANIC), 'panic: listen tcp 127.0.0.1:41433: bind: address already in use');
  assert.equal(
    devServerDeath('{"level":"warn","msg":"a"}\nError: can\'t set frontend port 1: in use\n'),
    "Error: can't set frontend port 1: in use",
  );
  assert.equal(
    devServerDeath('{"level":"fatal","msg":"no db"}\n{"level":"warn","msg":"b"}'),
    '{"level":"fatal","msg":"no db"}',
  );
  assert.equal(devServerDeath('one\ntwo\n\n'), 'two');
  assert.equal(devServerDeath(''), '(it wrote nothing)');
});
