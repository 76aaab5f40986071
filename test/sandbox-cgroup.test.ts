import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { execa } from 'execa';
import { DEFAULT_LIMITS, sandboxIsolation, startSandboxedEnv } from '../envs/sandbox/index.js';
import { cgroupSupport, ownCgroups, SandboxCgroup, type CgroupControl } from '../envs/sandbox/cgroup.js';
import {
  allocateUid,
  cgroupMemoryBytes,
  makeSandboxDir,
  sandboxCommand,
  type ResolvedLimits,
} from '../envs/sandbox/isolation.js';
import { SandboxError, SandboxProcess } from '../envs/sandbox/process.js';
import { ATTACK, attackSource } from './fixtures/sandbox/attack-source.js';
import { alive, descendants } from './helpers/processes.js';

/**
 * Stands in for a sandbox runner taken over by native code: it speaks the runner's protocol (the
 * session key, then signed answers), unconfined but for its cgroup, and on `/leave` starts a CPU
 * spinner whose parent exits at once (it leaves the process tree), on `/fork` starts processes past
 * the process limit and exits, on `/hold` runs the epoll program with 5 M watches and answers once
 * they are made, and on `/kernel-memory` runs it with no bound.
 */
const RUNNER = `
import { createHmac } from 'node:crypto';
import { execFileSync, spawn } from 'node:child_process';
import readline from 'node:readline';
let key;
const send = (o) => {
  const json = JSON.stringify(o);
  process.stdout.write(createHmac('sha256', key).update(json).digest('hex') + ' ' + json + '\\n');
};
readline.createInterface({ input: process.stdin }).on('line', (line) => {
  if (!key) return void (key = Buffer.from(line, 'hex'));
  const req = JSON.parse(line.slice(65));
  if (req.path === '/leave') {
    const out = execFileSync('/bin/sh', ['-c', 'sh -c "while :; do :; done" >/dev/null 2>&1 & echo $!']);
    send({ id: req.id, status: 200, body: { pid: Number(String(out).trim()) } });
  } else if (req.path === '/fork') {
    for (let i = 0; i < 200; i++) spawn('/bin/sleep', ['100'], { stdio: 'ignore' }).on('error', () => {});
    setTimeout(() => process.exit(1), 500);
  } else if (req.path === '/hold') {
    const child = spawn(process.argv[2], ['5000000'], { stdio: ['ignore', 'pipe', 'ignore'] });
    child.stdout.once('data', () => send({ id: req.id, status: 200, body: { pid: child.pid } }));
  } else {
    spawn(process.argv[2], { stdio: 'ignore' }).on('exit', (code, signal) =>
      send({ id: req.id, status: 200, body: { code, signal } }),
    );
  }
});
`;

/**
 * Adds epoll watches (each eventfd in many epoll instances): as many as its argument says, then
 * prints `ready` and waits; with no argument, until a call fails (it exits 0 then).
 */
const EPOLL_C = `#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>
int main(int argc, char **argv) {
  long want = argc > 1 ? atol(argv[1]) : -1;
  struct rlimit r = {65536, 65536};
  setrlimit(RLIMIT_NOFILE, &r);
  int events[1000];
  for (int i = 0; i < 1000; i++) events[i] = eventfd(0, 0);
  for (long made = 0; want < 0 || made < want;) {
    int ep = epoll_create1(0);
    if (ep < 0) return 0;
    for (int i = 0; i < 1000 && (want < 0 || made < want); i++, made++) {
      struct epoll_event e = {EPOLLIN, {0}};
      if (epoll_ctl(ep, EPOLL_CTL_ADD, events[i], &e)) return 0;
    }
  }
  printf("ready\\n");
  fflush(stdout);
  pause();
}
`;

/** The epoll program, compiled in `dir`; undefined without a C compiler. */
function compileEpoll(dir: string): string | undefined {
  writeFileSync(path.join(dir, 'epoll.c'), EPOLL_C);
  const cc = spawnSync('cc', ['-O1', '-o', path.join(dir, 'epoll'), path.join(dir, 'epoll.c')]);
  return cc.error || cc.status !== 0 ? undefined : path.join(dir, 'epoll');
}

const LIMITS = {
  memoryMb: 1,
  diskMb: 1,
  maxProcesses: 64,
  wallMs: 120_000,
  budgetMs: 600_000,
  outputBytes: 1 << 20,
} as ResolvedLimits;

/** The runner in a cgroup of its own, joined as startGeneration joins a sandbox (undefined: no cgroup here). */
async function runnerInCgroup(dir: string, needs: CgroupControl[], program = '/bin/true', limits = LIMITS) {
  const support = await cgroupSupport();
  if (!needs.every((c) => support.controls.some((x) => x.control === c))) return undefined;
  const cgroup = await SandboxCgroup.create(support, {
    memoryBytes: cgroupMemoryBytes(limits),
    pids: limits.maxProcesses,
  });
  writeFileSync(path.join(dir, 'runner.mjs'), RUNNER);
  const child = execa('/bin/sh', ['-c', 'read -r _ && exec "$@"', 'sh', process.execPath, 'runner.mjs', program], {
    cwd: dir,
    stdin: 'pipe',
    stdout: 'pipe',
    stderr: 'pipe',
    buffer: false,
    reject: false,
  });
  cgroup.join(child.pid!);
  child.stdin!.write('\n');
  const proc = new SandboxProcess(child, limits, Buffer.alloc(32, 7), (l) => `limits.${l} = ${limits[l]}`, {
    cgroup,
  });
  return { proc, cgroup };
}

/** A SandboxError for `reason`, naming `limit`, its message matching. */
const failedAt = (reason: string, limit: string, message: RegExp) => (err: unknown) => {
  assert.ok(err instanceof SandboxError, String(err));
  assert.equal(err.reason, reason, err.message);
  assert.equal(err.limit, limit);
  assert.match(err.message, message);
  return true;
};

const cpuTicks = (pid: number) => {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return Number(fields[11]) + Number(fields[12]);
};

test('cgroup: a process that left the sandbox tree is stopped between requests, its CPU counted, and killed with the sandbox (reruns 72z, 73b: signals stopped only the tree, and a signal undid it)', async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'cgroup-leave-'));
  const started = await runnerInCgroup(dir, ['freeze', 'cpu']);
  if (!started) {
    rmSync(dir, { recursive: true, force: true });
    return t.skip('no cgroup freezer and CPU count the worker may use here');
  }
  const { proc } = started;
  let spinner = 0;
  try {
    spinner = ((await proc.request('POST', '/leave')).body as { pid: number }).pid;
    assert.ok(spinner > 0 && alive(spinner), 'the spinner did not start');
    assert.ok(proc.stopped, 'the sandbox was not stopped after its answer');
    // Stopped: its CPU does not move (a running spinner adds ~50 ticks in 0.5 s).
    await sleep(100);
    const before = cpuTicks(spinner);
    await sleep(500);
    assert.equal(cpuTicks(spinner), before, 'the spinner outside the tree ran while the sandbox was stopped');
    // Its CPU is the sandbox's, though no process of the tree is its parent.
    assert.ok(
      proc.cpuSeconds() >= before / 100,
      `${proc.cpuSeconds()} s counted; the spinner alone used ${before / 100} s`,
    );
  } finally {
    await proc.close();
    for (let i = 0; i < 400 && spinner && alive(spinner); i++) await sleep(25);
    rmSync(dir, { recursive: true, force: true });
  }
  assert.equal(alive(spinner), false, 'the spinner outlived close()');
});

test('cgroup: memory the kernel holds for the sandbox counts against its limit, and reaching it names memoryMb (rerun 73b: 1 GiB of epoll watches past every limit)', async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'cgroup-kmem-'));
  try {
    const epoll = compileEpoll(dir);
    if (!epoll) return t.skip('no C compiler on this machine');
    const started = await runnerInCgroup(dir, ['memory'], epoll);
    if (!started) return t.skip('no cgroup memory controller the worker may use here');
    const { proc } = started;
    try {
      await assert.rejects(
        proc.request('POST', '/kernel-memory'),
        failedAt('memory', 'memoryMb', /limits\.memoryMb = 1 MiB.*for the kernel/),
      );
    } finally {
      await proc.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('cgroup: a sandboxed env runs in a cgroup of its own, frozen between requests, removed when closed', async (t) => {
  const support = await cgroupSupport();
  if (!support.hierarchies.length) return t.skip('no cgroup the worker may make here');
  const sandboxGroups = () =>
    support.hierarchies.flatMap((h) =>
      readdirSync(h.dir)
        .filter((name) => name.startsWith(`trace-sandbox-`) && !name.includes('probe'))
        .map((name) => ({ ...h, dir: path.join(h.dir, name) })),
    );
  const before = new Set(sandboxGroups().map((g) => g.dir));
  const env = await startSandboxedEnv({ source: attackSource("return 'up'") });
  assert.deepEqual(
    env.isolation.cgroup,
    support.controls.map((c) => c.control),
  );
  assert.match(env.isolation.summary, /a cgroup per sandbox \(/);
  let groups: ReturnType<typeof sandboxGroups> = [];
  try {
    const ep = await env.reset({ taskId: 'attack' });
    assert.equal((await ep.step(ATTACK)).observation.content, 'up');
    // This test's sandbox: other workers on the machine (a CI run) make cgroups of their own.
    const ours = new Set(descendants(process.pid).map(String));
    groups = sandboxGroups().filter(
      (g) =>
        !before.has(g.dir) &&
        readFileSync(path.join(g.dir, 'cgroup.procs'), 'utf8')
          .split('\n')
          .some((pid) => ours.has(pid)),
    );
    assert.equal(groups.length, support.hierarchies.length, JSON.stringify(groups));
    const freezer = groups.find((g) => g.controls.includes('freeze'));
    if (freezer) {
      const frozen = () =>
        freezer.version === 2
          ? /^frozen 1$/m.test(readFileSync(path.join(freezer.dir, 'cgroup.events'), 'utf8'))
          : readFileSync(path.join(freezer.dir, 'freezer.state'), 'utf8').trim() === 'FROZEN';
      for (let i = 0; i < 400 && !frozen(); i++) await sleep(25);
      assert.ok(frozen(), 'the cgroup was not frozen between requests');
    }
  } finally {
    await env.close();
  }
  for (const g of groups) assert.equal(existsSync(g.dir), false, `${g.dir} was left behind`);
});

test("cgroup: the worker's own cgroup dir is found under each hierarchy's mount, relative to the cgroup the mount shows", () => {
  // This project's machines: v1 controllers at the root but memory, an empty v2 hierarchy.
  const vm = ownCgroups(
    [
      '31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755',
      '33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct',
      '35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory',
      '37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer',
      '41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw',
    ].join('\n'),
    '6:freezer:/\n4:memory:/process_api/93f6\n2:cpuacct:/\n0::/\n',
  );
  assert.deepEqual(vm, [
    { version: 1, dir: '/sys/fs/cgroup/cpuacct', controllers: ['rw', 'cpuacct'] },
    { version: 1, dir: '/sys/fs/cgroup/memory/process_api/93f6', controllers: ['rw', 'memory'] },
    { version: 1, dir: '/sys/fs/cgroup/freezer', controllers: ['rw', 'freezer'] },
    { version: 2, dir: '/sys/fs/cgroup/unified', controllers: [] },
  ]);
  // A container: v2 only, its mount showing its own subtree, which /proc/self/cgroup names in full
  // (no cgroup namespace) or as / (its own namespace); a cgroup outside what the mount shows has no dir.
  const mountinfo = '1229 1228 0:27 /docker/abc /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate';
  assert.deepEqual(ownCgroups(mountinfo, '0::/docker/abc/worker\n'), [
    { version: 2, dir: '/sys/fs/cgroup/worker', controllers: [] },
  ]);
  assert.deepEqual(ownCgroups(mountinfo.replace('/docker/abc', '/'), '0::/\n'), [
    { version: 2, dir: '/sys/fs/cgroup', controllers: [] },
  ]);
  assert.deepEqual(ownCgroups(mountinfo, '0::/system.slice/other\n'), []);
});

test("cgroup: close() counts the CPU the kernel spends tearing the sandbox's processes down (rerun 74b: 3-5 s freeing epoll watches after the kill went uncounted)", async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'cgroup-teardown-'));
  try {
    const epoll = compileEpoll(dir);
    if (!epoll) return t.skip('no C compiler on this machine');
    // Room for the 5 M watches (~1 GiB of slab) under the memory limit.
    const started = await runnerInCgroup(dir, ['cpu'], epoll, { ...LIMITS, memoryMb: 1024 });
    if (!started) return t.skip('no cgroup CPU count the worker may use here');
    const { proc } = started;
    const holder = ((await proc.request('POST', '/hold')).body as { pid: number }).pid;
    const before = proc.cpuSeconds();
    await proc.close();
    // Done with: the kernel has freed what it held, and charged the sandbox for it.
    assert.equal(alive(holder), false, 'close() returned while a process of the sandbox was still being torn down');
    assert.ok(proc.cpuSeconds() > before, `${proc.cpuSeconds()} s counted after close, ${before} s before it`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('cgroup: a process that dies after the cgroup refused a fork names maxProcesses (rerun 74b: a crash, or nothing)', async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'cgroup-pids-'));
  const started = await runnerInCgroup(dir, ['pids']);
  if (!started) {
    rmSync(dir, { recursive: true, force: true });
    return t.skip('no cgroup pids controller the worker may use here');
  }
  const { proc } = started;
  try {
    await assert.rejects(
      proc.request('POST', '/fork'),
      failedAt('permission', 'maxProcesses', /process limit reached \(limits\.maxProcesses = 64\)/),
    );
  } finally {
    await proc.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

/** Forks children that wait, until a fork fails: prints `refused <forks made> <errno>`. */
const FORK_C = `#include <errno.h>
#include <stdio.h>
#include <unistd.h>
int main(void) {
  for (int i = 0; i < 1000; i++) {
    pid_t pid = fork();
    if (pid == 0) { pause(); _exit(0); }
    if (pid < 0) { printf("refused %d %d\\n", i, errno); return 0; }
  }
  printf("all\\n");
  return 0;
}
`;

test("cgroup: at the bwrap level with a uid of its own, the cgroup refuses the fork past maxProcesses, not the uid's limit, so its refusal can be named (rerun 75b: RLIMIT_NPROC refused first)", async (t) => {
  const iso = await sandboxIsolation();
  const support = await cgroupSupport();
  if (iso.level !== 'bwrap' || !iso.dedicatedUid || !support.controls.some((c) => c.control === 'pids'))
    return t.skip('no bwrap level with a dedicated uid and a pids cgroup here');
  // A static binary stands for code that escaped V8, run by the sandbox's own command line in node's place.
  const build = mkdtempSync(path.join(os.tmpdir(), 'fork-probe-'));
  const uid = allocateUid();
  const { root, runDir } = await makeSandboxDir(uid);
  const cgroup = await SandboxCgroup.create(support, { memoryBytes: cgroupMemoryBytes(DEFAULT_LIMITS), pids: 64 });
  try {
    writeFileSync(path.join(build, 'fork.c'), FORK_C);
    const cc = spawnSync('cc', ['-static', '-O1', '-o', path.join(build, 'fork'), path.join(build, 'fork.c')]);
    if (cc.error || cc.status !== 0) return t.skip('no C compiler with a static libc on this machine');
    writeFileSync(path.join(runDir, 'fork'), readFileSync(path.join(build, 'fork')), { mode: 0o755 });
    const cmd = sandboxCommand('bwrap', {
      runDir,
      entry: 'fork',
      limits: { ...DEFAULT_LIMITS, maxProcesses: 64 },
      uid,
      prlimit: iso.rlimits,
      fileCountLimit: iso.fileCountLimit,
      cgroupGate: true,
      pidsCgroup: true,
    });
    const args = cmd.args.slice(0, cmd.args.lastIndexOf(process.execPath));
    const run = execa(cmd.file, [...args, '/sandbox/fork'], {
      cwd: runDir,
      env: {},
      extendEnv: false,
      uid: cmd.uid,
      gid: cmd.gid,
      stdin: 'pipe',
      reject: false,
    });
    cgroup.join(run.pid!);
    run.stdin!.write('\n');
    const out = await run;
    assert.match(String(out.stdout), new RegExp(`^refused \\d+ ${os.constants.errno.EAGAIN}$`), String(out.stderr));
    assert.ok(cgroup.pidsLimited(), `the uid's limit refused the fork, not the cgroup (${out.stdout})`);
  } finally {
    await cgroup.remove();
    rmSync(root, { recursive: true, force: true });
    rmSync(build, { recursive: true, force: true });
  }
});
