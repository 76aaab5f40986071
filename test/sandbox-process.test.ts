import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
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

test("sandbox process: a line written a byte at a time keeps its bytes, not each chunk's buffer (rerun 41b: 67 MiB of the worker's heap for 2.5 MB)", async () => {
  const { child, stdout } = fakeChild();
  const limits = { outputBytes: 4 * 1024 * 1024 } as ResolvedLimits;
  const proc = new SandboxProcess(child as never, limits, Buffer.alloc(32), (l) => String(l));
  // Whether a chunk's buffer is still reachable, not a process-wide byte count: V8 frees array
  // buffers on a background thread, so a count read right after gc() can lag on a busy machine.
  const chunkBuffers: WeakRef<ArrayBuffer>[] = [];
  for (let i = 0; i < 10_000; i++) {
    // Each chunk a byte cut from a buffer of its own, as a pipe read hands them over.
    const chunk = Buffer.alloc(8192, 120).subarray(0, 1);
    if (i % 100 === 0) chunkBuffers.push(new WeakRef(chunk.buffer as ArrayBuffer));
    stdout.emit('data', chunk);
  }
  // A WeakRef holds its target to the end of the job that made it: collect in a later turn.
  await new Promise((resolve) => setImmediate(resolve));
  gc();
  const kept = chunkBuffers.filter((ref) => ref.deref() !== undefined).length;
  assert.equal(kept, 0, `${kept} of ${chunkBuffers.length} sampled 8 KiB chunk buffers are still held`);
  // The process is used after the collection, so what it holds was reachable through it.
  assert.equal(proc.dead, undefined, 'the 10 000 pending bytes are within outputBytes');
});

test('sandbox process: close kills the process as it is, not after letting it see its input end (rerun 42b: a second of CPU no reading counted)', async () => {
  const { child, kills } = fakeChild();
  const proc = new SandboxProcess(child as never, { outputBytes: 1024 } as ResolvedLimits, Buffer.alloc(32), String);
  await proc.close();
  assert.deepEqual(kills, [{ signal: 'SIGKILL', inputEnded: false }]);
  assert.equal(proc.dead?.reason, 'closed');
});

test("sandbox process: an error answer's type is looked up as the worker's own entry, so `__proto__` or an unknown type is no limit (rerun 72i)", async () => {
  const { child, stdout } = fakeChild();
  const key = Buffer.alloc(32, 3);
  const proc = new SandboxProcess(
    child as never,
    { outputBytes: 1 << 20, wallMs: 60_000, budgetMs: 60_000 } as ResolvedLimits,
    key,
    String,
  );
  for (const [id, type] of [
    [1, '__proto__'],
    [2, 'constructor'],
    [3, 'no_such_type'],
  ] as const) {
    const pending = proc.request('POST', '/x');
    const json = JSON.stringify({ id, status: 500, body: { error: { type, message: 'forged' } } });
    stdout.emit('data', Buffer.from(`${createHmac('sha256', key).update(json).digest('hex')} ${json}\n`));
    await assert.rejects(pending, (e: Error & { reason?: string; limit?: string }) => {
      assert.equal(e.reason, 'protocol', `${type}: ${e.message}`);
      assert.equal(e.limit, undefined);
      return true;
    });
  }
  assert.equal(proc.dead, undefined, 'a forged type is not fatal');
});
