import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { PassThrough } from 'node:stream';
import v8 from 'node:v8';
import vm from 'node:vm';
import type { ResolvedLimits } from '../envs/sandbox/isolation.js';
import { SandboxProcess } from '../envs/sandbox/process.js';

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;

/**
 * A child whose stdout the test writes: the worker's line splitting is what is under test, and the
 * chunks a pipe gives it (their sizes, what buffer each is cut from) are not the test's to choose
 * through a real process.
 */
function fakeChild() {
  const stdout = new EventEmitter();
  const child = Object.assign(new Promise<never>(() => {}), {
    stdout,
    stderr: new EventEmitter(),
    stdin: new PassThrough(),
  });
  return { child, stdout };
}

test("sandbox stdout: a line written a byte at a time keeps its bytes, not each chunk's buffer (rerun 41b: 67 MiB of the worker's heap for 2.5 MB)", () => {
  const { child, stdout } = fakeChild();
  const limits = { outputBytes: 4 * 1024 * 1024 } as ResolvedLimits;
  new SandboxProcess(child as never, limits, Buffer.alloc(32), (l) => String(l));
  gc();
  const before = process.memoryUsage().arrayBuffers;
  // Each chunk a byte cut from a buffer of its own, as a pipe read hands them over.
  for (let i = 0; i < 5000; i++) stdout.emit('data', Buffer.alloc(8192, 120).subarray(0, 1));
  gc();
  const grown = process.memoryUsage().arrayBuffers - before;
  assert.ok(
    grown < 4 * 1024 * 1024,
    `5 000 bytes pending held ${(grown / 2 ** 20).toFixed(1)} MiB (40 MiB when each chunk's buffer was kept)`,
  );
});
