/**
 * The bwrap level's seccomp filter (classic BPF, as `bwrap --seccomp` takes it): system calls a
 * sandboxed node never makes, and which widen the kernel surface open to code that escaped V8,
 * fail with EPERM; a foreign syscall ABI (i386, x32) fails too. Syscall numbers are per
 * architecture and only x86-64's are here: elsewhere no filter is installed, and the isolation
 * summary says so.
 */
const X86_64 = {
  audit: 0xc000003e,
  denied: {
    ptrace: 101, syslog: 103, uselib: 134, personality: 135, vhangup: 153, pivot_root: 155, chroot: 161, acct: 163,
    mount: 165, umount2: 166, swapon: 167, swapoff: 168, reboot: 169, iopl: 172, ioperm: 173, init_module: 175,
    delete_module: 176, quotactl: 179, lookup_dcookie: 212, kexec_load: 246, add_key: 248, request_key: 249,
    keyctl: 250, unshare: 272, perf_event_open: 298, name_to_handle_at: 303, open_by_handle_at: 304, setns: 308,
    process_vm_readv: 310, process_vm_writev: 311, kcmp: 312, finit_module: 313, kexec_file_load: 320, bpf: 321,
    userfaultfd: 323, io_uring_setup: 425, io_uring_enter: 426, io_uring_register: 427, open_tree: 428,
    move_mount: 429, fsopen: 430, fsmount: 432, fspick: 433, mount_setattr: 442,
  },
};

const LD_W_ABS = 0x20;
const JEQ_K = 0x15;
const JGE_K = 0x35;
const RET_K = 0x06;
const RET_ALLOW = 0x7fff0000;
const RET_EPERM = 0x00050000 | 1;
const X32_BIT = 0x40000000;
// struct seccomp_data: nr at offset 0, arch at offset 4.
const NR = 0;
const ARCH = 4;

/** The names the filter refuses (for the README and the isolation summary). */
export const SECCOMP_DENIED = Object.keys(X86_64.denied);

/** The compiled filter for this machine, or undefined where there is none. */
export function seccompProgram(): Buffer | undefined {
  if (process.arch !== 'x64') return undefined;
  const denied = Object.values(X86_64.denied);
  const deny = 5 + denied.length; // index of the EPERM return
  const insns: [code: number, jt: number, jf: number, k: number][] = [
    [LD_W_ABS, 0, 0, ARCH],
    [JEQ_K, 0, deny - 2, X86_64.audit],
    [LD_W_ABS, 0, 0, NR],
    [JGE_K, deny - 4, 0, X32_BIT],
    ...denied.map((nr, i): [number, number, number, number] => [JEQ_K, deny - (4 + i) - 1, 0, nr]),
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
