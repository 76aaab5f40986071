import { mock, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import fs, { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { EventEmitter } from 'node:events';
import { PassThrough } from 'node:stream';
import v8 from 'node:v8';
import vm from 'node:vm';
import { execa } from 'execa';
import { FATAL_REPORT_FLAGS, type ResolvedLimits } from '../envs/sandbox/isolation.js';
import { SandboxError, SandboxProcess } from '../envs/sandbox/process.js';

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;

/**
 * A child whose stdout the test writes: the worker's line splitting is what is under test, and the
 * chunks a pipe gives it (their sizes, what buffer each is cut from) are not the test's to choose
 * through a real process.
 */
function fakeChild() {
  const stdout = Object.assign(new EventEmitter(), { pause: () => {}, resume: () => {} });
  const stdin = new PassThrough();
  /** Each signal sent, and whether the child's input had ended by then. */
  const kills: { signal: string; inputEnded: boolean }[] = [];
  let exit!: (r: { signal?: string; exitCode?: number }) => void;
  const stderr = Object.assign(new EventEmitter(), { pause: () => {}, resume: () => {} });
  const child = Object.assign(new Promise<{ signal?: string; exitCode?: number }>((resolve) => (exit = resolve)), {
    stdout,
    stderr,
    exitCode: null,
    signalCode: null,
    stdin,
    kill: (signal: string) => {
      kills.push({ signal, inputEnded: stdin.writableEnded });
      exit({ signal });
      return true;
    },
  });
  return { child, stdout, stderr, kills, exit };
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

test("sandbox process: Node's fatal-error report on stdout names the death, in any chunks and past outputBytes; it is taken only at a line's start and only for a death by signal (reruns 76a-79a: a report file found no descriptor free)", async () => {
  const limits = { outputBytes: 4096, wallMs: 60_000, budgetMs: 60_000, memoryMb: 128 } as ResolvedLimits;
  const key = Buffer.alloc(32, 5);
  const header =
    '{"header":{"reportVersion":4,"event":"Allocation failed - JavaScript heap out of memory","trigger":"OOMError",';
  const dies = async (chunks: string[], death: { signal?: string; exitCode?: number }) => {
    const { child, stdout, exit } = fakeChild();
    const proc = new SandboxProcess(child as never, limits, key, (l) => `limits.${l} = ${limits[l]}`);
    const pending = proc.request('POST', '/x');
    for (const chunk of chunks) stdout.emit('data', Buffer.from(chunk));
    exit(death);
    return pending.then(
      () => assert.fail('the request was answered'),
      (e: Error & { reason?: string; limit?: string }) => e,
    );
  };
  const rest = '"filename":null},"javascriptStack":{"message":"No stack."}}\n';
  // The header cut inside its prefix, as a pipe may hand it over.
  const split = await dies([header.slice(0, 10), header.slice(10), rest], { signal: 'SIGABRT' });
  assert.equal(split.reason, 'memory', split.message);
  assert.equal(split.limit, 'memoryMb');
  assert.match(
    split.message,
    /ran out of memory \(limits\.memoryMb = 128 MiB\): Allocation failed - JavaScript heap out of memory/,
  );
  // Longer than outputBytes (its stack is the module's size), with no newline before the death.
  const long = await dies([header, '"x":"' + 'y'.repeat(3 * limits.outputBytes)], { signal: 'SIGABRT' });
  assert.equal(long.reason, 'memory', long.message);
  // A report only in the middle of a line is not Node's: the line lacks the runner's MAC.
  const inside = await dies(['00 ' + header + rest], { signal: 'SIGABRT' });
  assert.equal(inside.reason, 'protocol', inside.message);
  // Node aborts after its report: an exit by code is not the death it describes.
  const byCode = await dies([header + rest], { exitCode: 1 });
  assert.equal(byCode.reason, 'crash', byCode.message);
  // Another fatal error: a crash, quoting Node's event.
  const fatal = await dies(['{"header":{"reportVersion":4,"event":"Invalid state","trigger":"FatalError",' + rest], {
    signal: 'SIGABRT',
  });
  assert.equal(fatal.reason, 'crash', fatal.message);
  assert.match(fatal.message, /a fatal error in Node: Invalid state/);
});

test("sandbox process: V8's out-of-memory with every descriptor of RLIMIT_NOFILE in use is the memory limit: Node's report needs none (reruns 76a-79a)", async () => {
  // Node with the sandbox's report flags, every descriptor taken (the module's cap and the routes
  // past it aside), then a heap bomb.
  const bomb = `const fs = require('fs'); let n = 0; try { for (;;) { fs.openSync('/dev/null', 'r'); n++; } } catch {}
    process.stderr.write(n + ' opened\\n'); const keep = []; for (;;) keep.push(new Array(1e5).fill(n));`;
  const child = execa(
    '/bin/sh',
    [
      '-c',
      'ulimit -n 64 && exec "$@"',
      'sh',
      process.execPath,
      ...FATAL_REPORT_FLAGS,
      '--max-old-space-size=32',
      '-e',
      bomb,
    ],
    { stdin: 'pipe', stdout: 'pipe', stderr: 'pipe', buffer: false, reject: false },
  );
  const limits = { outputBytes: 1 << 20, wallMs: 600_000, budgetMs: 600_000, memoryMb: 32 } as ResolvedLimits;
  const proc = new SandboxProcess(child, limits, Buffer.alloc(32), (l) => `limits.${l} = ${limits[l]}`);
  await assert.rejects(proc.request('POST', '/x'), (e: Error & { reason?: string; limit?: string }) => {
    assert.equal(e.reason, 'memory', e.message);
    assert.equal(e.limit, 'memoryMb');
    assert.match(e.message, /killed by SIGABRT: ran out of memory .*JavaScript heap out of memory/);
    return true;
  });
  assert.match(proc.logs, /\b\d+ opened/);
});

test('sandbox process: logs past outputBytes are that limit unless the process is dying by a signal, whose last words on stderr came first (rerun 80a: a real out-of-memory read as output_limit; 82a: a native abort)', async () => {
  const limits = { outputBytes: 4096, wallMs: 60_000, budgetMs: 60_000, memoryMb: 128 } as ResolvedLimits;
  const key = Buffer.alloc(32, 6);
  const report =
    '{"header":{"reportVersion":4,"event":"Allocation failed - JavaScript heap out of memory","trigger":"OOMError"}}\n';
  const run = async (then: (f: ReturnType<typeof fakeChild>) => void) => {
    const f = fakeChild();
    const proc = new SandboxProcess(f.child as never, limits, key, (l) => `limits.${l} = ${limits[l]}`);
    const pending = proc.request('POST', '/x');
    f.stderr.emit('data', Buffer.alloc(limits.outputBytes - 100, 0x61)); // the module's, within the limit
    f.stderr.emit('data', Buffer.from('<--- Last few GCs --->\n'.repeat(10))); // Node's, past it
    then(f);
    return pending.then(
      () => assert.fail('the request was answered'),
      (e: Error & { reason?: string; limit?: string }) => e,
    );
  };
  const oom = await run(({ stdout, exit }) => {
    stdout.emit('data', Buffer.from(report));
    exit({ signal: 'SIGABRT' });
  });
  assert.equal(oom.reason, 'memory', oom.message);
  // No death: the logs limit, a moment later, and an answer meanwhile is not taken.
  const json = JSON.stringify({ id: 1, status: 200, body: 'late' });
  const logs = await run(({ stdout }) =>
    stdout.emit('data', Buffer.from(`${createHmac('sha256', key).update(json).digest('hex')} ${json}\n`)),
  );
  assert.equal(logs.reason, 'output_limit', logs.message);
  assert.equal(logs.limit, 'outputBytes');
  // Another death by signal meanwhile is named by its cause, its last words too (rerun 82a: a native
  // abort's 1 KB read as output_limit); an exit, the module's own, is the logs limit.
  const crash = await run(({ exit }) => exit({ signal: 'SIGABRT' }));
  assert.equal(crash.reason, 'crash', crash.message);
  const exited = await run(({ exit }) => exit({ exitCode: 1 }));
  assert.equal(exited.reason, 'output_limit', exited.message);
});

/**
 * A real child that writes `first` to `fd`, then floods it in 64 KiB writes, counting what got
 * into the pipe in a file of its own after each; `check` sees the request's error. Returns how many
 * bytes the flood wrote by the time the process was closed.
 */
async function flooded(fd: 1 | 2, first: string, wallMs: number, check: (e: SandboxError) => void): Promise<number> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'flood-'));
  try {
    const counter = path.join(dir, 'written');
    const flood = `const fs = require('fs'); const b = Buffer.alloc(65536, 0x61); let n = 0;
      fs.writeSync(${fd}, ${JSON.stringify(first)});
      for (;;) { n += fs.writeSync(${fd}, b); fs.writeFileSync(${JSON.stringify(counter)}, String(n)); }`;
    const child = execa(process.execPath, ['-e', flood], {
      stdin: 'pipe',
      stdout: 'pipe',
      stderr: 'pipe',
      buffer: false,
      reject: false,
    });
    const limits = { outputBytes: 1 << 20, wallMs, budgetMs: 600_000, memoryMb: 128 } as ResolvedLimits;
    const proc = new SandboxProcess(child, limits, Buffer.alloc(32), (l) => `limits.${l} = ${limits[l]}`);
    await assert.rejects(proc.request('POST', '/x'), (e: SandboxError) => {
      check(e);
      return true;
    });
    await proc.close();
    return Number(readFileSync(counter, 'utf8'));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test("sandbox process: past the logs limit the worker reads no more of stderr, and a limit that fires meanwhile is the logs limit (rerun 81a: a flood cost the worker most of a core; a request's wall clock named timeout)", async () => {
  const written = await flooded(2, 'x', 600_000, (e) => assert.equal(e.reason, 'output_limit', e.message));
  // The 1 MiB limit, what was in flight, and a pipe's worth (64 KiB here; up to 1 MiB where raised).
  assert.ok(written <= 3 * (1 << 20), `the child wrote ${written} bytes past a 1 MiB limit`);
  // A request's wall clock that runs out in that second names the logs limit, passed first.
  const { child, stderr } = fakeChild();
  const limits = { outputBytes: 4096, wallMs: 50, budgetMs: 60_000, memoryMb: 128 } as ResolvedLimits;
  const proc = new SandboxProcess(child as never, limits, Buffer.alloc(32), (l) => `limits.${l} = ${limits[l]}`);
  const pending = proc.request('POST', '/x');
  stderr.emit('data', Buffer.alloc(limits.outputBytes + 1, 0x61));
  await assert.rejects(pending, (e: Error & { reason?: string; limit?: string }) => {
    assert.equal(e.reason, 'output_limit', e.message);
    assert.equal(e.limit, 'outputBytes');
    return true;
  });
});

test("sandbox process: after Node's report begins on stdout the worker reads no more of it, and a process that lives on fails as protocol (rerun 86b: native code wrote the header, then a flood read at 0.75 of a core until a wall clock)", async () => {
  // Its wall clock runs out while the death is awaited: the death names it, here protocol.
  const header = '{"header":{"reportVersion":4,"event":"x","trigger":"OOMError"}}\n';
  const written = await flooded(1, header, 100, (e) => {
    assert.equal(e.reason, 'protocol', e.message);
    assert.match(e.message, /lived on/);
  });
  assert.ok(written <= 3 * (1 << 20), `the child wrote ${written} bytes after its report`);
});

/**
 * A real child of `script` (sh) under a SandboxProcess whose memory sample runs, with every /proc
 * file the worker reads counted by path; `check` runs while it does. `listed` may change what a
 * directory is listed as.
 */
async function sampled(
  script: string,
  check: (reads: Map<string, number>, root: number) => Promise<void>,
  listed = (_dir: string, names: string[]) => names,
) {
  const child = execa('/bin/sh', ['-c', script], {
    stdin: 'pipe',
    stdout: 'pipe',
    stderr: 'pipe',
    buffer: false,
    reject: false,
  });
  const reads = new Map<string, number>();
  const count = (p: unknown) => {
    if (typeof p === 'string' && p.startsWith('/proc/')) reads.set(p, (reads.get(p) ?? 0) + 1);
  };
  const realRead = fs.readFileSync;
  const realList = fs.readdirSync;
  const readSpy = mock.method(fs, 'readFileSync', (p: string, ...rest: [never]) => (count(p), realRead(p, ...rest)));
  const listSpy = mock.method(
    fs,
    'readdirSync',
    (p: string, ...rest: [never]) => (count(p), listed(p, realList(p, ...rest) as string[])),
  );
  syncBuiltinESMExports();
  const limits = { outputBytes: 1 << 20, wallMs: 600_000, budgetMs: 600_000, memoryMb: 128 } as ResolvedLimits;
  const proc = new SandboxProcess(child, limits, Buffer.alloc(32), (l) => `limits.${l} = ${limits[l]}`, {
    dataLimit: 1 << 30,
  });
  const pending = proc.request('POST', '/x').then(
    () => assert.fail('the request was answered'),
    (e: SandboxError) => e,
  );
  try {
    await check(reads, child.pid!);
  } finally {
    readSpy.mock.restore();
    listSpy.mock.restore();
    syncBuiltinESMExports();
    await proc.close();
  }
  assert.equal((await pending).reason, 'closed');
}

test('sandbox process: the memory sample reads a bounded number of /proc files however many processes the sandbox holds (rerun 87b: 48 sleeping forks cost the worker 0.2 of a core)', async () => {
  const sleepers = 40;
  await sampled(`for i in $(seq ${sleepers}); do sleep 600 & done; wait`, async (reads, root) => {
    // Until every sleeper's status was read once: each process is still sampled.
    const statuses = () =>
      [...reads.keys()].filter((p) => /^\/proc\/\d+\/status$/.test(p) && p !== `/proc/${root}/status`);
    while (statuses().length < sleepers) await new Promise((r) => setTimeout(r, 20));
    const samples = reads.get(`/proc/${root}/status`) ?? 0;
    const total = [...reads.values()].reduce((a, b) => a + b, 0);
    // Listing this tree reads ~80 files; every sample listing it and reading each status was ~120.
    assert.ok(total / samples < 30, `${total} reads of /proc in ${samples} samples of ${sleepers + 1} processes`);
  });
});

test("sandbox process: the memory sample lists the tree each time while it is shorter than the chain down to node (rerun 88a: a first listing of bwrap's two left node unread for 100 ms)", async () => {
  // exec: the tree is this one process for as long as it lives.
  await sampled('exec sleep 600', async (reads, root) => {
    while ((reads.get(`/proc/${root}/status`) ?? 0) < 20) await new Promise((r) => setTimeout(r, 20));
    const samples = reads.get(`/proc/${root}/status`)!;
    const listings = reads.get(`/proc/${root}/task`) ?? 0;
    assert.ok(listings >= samples - 1, `${listings} listings of the tree in ${samples} samples`);
  });
});

test("sandbox process: a thread that ended between the listing of its process and the read of its children hides no other thread's children (rerun 88b)", async () => {
  const ended = '4194304'; // past any pid_max: a thread no longer there
  const listed = (dir: string, names: string[]) => (/^\/proc\/\d+\/task$/.test(dir) ? [ended, ...names] : names);
  await sampled(
    'for i in 1 2 3; do sleep 600 & done; wait',
    async (reads, root) => {
      // Three listings of the tree: the sleepers were in the second at the latest.
      while ((reads.get(`/proc/${root}/status`) ?? 0) < 3 * 10) await new Promise((r) => setTimeout(r, 20));
      const read = [...reads.keys()].filter((p) => /^\/proc\/\d+\/status$/.test(p) && p !== `/proc/${root}/status`);
      assert.equal(read.length, 3, `statuses read: ${read.join(', ')}`);
    },
    listed,
  );
});
