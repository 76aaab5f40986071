import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import {
  ALLOWED_SOCKET_DOMAIN,
  FILE_LOCKS,
  PR_SET_PDEATHSIG,
  PR_SET_SECCOMP,
  RET_ALLOW,
  RET_DONE,
  RET_ENOSYS,
  SIGCONT,
  RET_EPERM,
  SYSCALL_TABLES,
  seccompDenied,
  seccompProgram,
} from '../envs/sandbox/seccomp.js';

/**
 * The seccomp program per architecture, run through a classic-BPF interpreter (the subset the
 * filter uses) on the seccomp_data the kernel would pass, so the arm64 filter is checked on an
 * x86-64 machine too. The live filter is checked in sandbox-hardening (Seccomp: 2 in /proc).
 */
function runFilter(program: Buffer, arch: number, nr: number, ...args: number[]): number {
  let acc = 0;
  for (let pc = 0; pc < program.length / 8;) {
    const code = program.readUInt16LE(pc * 8);
    const jt = program.readUInt8(pc * 8 + 2);
    const jf = program.readUInt8(pc * 8 + 3);
    const k = program.readUInt32LE(pc * 8 + 4);
    if (code === 0x20)
      acc =
        k === 0
          ? nr
          : k === 4
            ? arch
            : k >= 16 && k % 8 === 0
              ? (args[(k - 16) / 8] ?? 0)
              : assert.fail(`load of offset ${k}`);
    else if (code === 0x15) pc += acc === k ? jt : jf;
    else if (code === 0x35) pc += acc >= k ? jt : jf;
    else if (code === 0x54) acc = (acc & k) >>> 0;
    else if (code === 0x06) return k;
    else assert.fail(`opcode ${code.toString(16)}`);
    pc += 1;
  }
  return assert.fail('the program ran off its end');
}

// Calls every node process makes (read, write, openat, close, mmap, futex, epoll wait, clone, exit_group).
const NEEDED = {
  x64: [0, 1, 257, 3, 9, 202, 232, 56, 231],
  arm64: [63, 64, 56, 57, 222, 98, 22, 220, 94],
} as const;
const AUDIT_I386 = 0x40000003;
const AUDIT_ARM = 0x40000028;

for (const arch of ['x64', 'arm64'] as const) {
  test(`seccomp (${arch}): denied calls fail with EPERM, node's own calls pass, a foreign ABI fails`, () => {
    const table = SYSCALL_TABLES[arch]!;
    const program = seccompProgram(arch)!;
    for (const [name, nr] of Object.entries(table.denied))
      assert.equal(runFilter(program, table.audit, nr), RET_EPERM, name);
    for (const nr of NEEDED[arch]) assert.equal(runFilter(program, table.audit, nr), RET_ALLOW, `syscall ${nr}`);
    for (const foreign of [
      AUDIT_I386,
      AUDIT_ARM,
      arch === 'x64' ? SYSCALL_TABLES.arm64!.audit : SYSCALL_TABLES.x64!.audit,
    ]) {
      assert.equal(runFilter(program, foreign, NEEDED[arch][0]), RET_EPERM, `arch ${foreign.toString(16)}`);
    }
    if (arch === 'x64') assert.equal(runFilter(program, table.audit, 0x40000000 | 1), RET_EPERM, 'x32 write');
    // Unix sockets pass; IP, netlink, packet, AF_ALG and vsock ones (rerun 72v) are refused.
    const { socket, socketpair, prctl } = table.byArgument;
    for (const call of [socket, socketpair]) {
      assert.equal(runFilter(program, table.audit, call, ALLOWED_SOCKET_DOMAIN), RET_ALLOW, `${call}: unix`);
      for (const domain of [0, 2, 10, 16, 17, 38, 40, 41])
        assert.equal(runFilter(program, table.audit, call, domain), RET_EPERM, `${call}: domain ${domain}`);
    }
    assert.equal(runFilter(program, table.audit, NEEDED[arch][0], 2), RET_ALLOW, 'an argument 2 to another call');
    // prctl: the parent-death signal (rerun 72x) and a filter of its own (rerun 80b, as `seccomp`
    // is) are refused; node names its threads (PR_SET_NAME).
    assert.equal(runFilter(program, table.audit, prctl, PR_SET_PDEATHSIG), RET_EPERM, 'PR_SET_PDEATHSIG');
    assert.equal(runFilter(program, table.audit, prctl, PR_SET_SECCOMP), RET_EPERM, 'PR_SET_SECCOMP');
    assert.ok('seccomp' in table.denied);
    assert.equal(runFilter(program, table.audit, prctl, 15), RET_ALLOW, 'PR_SET_NAME');
    // The sync calls return 0 and do nothing (rerun 80b: sync() flushed the host's disks on kworkers).
    assert.deepEqual(Object.keys(table.ignored).sort(), ['fdatasync', 'fsync', 'sync', 'sync_file_range', 'syncfs']);
    for (const [name, nr] of Object.entries(table.ignored))
      assert.equal(runFilter(program, table.audit, nr), RET_DONE, name);
    assert.equal(runFilter(program, table.audit, NEEDED[arch][0], PR_SET_PDEATHSIG), RET_ALLOW, 'an argument 1');
    // SIGCONT is refused whichever call sends it, at its own argument (rerun 72z); other signals pass.
    for (const [call, arg] of [
      ['kill', 1],
      ['tkill', 1],
      ['tgkill', 2],
      ['rt_sigqueueinfo', 1],
      ['rt_tgsigqueueinfo', 2],
      ['pidfd_send_signal', 1],
    ] as const) {
      const at = (signal: number) => Array.from({ length: 3 }, (_, i) => (i === arg ? signal : 1));
      assert.equal(
        runFilter(program, table.audit, table.byArgument[call], ...at(SIGCONT)),
        RET_EPERM,
        `${call} SIGCONT`,
      );
      assert.equal(runFilter(program, table.audit, table.byArgument[call], ...at(6)), RET_ALLOW, `${call} SIGABRT`);
    }
    // Nor from the kernel for the sandbox: a fd's ready signal, a clone's exit signal; clone3 hides its own.
    const { fcntl, clone, clone3 } = table.byArgument;
    assert.equal(runFilter(program, table.audit, fcntl, 3, 10), RET_EPERM, 'fcntl F_SETSIG');
    assert.equal(runFilter(program, table.audit, fcntl, 3, 2), RET_ALLOW, 'fcntl F_SETFD');
    // F_GETFL with whatever a register held as its third argument (rerun 82b: node aborted 29 of 60).
    assert.equal(runFilter(program, table.audit, fcntl, 0, 3, 0xffffffff), RET_ALLOW, 'fcntl F_GETFL');
    // Record locks on files every sandbox shares (rerun 81b), as flock and inotify are.
    for (const command of FILE_LOCKS)
      assert.equal(runFilter(program, table.audit, fcntl, 3, command), RET_EPERM, `fcntl ${command}`);
    for (const call of ['flock', 'inotify_init1', 'inotify_add_watch', 'fanotify_init'])
      assert.equal(runFilter(program, table.audit, table.denied[call]), RET_EPERM, call);
    // O_DIRECT, by open or fcntl(F_SETFL), reads the host's disk past its cache (rerun 81b); the
    // flags node uses pass (O_CLOEXEC, O_NONBLOCK, O_DIRECTORY, and O_RDWR | O_CREAT | O_TRUNC).
    const { flag } = table.direct;
    const O_DIRECTORY = arch === 'x64' ? 0o200000 : 0o40000;
    for (const [name, [nr, arg, command]] of Object.entries(table.direct.calls)) {
      const at = (value: number, cmd = command ?? 3) =>
        Array.from({ length: arg + 1 }, (_, i) => (i === arg ? value : i === 1 ? cmd : 3));
      assert.equal(runFilter(program, table.audit, nr, ...at(flag | 0o2000000)), RET_EPERM, `${name} O_DIRECT`);
      for (const other of [0o2000000, 0o4000, O_DIRECTORY, 0o1102])
        assert.equal(runFilter(program, table.audit, nr, ...at(other)), RET_ALLOW, `${name} ${other.toString(8)}`);
      // fcntl's third argument means nothing to other commands: glibc's F_GETFL passes whatever a
      // register held, and node aborted when it failed (rerun 82b: 29 of 60 starts).
      if (command !== undefined)
        for (const other of [1, 2, 3, 1030])
          assert.equal(runFilter(program, table.audit, nr, ...at(~0, other)), RET_ALLOW, `${name} command ${other}`);
    }
    for (const call of ['fadvise64', 'preadv2', 'pwritev2', 'openat2'])
      assert.equal(runFilter(program, table.audit, table.denied[call]), RET_EPERM, call);
    assert.equal(runFilter(program, table.audit, clone, 0x100 | SIGCONT), RET_EPERM, 'clone exiting with SIGCONT');
    assert.equal(runFilter(program, table.audit, clone, 0x3d0f00), RET_ALLOW, "clone of a thread (glibc's flags)");
    assert.equal(runFilter(program, table.audit, clone, 17), RET_ALLOW, 'clone exiting with SIGCHLD');
    assert.equal(runFilter(program, table.audit, clone3, 0), RET_ENOSYS, 'clone3');
  });
}

test('seccomp: arm64 refuses what x86-64 refuses, less the x86-only calls; other architectures get no filter', () => {
  const x86Only = ['uselib', 'iopl', 'ioperm', 'inotify_init'];
  assert.deepEqual(
    seccompDenied('arm64').sort(),
    seccompDenied('x64')
      .filter((n) => !x86Only.includes(n))
      .sort(),
  );
  assert.equal(seccompProgram('ppc64'), undefined);
  assert.deepEqual(seccompDenied('ppc64'), []);
});

test("seccomp: syscall numbers agree with this machine's kernel headers", (t) => {
  const headers = {
    x64: '/usr/include/x86_64-linux-gnu/asm/unistd_64.h',
    arm64: '/usr/include/asm-generic/unistd.h',
  } as const;
  let checked = 0;
  for (const [arch, file] of Object.entries(headers) as [keyof typeof headers, string][]) {
    if (!existsSync(file)) continue;
    const text = readFileSync(file, 'utf8');
    for (const [name, nr] of Object.entries({
      ...SYSCALL_TABLES[arch]!.denied,
      ...SYSCALL_TABLES[arch]!.ignored,
      ...Object.fromEntries(Object.entries(SYSCALL_TABLES[arch]!.direct.calls).map(([k, [nr]]) => [k, nr])),
      ...SYSCALL_TABLES[arch]!.byArgument,
    })) {
      const m = new RegExp(`^#define __NR(?:3264)?_${name}\\s+(\\d+)`, 'm').exec(text);
      assert.ok(m, `${file}: no __NR_${name}`);
      assert.equal(Number(m[1]), nr, `${arch} ${name}`);
      checked += 1;
    }
  }
  if (checked === 0) t.skip('no kernel headers (linux-libc-dev) on this machine');
});
