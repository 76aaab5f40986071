/**
 * The bwrap level's seccomp filter (classic BPF, as `bwrap --seccomp` takes it): system calls a
 * sandboxed node never makes, and which widen the kernel surface open to code that escaped V8,
 * fail with EPERM; a foreign syscall ABI (i386 and x32 on x86-64, AArch32 on arm64) fails too.
 * `sendmsg`/`sendmmsg` carry descriptors (SCM_RIGHTS; node writes sockets with `write`/`writev` and
 * sends none): files left in flight in a unix socket's own queue are freed by the kernel's garbage
 * collector on its own threads, outside the sandbox's cgroup, its CPU uncounted and running while
 * the sandbox is frozen (rerun 75b: 0.75 s per 544 K epoll watches, again and again). Linux AIO
 * (`io_*`; node uses none) did the same through polls cancelled at `io_destroy` or exit, and its
 * contexts count against one machine-wide limit, `fs.aio-max-nr`, which one sandbox took whole
 * (rerun 76b). `pidfd_getfd` would copy another process's descriptors (the sandbox's init's). SysV
 * message queues and semaphores (node uses none) are freed on a kworker when the sandbox's IPC
 * namespace goes, after `close()` has read its CPU (rerun 77b: 0.7 s for 4 M messages);
 * `memfd_secret` split the host kernel's direct map for good (rerun 77b). `seccomp` stacks a filter
 * of the sandbox's own in uncounted kernel memory (PR_SET_SECCOMP below). The sync calls are
 * answered 0 and do nothing: nothing the sandbox may write outlives it (its files are on a tmpfs),
 * and `sync()` flushed every file system of the host, the cache flushes run on kworkers, uncounted
 * (rerun 80b: 1.0-1.2 s of their CPU per 6 s of a loop, host writers 20-60% slower). inotify,
 * fanotify and file locks: FILE_LOCKS below. Landlock domains (node makes none) are freed on a
 * kworker (rerun 84b: 0.8-1.5 s uncounted a run, half of it inside a frozen pause).
 * Syscall numbers are per architecture: x86-64 (arch/x86/entry/syscalls/syscall_64.tbl) and arm64
 * (the generic table, include/uapi/asm-generic/unistd.h). Elsewhere no filter is installed and the
 * isolation summary names the architecture.
 */
type Call = (typeof ARG_RULES)[number][0];
interface SyscallTable {
  /** AUDIT_ARCH_* of the native ABI (seccomp_data.arch). */
  audit: number;
  /** x86-64 only: x32 syscalls carry this bit in nr and share the native audit arch. */
  x32Bit?: number;
  denied: Record<string, number>;
  /**
   * Calls refused where an argument holds O_DIRECT (this architecture's bit): [number, argument,
   * and for fcntl the command it must come with: its third argument is whatever a register held for
   * other commands, and glibc's F_GETFL, which node checks at start and exit, failed half the time
   * (rerun 82b)].
   * Node's binary and libraries are the host's files, on the host's disk, and no cgroup here bounds
   * disk bandwidth: read past the page cache (O_DIRECT, by open or by fcntl(F_SETFL); `preadv2`'s
   * RWF_DONTCACHE; `fadvise` dropping what is cached), each read went to the disk again (rerun 81b:
   * 769 MiB/s from one process, outside a sandbox). Those calls and `openat2`, whose flags are in
   * memory the filter cannot read, are refused outright. Node makes none of them.
   */
  direct: { flag: number; calls: Record<string, [nr: number, arg: number, command?: number]> };
  /** Calls answered 0 without effect (RET_DONE). */
  ignored: Record<string, number>;
  /** The calls refused or allowed by an argument (ARG_RULES). */
  byArgument: Record<Call, number>;
}

/** fcntl(fd, F_SETFL, flags): a descriptor's status flags, O_DIRECT among them. */
const F_SETFL = 4;

export const SYSCALL_TABLES: Partial<Record<NodeJS.Architecture, SyscallTable>> = {
  x64: {
    audit: 0xc000003e,
    x32Bit: 0x40000000,
    denied: {
      ptrace: 101,
      syslog: 103,
      uselib: 134,
      personality: 135,
      vhangup: 153,
      pivot_root: 155,
      chroot: 161,
      acct: 163,
      mount: 165,
      umount2: 166,
      swapon: 167,
      swapoff: 168,
      reboot: 169,
      iopl: 172,
      ioperm: 173,
      init_module: 175,
      delete_module: 176,
      quotactl: 179,
      lookup_dcookie: 212,
      kexec_load: 246,
      add_key: 248,
      request_key: 249,
      keyctl: 250,
      unshare: 272,
      perf_event_open: 298,
      name_to_handle_at: 303,
      open_by_handle_at: 304,
      setns: 308,
      process_vm_readv: 310,
      process_vm_writev: 311,
      kcmp: 312,
      finit_module: 313,
      kexec_file_load: 320,
      bpf: 321,
      userfaultfd: 323,
      io_uring_setup: 425,
      io_uring_enter: 426,
      io_uring_register: 427,
      open_tree: 428,
      move_mount: 429,
      fsopen: 430,
      fsmount: 432,
      fspick: 433,
      mount_setattr: 442,
      shmget: 29,
      shmat: 30,
      shmctl: 31,
      setsockopt: 54,
      memfd_create: 319,
      setpgid: 109,
      setsid: 112,
      timer_create: 222,
      mq_notify: 244,
      sendmsg: 46,
      sendmmsg: 307,
      io_setup: 206,
      io_destroy: 207,
      io_getevents: 208,
      io_submit: 209,
      io_cancel: 210,
      io_pgetevents: 333,
      pidfd_getfd: 438,
      msgget: 68,
      msgsnd: 69,
      msgrcv: 70,
      msgctl: 71,
      semget: 64,
      semop: 65,
      semctl: 66,
      semtimedop: 220,
      memfd_secret: 447,
      seccomp: 317,
      inotify_init: 253,
      inotify_init1: 294,
      inotify_add_watch: 254,
      inotify_rm_watch: 255,
      fanotify_init: 300,
      fanotify_mark: 301,
      flock: 73,
      fadvise64: 221,
      preadv2: 327,
      pwritev2: 328,
      openat2: 437,
      landlock_create_ruleset: 444,
      landlock_add_rule: 445,
      landlock_restrict_self: 446,
    },
    ignored: {
      sync: 162,
      syncfs: 306,
      fsync: 74,
      fdatasync: 75,
      sync_file_range: 277,
    },
    direct: { flag: 0o40000, calls: { open: [2, 1], openat: [257, 2], fcntl: [72, 2, F_SETFL] } },
    byArgument: {
      socket: 41,
      socketpair: 53,
      prctl: 157,
      kill: 62,
      tkill: 200,
      tgkill: 234,
      rt_sigqueueinfo: 129,
      rt_tgsigqueueinfo: 297,
      pidfd_send_signal: 424,
      fcntl: 72,
      clone: 56,
      clone3: 435,
    },
  },
  // arm64 has no uselib, iopl or ioperm.
  arm64: {
    audit: 0xc00000b7,
    denied: {
      lookup_dcookie: 18,
      umount2: 39,
      mount: 40,
      pivot_root: 41,
      chroot: 51,
      vhangup: 58,
      quotactl: 60,
      acct: 89,
      personality: 92,
      unshare: 97,
      kexec_load: 104,
      init_module: 105,
      delete_module: 106,
      syslog: 116,
      ptrace: 117,
      reboot: 142,
      add_key: 217,
      request_key: 218,
      keyctl: 219,
      swapon: 224,
      swapoff: 225,
      perf_event_open: 241,
      name_to_handle_at: 264,
      open_by_handle_at: 265,
      setns: 268,
      process_vm_readv: 270,
      process_vm_writev: 271,
      kcmp: 272,
      finit_module: 273,
      bpf: 280,
      userfaultfd: 282,
      kexec_file_load: 294,
      io_uring_setup: 425,
      io_uring_enter: 426,
      io_uring_register: 427,
      open_tree: 428,
      move_mount: 429,
      fsopen: 430,
      fsmount: 432,
      fspick: 433,
      mount_setattr: 442,
      shmget: 194,
      shmctl: 195,
      shmat: 196,
      setsockopt: 208,
      memfd_create: 279,
      setpgid: 154,
      setsid: 157,
      timer_create: 107,
      mq_notify: 184,
      sendmsg: 211,
      sendmmsg: 269,
      io_setup: 0,
      io_destroy: 1,
      io_submit: 2,
      io_cancel: 3,
      io_getevents: 4,
      io_pgetevents: 292,
      pidfd_getfd: 438,
      msgget: 186,
      msgctl: 187,
      msgrcv: 188,
      msgsnd: 189,
      semget: 190,
      semctl: 191,
      semtimedop: 192,
      semop: 193,
      memfd_secret: 447,
      seccomp: 277,
      inotify_init1: 26,
      inotify_add_watch: 27,
      inotify_rm_watch: 28,
      fanotify_init: 262,
      fanotify_mark: 263,
      flock: 32,
      fadvise64: 223,
      preadv2: 286,
      pwritev2: 287,
      openat2: 437,
      landlock_create_ruleset: 444,
      landlock_add_rule: 445,
      landlock_restrict_self: 446,
    },
    ignored: {
      sync: 81,
      fsync: 82,
      fdatasync: 83,
      sync_file_range: 84,
      syncfs: 267,
    },
    direct: { flag: 0o200000, calls: { openat: [56, 2], fcntl: [25, 2, F_SETFL] } },
    byArgument: {
      socket: 198,
      socketpair: 199,
      prctl: 167,
      kill: 129,
      tkill: 130,
      tgkill: 131,
      rt_sigqueueinfo: 138,
      rt_tgsigqueueinfo: 240,
      pidfd_send_signal: 424,
      fcntl: 25,
      clone: 220,
      clone3: 435,
    },
  },
};
const LD_W_ABS = 0x20;
const JEQ_K = 0x15;
const JGE_K = 0x35;
const AND_K = 0x54;
const RET_K = 0x06;
export const RET_ALLOW = 0x7fff0000;
export const RET_EPERM = 0x00050000 | 1;
export const RET_ENOSYS = 0x00050000 | 38;
/** SECCOMP_RET_ERRNO with errno 0: the call returns 0 and does nothing. */
export const RET_DONE = 0x00050000 | 0;
// struct seccomp_data: nr at offset 0, arch at offset 4, args[i] at 16 + 8i (its low 32 bits: little-endian).
const NR = 0;
const ARCH = 4;
const ARG = (i: number) => 16 + 8 * i;
/**
 * The one socket domain open: unix sockets (in scratch, or a pair), with fixed-size buffers. IP
 * sockets, even on the sandbox's own loopback, are refused: the kernel keeps real-time TCP timers
 * while the worker holds the process stopped (a SYN dropped by a full accept queue was retransmitted
 * after 1 s, so a connect completed or not by how long the worker had paused), and TCP buffers grow
 * in kernel memory outside `memoryMb` (110 connections held ~420 MiB: red-team rerun 11). So is
 * every other family: some are not confined by the network namespace (`AF_VSOCK` bound a port in
 * the machine's own vsock space, which reaches the hypervisor's host: rerun 72v), the rest (netlink,
 * packet, `AF_ALG`, …) are kernel surface node never needs.
 */
export const ALLOWED_SOCKET_DOMAIN = 1; // AF_UNIX
/**
 * bwrap's init (pid 1 of the sandbox) dies with bwrap by its parent-death signal, and takes every
 * process of the namespace with it. Code written into it through /proc/1/mem (same uid, same
 * filter) cleared that signal, and the sandbox outlived both `close()` and the worker's death
 * (rerun 72x); node drops it for nothing either.
 */
export const PR_SET_PDEATHSIG = 1;
/**
 * A filter of the sandbox's own, stacked on bwrap's (as `seccomp` does): each is compiled into
 * kernel memory no cgroup counts, against one machine-wide limit, `net.core.bpf_jit_limit`, and a
 * listener's descriptor keeps a chain alive after its thread (rerun 80b: 390 chains took 152 MiB, 30%
 * of it; past it no unprivileged filter, bwrap's for the next sandbox included, can be installed).
 */
export const PR_SET_SECCOMP = 22;
/**
 * Between requests the worker stops every process of the sandbox (SIGSTOP); one it had not stopped
 * yet sent SIGCONT to those it had, and the tree ran on (rerun 72z). Node never sends it.
 */
export const SIGCONT = 18;
/** fcntl(fd, F_SETSIG, n): the signal the kernel sends a chosen process when the fd is ready. */
const F_SETSIG = 10;
/**
 * fcntl's record locks (F_GETLK, F_SETLK, F_SETLKW and their open-file forms), like `flock` and
 * inotify (refused above): state on a file every sandbox and the host share, node's binary and its
 * libraries, which one sets and another sees (rerun 81b: inotify watches on node's binary carried
 * 16 of 16 bits each way between a sandbox and a process outside). Node takes none.
 */
export const FILE_LOCKS = [5, 6, 7, 36, 37, 38] as const;

/** A clone's exit signal, sent to its parent when it ends: the low byte of its flags. */
const CSIGNAL = 0xff;

/**
 * Calls decided by one argument: [call, argument index, 'deny' when it equals the value, 'only'
 * this value allowed, or 'enosys' whatever it is (clone3 keeps its flags and exit signal in memory
 * the filter cannot read; glibc then uses clone), and a mask applied to the argument first].
 * SIGCONT also comes from the kernel on a process's behalf: as a fd's ready signal or as a child's
 * exit signal (and to a newly orphaned process group's stopped members: setpgid and setsid are
 * refused above), a POSIX timer's or a message queue's signal (their `sigevent` is in memory too:
 * `timer_create` and `mq_notify` are refused above; rerun 73b).
 */
export const ARG_RULES = [
  ['socket', 0, 'only', ALLOWED_SOCKET_DOMAIN],
  ['socketpair', 0, 'only', ALLOWED_SOCKET_DOMAIN],
  ['prctl', 0, 'deny', PR_SET_PDEATHSIG],
  ['prctl', 0, 'deny', PR_SET_SECCOMP],
  ['kill', 1, 'deny', SIGCONT],
  ['tkill', 1, 'deny', SIGCONT],
  ['tgkill', 2, 'deny', SIGCONT],
  ['rt_sigqueueinfo', 1, 'deny', SIGCONT],
  ['rt_tgsigqueueinfo', 2, 'deny', SIGCONT],
  ['pidfd_send_signal', 1, 'deny', SIGCONT],
  ['fcntl', 1, 'deny', F_SETSIG],
  ...FILE_LOCKS.map((command) => ['fcntl', 1, 'deny', command] as const),
  ['clone', 0, 'deny', SIGCONT, CSIGNAL],
  ['clone3', 0, 'enosys', 0],
] as const;

/** The names the filter refuses on this architecture (empty where there is no filter). */
export function seccompDenied(arch: NodeJS.Architecture = process.arch): string[] {
  return Object.keys(SYSCALL_TABLES[arch]?.denied ?? {});
}

/** The compiled filter for an architecture, or undefined where there is no syscall table. */
export function seccompProgram(arch: NodeJS.Architecture = process.arch): Buffer | undefined {
  const table = SYSCALL_TABLES[arch];
  if (!table) return undefined;
  // Jumps to the returns at the end are resolved once the program's length is known.
  type Target = number | 'allow' | 'deny' | 'enosys' | 'done';
  const insns: [code: number, jt: Target, jf: Target, k: number][] = [
    [LD_W_ABS, 0, 0, ARCH],
    [JEQ_K, 0, 'deny', table.audit],
    [LD_W_ABS, 0, 0, NR],
  ];
  if (table.x32Bit) insns.push([JGE_K, 'deny', 0, table.x32Bit]);
  for (const nr of Object.values(table.denied)) insns.push([JEQ_K, 'deny', 0, nr]);
  for (const nr of Object.values(table.ignored)) insns.push([JEQ_K, 'done', 0, nr]);
  for (const [nr, arg, command] of Object.values(table.direct.calls)) {
    // Past the flag test to the number's reload, where it is another call or another command.
    const test: [number, Target, Target, number][] = [
      [LD_W_ABS, 0, 0, ARG(arg)],
      [AND_K, 0, 0, table.direct.flag],
      [JEQ_K, 0, 'deny', 0],
    ];
    if (command !== undefined) test.unshift([LD_W_ABS, 0, 0, ARG(1)], [JEQ_K, 0, test.length, command]);
    insns.push([JEQ_K, 0, test.length, nr], ...test, [LD_W_ABS, 0, 0, NR]);
  }
  // Each rule: past its argument test unless it is its call; then the argument decides.
  for (const [call, arg, kind, value, mask] of ARG_RULES as readonly (readonly [
    Call,
    number,
    string,
    number,
    number?,
  ])[]) {
    const nr = table.byArgument[call];
    if (kind === 'enosys') {
      insns.push([JEQ_K, 'enosys', 0, nr]);
      continue;
    }
    const load: [number, Target, Target, number][] = [[LD_W_ABS, 0, 0, ARG(arg)]];
    if (mask !== undefined) load.push([AND_K, 0, 0, mask]);
    // A 'deny' passed goes on to the later rules (a call may have several), the number reloaded.
    const test: [number, Target, Target, number][] =
      kind === 'deny'
        ? [
            [JEQ_K, 'deny', 0, value],
            [LD_W_ABS, 0, 0, NR],
          ]
        : [[JEQ_K, 'allow', 'deny', value]];
    insns.push([JEQ_K, 0, load.length + test.length, nr], ...load, ...test);
  }
  const returns = { allow: insns.length, deny: insns.length + 1, enosys: insns.length + 2, done: insns.length + 3 };
  insns.push([RET_K, 0, 0, RET_ALLOW], [RET_K, 0, 0, RET_EPERM], [RET_K, 0, 0, RET_ENOSYS], [RET_K, 0, 0, RET_DONE]);
  const jump = (to: Target, from: number) => (typeof to === 'number' ? to : returns[to] - from - 1);
  const out = Buffer.alloc(insns.length * 8);
  insns.forEach(([code, jt, jf, k], i) => {
    out.writeUInt16LE(code, i * 8);
    out.writeUInt8(jump(jt, i), i * 8 + 2);
    out.writeUInt8(jump(jf, i), i * 8 + 3);
    out.writeUInt32LE(k >>> 0, i * 8 + 4);
  });
  return out;
}
