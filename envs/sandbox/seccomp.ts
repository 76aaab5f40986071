/**
 * The bwrap level's seccomp filter (classic BPF, as `bwrap --seccomp` takes it): system calls a
 * sandboxed node never makes, and which widen the kernel surface open to code that escaped V8,
 * fail with EPERM; a foreign syscall ABI (i386 and x32 on x86-64, AArch32 on arm64) fails too.
 * Syscall numbers are per architecture: x86-64 (arch/x86/entry/syscalls/syscall_64.tbl) and arm64
 * (the generic table, include/uapi/asm-generic/unistd.h). Elsewhere no filter is installed and the
 * isolation summary names the architecture.
 */
interface SyscallTable {
  /** AUDIT_ARCH_* of the native ABI (seccomp_data.arch). */
  audit: number;
  /** x86-64 only: x32 syscalls carry this bit in nr and share the native audit arch. */
  x32Bit?: number;
  denied: Record<string, number>;
  /** socket(2) and socketpair(2): open for unix sockets only (below). */
  socket: number;
  socketpair: number;
  /** prctl(2): refused for PR_SET_PDEATHSIG only (below). */
  prctl: number;
}

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
    },
    socket: 41,
    socketpair: 53,
    prctl: 157,
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
    },
    socket: 198,
    socketpair: 199,
    prctl: 167,
  },
};
const LD_W_ABS = 0x20;
const JEQ_K = 0x15;
const JGE_K = 0x35;
const RET_K = 0x06;
export const RET_ALLOW = 0x7fff0000;
export const RET_EPERM = 0x00050000 | 1;
// struct seccomp_data: nr at offset 0, arch at offset 4, args[0] at 16 (its low 32 bits: little-endian).
const NR = 0;
const ARCH = 4;
const ARG0 = 16;
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

/** The names the filter refuses on this architecture (empty where there is no filter). */
export function seccompDenied(arch: NodeJS.Architecture = process.arch): string[] {
  return Object.keys(SYSCALL_TABLES[arch]?.denied ?? {});
}

/** The compiled filter for an architecture, or undefined where there is no syscall table. */
export function seccompProgram(arch: NodeJS.Architecture = process.arch): Buffer | undefined {
  const table = SYSCALL_TABLES[arch];
  if (!table) return undefined;
  const denied = Object.values(table.denied);
  const abiCheck: [number, number, number, number][] = table.x32Bit ? [[JGE_K, 0, 0, table.x32Bit]] : [];
  const deny = 11 + abiCheck.length + denied.length; // index of the EPERM return
  const insns: [code: number, jt: number, jf: number, k: number][] = [
    [LD_W_ABS, 0, 0, ARCH],
    [JEQ_K, 0, deny - 2, table.audit],
    [LD_W_ABS, 0, 0, NR],
    ...abiCheck.map(([c, , , k]): [number, number, number, number] => [c, deny - 4, 0, k]),
    ...denied.map((nr, i): [number, number, number, number] => [JEQ_K, deny - (3 + abiCheck.length + i) - 1, 0, nr]),
    // prctl(option, …): PR_SET_PDEATHSIG is refused.
    [JEQ_K, 0, 2, table.prctl],
    [LD_W_ABS, 0, 0, ARG0],
    [JEQ_K, 5, 4, PR_SET_PDEATHSIG],
    // socket(domain, …) and socketpair(domain, …): the domain decides; any other call is allowed.
    [JEQ_K, 1, 0, table.socket],
    [JEQ_K, 0, 2, table.socketpair],
    [LD_W_ABS, 0, 0, ARG0],
    [JEQ_K, 0, 1, ALLOWED_SOCKET_DOMAIN],
    [RET_K, 0, 0, RET_ALLOW],
    [RET_K, 0, 0, RET_EPERM],
  ];
  const out = Buffer.alloc(insns.length * 8);
  insns.forEach(([code, jt, jf, k], i) => {
    out.writeUInt16LE(code, i * 8);
    out.writeUInt8(jt, i * 8 + 2);
    out.writeUInt8(jf, i * 8 + 3);
    out.writeUInt32LE(k >>> 0, i * 8 + 4);
  });
  return out;
}
