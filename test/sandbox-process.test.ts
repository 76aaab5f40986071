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
  const stdin = new PassThrough();
  /** Each signal sent, and whether the child's input had ended by then. */
  const kills: { signal: string; inputEnded: boolean }[] = [];
  let exit!: (r: { signal: string }) => void;
  const child = Object.assign(new Promise<{ signal: string }>((resolve) => (exit = resolve)), {
    stdout,
    stderr: new EventEmitter(),
    stdin,
    kill: (signal: string) => {
      kills.push({ signal, inputEnded: stdin.writableEnded });
      exit({ signal });
      return true;
    },
  });
  return { child, stdout, kills };
}

test("sandbox process: a line written a byte at a time keeps its bytes, not each chunk's buffer (rerun 41b: 67 MiB of the worker's heap for 2.5 MB)", () => {
  const { child, stdout } = fakeChild();
  const limits = { outputBytes: 4 * 1024 * 1024 } as ResolvedLimits;
  new SandboxProcess(child as never, limits, Buffer.alloc(32), (l) => String(l));
  gc();
  const before = process.memoryUsage().arrayBuffers;
  // Each chunk a byte cut from a buffer of its own, as a pipe read hands them over.
  for (let i = 0; i < 10_000; i++) stdout.emit('data', Buffer.alloc(8192, 120).subarray(0, 1));
  gc();
  const grown = process.memoryUsage().arrayBuffers - before;
  assert.ok(
    grown < 20 * 1024 * 1024,
    `10 000 bytes pending held ${(grown / 2 ** 20).toFixed(1)} MiB (80 MiB when each chunk's buffer was kept)`,
  );
});

test('sandbox process: close kills the process as it is, not after letting it see its input end (rerun 42b: a second of CPU no reading counted)', async () => {
  const { child, kills } = fakeChild();
  const proc = new SandboxProcess(child as never, { outputBytes: 1024 } as ResolvedLimits, Buffer.alloc(32), String);
  await proc.close();
  assert.deepEqual(kills, [{ signal: 'SIGKILL', inputEnded: false }]);
  assert.equal(proc.dead?.reason, 'closed');
});
