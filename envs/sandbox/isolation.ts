import { chmod, chown, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { execFileSync } from 'node:child_process';
import { lstatSync, readdirSync, readFileSync, realpathSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { CGROUP_CONTROLS, cgroupSupport, type CgroupControl } from './cgroup.js';
import { seccompDenied, seccompProgram } from './seccomp.js';
import { ofDeadWorker, WORKER_TAG } from './worker-tag.js';

/**
 * How generated env code is confined, strongest first. Every level adds Node's permission model
 * (fs read/write only inside the sandbox dir, no child processes, no workers), an empty
 * environment, resource limits via prlimit and a dedicated uid when we run as root:
 * - `bwrap`: bubblewrap namespaces — only node's binary and shared libraries (read-only), /proc
 *   (its machine-wide directories hidden), a read-only /dev and the scratch dir are mounted; no
 *   network, pid, ipc or uts sharing; no nested user namespaces; all capabilities dropped. The scratch dir is a tmpfs capped in bytes and in files, mounted in a user namespace
 *   of its own by `unshare` (bwrap's own --tmpfs has no inode cap).
 * - `unshare-net`: util-linux `unshare --net` (needs root) — no network; fs confinement is the
 *   permission model alone.
 * - `node-permissions`: the permission model and rlimits only — NETWORK IS NOT BLOCKED (Node 20's
 *   permission model does not cover sockets).
 */
export type IsolationLevel = 'bwrap' | 'unshare-net' | 'node-permissions';
export const ISOLATION_LEVELS: IsolationLevel[] = ['bwrap', 'unshare-net', 'node-permissions'];

export interface SandboxIsolation {
  level: IsolationLevel;
  networkBlocked: boolean;
  /** Whether the rest of the file system is absent (mount namespace), not just refused by Node. */
  filesystemNamespace: boolean;
  /** Whether the sandbox runs under its own unprivileged uid (we are root) or inherits ours. */
  dedicatedUid: boolean;
  /** Whether prlimit enforces memory/CPU/process/file-size limits (else only V8's heap limit and the wall clock). */
  rlimits: boolean;
  /** Whether the scratch dir caps the number of files (`maxFiles`: the bwrap level's own tmpfs). */
  fileCountLimit: boolean;
  /** What a cgroup per sandbox does here (cgroup.ts); none where the worker cannot make one. */
  cgroup: CgroupControl[];
  summary: string;
}

export interface ResolvedLimits {
  /** Wall-clock limit of one request (step, reset, evaluate…). */
  wallMs: number;
  /** Wall-clock limit of start-up (module evaluation + the first /v1/info). */
  startMs: number;
  /** Total wall-clock time requests may keep the sandbox busy, summed over its lifetime. */
  budgetMs: number;
  /** V8 heap limit; the process's data segment is capped at this + 256 MiB. */
  memoryMb: number;
  /** Cap on stderr bytes in total and on any single protocol response line. */
  outputBytes: number;
  /** RLIMIT_CPU over the sandbox's lifetime. */
  cpuSeconds: number;
  /** RLIMIT_NPROC (threads count) when the sandbox has its own uid. */
  maxProcesses: number;
  /**
   * Scratch space: with bwrap the sandbox dir is a tmpfs of this size (writes never reach the host
   * disk); otherwise RLIMIT_FSIZE caps each file at this size in the real sandbox dir.
   */
  diskMb: number;
  /** Files (inodes) the bwrap scratch tmpfs may hold. */
  maxFiles: number;
  /**
   * Episodes (resets and forks) one process serves; the next starts in a fresh process, so module
   * state (memory, scratch files) never counts past what validation's processes saw.
   */
  episodesPerProcess: number;
  /** A process idle this long (no open episode) retires, so idle time does not age the module. */
  idleRetireMs: number;
}

export interface SandboxCommand {
  file: string;
  args: string[];
  uid?: number;
  gid?: number;
}

const MiB = 1024 * 1024;

/** The data segment prlimit allows a sandboxed process: V8's heap limit and room for what lies outside it. */
export function dataLimitBytes(limits: Pick<ResolvedLimits, 'memoryMb'>): number {
  return (limits.memoryMb + 256) * MiB;
}
/** Memory of the kernel's for one sandbox tree (page tables, pipes, sockets, epoll watches), within its cgroup's limit. */
const KERNEL_MEMORY_MB = 128;
/** What a sandbox's cgroup allows past `memoryMb`, in words. */
export const CGROUP_HEADROOM = `256 MiB outside V8's heap, diskMb of scratch files and ${KERNEL_MEMORY_MB} MiB for the kernel`;

/**
 * All the memory a sandbox tree's cgroup allows: the data segment, its scratch tmpfs (whose pages
 * are charged to it) and the kernel's memory for it, which no rlimit bounds (rerun 73b).
 */
export function cgroupMemoryBytes(limits: Pick<ResolvedLimits, 'memoryMb' | 'diskMb'>): number {
  return dataLimitBytes(limits) + (limits.diskMb + KERNEL_MEMORY_MB) * MiB;
}

/** Where the sandbox dir appears inside the bwrap mount namespace. */
const BWRAP_DIR = '/sandbox';

const isRoot = () => process.getuid?.() === 0;
let uidCounter = 0;
/**
 * A uid no real account uses, distinct per sandbox so RLIMIT_NPROC counts only that sandbox: none a
 * process on the machine holds, another worker's sandboxes included (rerun 83b: two workers' uids
 * met, and one sandbox's 56 tasks failed the other's start; 84b: three such probes in a row).
 */
export function allocateUid(): number | undefined {
  if (!isRoot()) return undefined;
  const held = uidsInUse();
  for (let tries = 0; ; tries++) {
    const uid = 200_000 + ((process.pid * 997 + uidCounter++) % 100_000);
    if (!held.has(uid) || tries >= 100_000) return uid;
  }
}

/** The uids of the machine's processes (the owners of their /proc entries). */
function uidsInUse(): Set<number> {
  const held = new Set<number>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      held.add(lstatSync(`/proc/${name}`).uid);
    } catch {
      // gone meanwhile
    }
  }
  return held;
}

/** The shared objects a binary loads, by `ldd`; none for a static binary (or without ldd: the probe then fails). */
function sharedObjects(binary: string): string[] {
  let listing: string;
  try {
    listing = execFileSync('ldd', [binary], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  } catch {
    return [];
  }
  return listing
    .split('\n')
    .map((line) => /(?:=>\s*|^\s*)(\/\S+) \(0x/.exec(line)?.[1])
    .filter((file): file is string => file !== undefined);
}

let machineDirs: string[] | undefined;
/**
 * /proc's directories that describe the machine rather than a process (`irq/<n>/<device>`,
 * `driver/nvidia`, `bus/pci`, `fs/ext4/<disk>`, `sys`, `tty`, …): each is an empty read-only tmpfs
 * in the sandbox. Node's ESM resolver stats paths without the permission model, so a name's mere
 * existence there told the host's devices and disks (rerun 13). The process entries, the
 * symlinks (`self`, `net`) and the top-level files (`meminfo`, `stat`, which Node reads) stay.
 * Taken from the worker's own /proc: the kernel is the same, and bwrap cannot make a mount point
 * in procfs for an entry it lacks.
 */
function procDirs(): string[] {
  machineDirs ??= readdirSync('/proc', { withFileTypes: true })
    .filter((e) => e.isDirectory() && !/^\d+$/.test(e.name))
    .map((e) => `/proc/${e.name}`);
  return machineDirs;
}

let nodeFiles: string[] | undefined;
/**
 * Node's binary and the shared objects it loads (from `ldd`), each at the path the loader looks
 * for it. Only these are mounted from the host: Node's module resolvers stat any path without the
 * permission model (`require.resolve('/usr/bin/bwrap')` told which programs the host has: rerun 12),
 * so what they can see must hold nothing of the host's.
 */
function nodeMounts(): string[] {
  nodeFiles ??= [process.execPath, ...sharedObjects(process.execPath)];
  return nodeFiles.flatMap((file) => ['--ro-bind', realpathSync(file), file]);
}

/** Node 22.13+/23.5+ renamed the flag; the old one is gone in later majors. */
function permissionFlag(): string {
  const [major, minor] = process.versions.node.split('.').map(Number);
  const renamed = major > 23 || (major === 23 && minor >= 5) || (major === 22 && minor >= 13);
  return renamed ? '--permission' : '--experimental-permission';
}

const O_CLOEXEC = 0o2000000;
/**
 * The worker's descriptors without close-on-exec (from /proc/self/fdinfo): they pass through every
 * exec into the sandboxed node, bwrap included — a file or pipe the worker's own launcher left
 * open would be writable by the module. Node marks only fds up to the first gap after 15
 * close-on-exec at start-up; the sandbox runner closes these before the module loads.
 */
export function inheritableFds(): number[] {
  let fds: string[];
  try {
    fds = readdirSync('/proc/self/fd');
  } catch {
    return [];
  }
  return fds.map(Number).filter((fd) => {
    if (!(fd > 2)) return false;
    try {
      const flags = /^flags:\s+([0-7]+)$/m.exec(readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8'))?.[1];
      return flags !== undefined && (parseInt(flags, 8) & O_CLOEXEC) === 0;
    } catch {
      return false; // closed meanwhile (e.g. the directory listing's own fd)
    }
  });
}

/** Where the worker creates the (empty) mount point of the bwrap level's scratch tmpfs. */
export const scratchDirOf = (runDir: string) => path.join(path.dirname(runDir), 'scratch');
/** Where the worker writes the seccomp filter bwrap loads (x86-64 and arm64, see seccomp.ts). */
const seccompFileOf = (runDir: string) => path.join(path.dirname(runDir), 'seccomp.bpf');
const SECCOMP = seccompProgram();

/**
 * Node's own report of a fatal error (V8's out-of-memory among them), on fd 1, where only the runner
 * writes besides: a death's limit is read from it, not from stderr, where the module's text and its
 * function names in Node's stacks read as Node's (reruns 14, 70b-72b). Not a file: Node opened one
 * as it died, and found none free where the module held every descriptor (reruns 76a-79a).
 */
export const FATAL_REPORT_FLAGS = [
  '--report-on-fatalerror',
  '--report-filename=stdout',
  '--report-compact',
  '--report-exclude-network', // no name lookups for its sockets as it dies
];

/**
 * The command line of one sandbox. `fileCountLimit` (bwrap only): mount the scratch tmpfs with an
 * inode cap in a user namespace first, then start bwrap inside it; without it bwrap's own
 * size-capped tmpfs is used (for machines where that extra namespace is refused).
 */
export function sandboxCommand(
  level: IsolationLevel,
  o: {
    runDir: string;
    entry: string;
    limits: ResolvedLimits;
    uid?: number;
    prlimit: boolean;
    fileCountLimit?: boolean;
    closeFds?: number[];
    /** Wait for a line on stdin before anything else runs: the worker moves the process into its cgroup first. */
    cgroupGate?: boolean;
    /** Its cgroup limits processes and threads to `maxProcesses`. */
    pidsCgroup?: boolean;
    /** bwrap with `fileCountLimit`: load the seccomp filter (false only to tell, in the probe, whether it is what fails). */
    seccomp?: boolean;
  },
): SandboxCommand {
  const dir = level === 'bwrap' ? BWRAP_DIR : o.runDir;
  const node = [
    process.execPath,
    permissionFlag(),
    `--allow-fs-read=${dir}/`,
    `--allow-fs-write=${dir}/`,
    `--max-old-space-size=${o.limits.memoryMb}`,
    // V8 schedules some collections by the real clock (the memory reducer's timers, heap growth by
    // measured GC speed); this ties them to allocation. Weak references, which show when a
    // collection ran (red-team rerun 10), hold their targets in the runner (holdWeakReferences).
    '--predictable-gc-schedule',
    // asm.js runs as plain JavaScript: V8 compiled each "use asm" function to a wasm module of its
    // own, past wasm-guard's count, and 35 000 of them failed a V8 check (rerun 65b).
    '--no-validate-asm',
    // Node's checks of async ids are aborts: an AsyncResource's ids sit under symbols the module can
    // set, and -5 run 16 scopes deep ended the process by SIGABRT (rerun 72u). Off (and no hook,
    // which would turn them on, can be enabled: child.ts), a forged id confuses only the module's
    // own async context.
    '--no-force-async-hooks-checks',
    '--no-warnings',
    // Buffer.allocUnsafe(Slow) hands out freed memory as it was: the raw stat arrays of earlier
    // requests (the real time, to 10 ms) and the runner's HMAC pads (the session key: rerun 72c).
    '--zero-fill-buffers',
    ...FATAL_REPORT_FLAGS,
    path.posix.join(dir, o.entry),
    `--output-bytes=${o.limits.outputBytes}`,
    ...(o.closeFds?.length ? [`--close-fds=${o.closeFds.join(',')}`] : []),
  ];
  const rlimits = o.prlimit
    ? [
        'prlimit',
        `--data=${dataLimitBytes(o.limits)}`,
        // SIGXCPU at the soft limit says why; SIGKILL one second later if it is caught.
        `--cpu=${o.limits.cpuSeconds}:${o.limits.cpuSeconds + 1}`,
        `--fsize=${o.limits.diskMb * MiB}`,
        '--nofile=256',
        '--core=0',
        // With a cgroup's pids.max at maxProcesses, the uid's limit stands above it, so that the
        // cgroup refuses first and its refusal names the limit (rerun 75b: both counted the same
        // tasks, the uid's was checked first, and a fork bomb read as a crash).
        ...(o.uid !== undefined ? [`--nproc=${o.limits.maxProcesses * (o.pidsCgroup ? 2 : 1)}`] : []),
        '--',
      ]
    : [];
  const ids = o.uid !== undefined ? { uid: o.uid, gid: o.uid } : {};
  const gate = o.cgroupGate ? ['/bin/sh', '-c', 'read -r _ && exec "$@"', 'sh'] : [];
  if (level === 'bwrap') {
    // Its own host name in its own UTS namespace (the host's told one machine from another: rerun 6).
    const bwrap = ['bwrap', '--die-with-parent', '--new-session', '--unshare-all', '--hostname', 'sandbox'];
    bwrap.push('--clearenv', '--cap-drop', 'ALL');
    if (o.fileCountLimit) bwrap.push('--unshare-user', '--disable-userns', '--uid', '1000', '--gid', '1000');
    if (o.fileCountLimit && SECCOMP && o.seccomp !== false) bwrap.push('--seccomp', '3'); // fd 3: opened by the shell below
    // /dev is a tmpfs bwrap creates: read-only, else it is unbounded scratch space outside diskMb.
    // Its /dev/pts an empty read-only tmpfs: bwrap's own devpts instance gave ptys from the machine's
    // one count (rerun 77b: 3 071 opened, other instances then got ENOSPC).
    bwrap.push(...nodeMounts(), '--proc', '/proc', '--dev', '/dev', '--tmpfs', '/dev/pts');
    bwrap.push('--remount-ro', '/dev/pts', '--remount-ro', '/dev');
    for (const dir of procDirs()) bwrap.push('--tmpfs', dir, '--remount-ro', dir);
    const scratch = scratchDirOf(o.runDir);
    if (o.fileCountLimit) bwrap.push('--bind', scratch, BWRAP_DIR);
    else bwrap.push('--perms', '0700', '--size', String(o.limits.diskMb * MiB), '--tmpfs', BWRAP_DIR);
    // Only the bundle is bound into the writable dir, read-only. Last, bwrap's root tmpfs (holding
    // the mount points) becomes read-only: socket files bound at / and /usr were writes outside the
    // scratch dir's caps (rerun 14).
    bwrap.push(
      '--ro-bind',
      path.join(o.runDir, o.entry),
      path.posix.join(BWRAP_DIR, o.entry),
      '--remount-ro',
      '/',
      '--chdir',
      BWRAP_DIR,
      '--',
    );
    const mountScratch = o.fileCountLimit
      ? [
          'unshare',
          '--user',
          '--map-root-user',
          '--mount',
          '--',
          '/bin/sh',
          '-c',
          'mount -t tmpfs -o "$1" tmpfs "$2" && exec 3<"$3" && shift 3 && exec "$@"',
          'sh',
          `size=${o.limits.diskMb * MiB},nr_inodes=${o.limits.maxFiles},mode=0700`,
          scratch,
          SECCOMP ? seccompFileOf(o.runDir) : '/dev/null',
        ]
      : [];
    const argv = [...gate, ...rlimits, ...mountScratch, ...bwrap, ...node];
    return { file: argv[0], args: argv.slice(1), ...ids };
  }
  // Without bwrap's --die-with-parent, setpriv sets the parent-death signal (after any uid change,
  // which would clear it); every later step execs, so the signal reaches node when the worker dies.
  const dieWithParent = ['--pdeathsig', 'KILL', '--'];
  if (level === 'unshare-net') {
    // unshare needs root, so the uid is dropped after it, by setpriv.
    const drop = o.uid !== undefined ? [`--reuid=${o.uid}`, `--regid=${o.uid}`, '--clear-groups'] : [];
    const argv = [...gate, 'unshare', '--net', '--', 'setpriv', ...drop, ...dieWithParent, ...rlimits, ...node];
    return { file: argv[0], args: argv.slice(1) };
  }
  const argv = [...gate, 'setpriv', ...dieWithParent, ...rlimits, ...node];
  return { file: argv[0], args: argv.slice(1), ...ids };
}

export function describeIsolation(
  level: IsolationLevel,
  uid: boolean,
  rlimits: boolean,
  fileCountLimit = false,
  cgroup: CgroupControl[] = [],
): SandboxIsolation {
  const without = CGROUP_CONTROLS.filter((c) => !cgroup.includes(c));
  const parts = [
    level === 'bwrap'
      ? `bubblewrap namespaces (mount, net, pid, ipc, uts; only node's binary and shared libraries and /dev read-only + a private tmpfs holding the bundle visible, capped in size${fileCountLimit ? ` and files; no nested user namespaces${SECCOMP ? `; seccomp filter refusing ${seccompDenied().length} system calls and every socket but unix ones` : `; no seccomp filter (no syscall table for ${process.arch})`}` : ' (not in files); no seccomp filter'}; caps dropped)`
      : level === 'unshare-net'
        ? 'network namespace via `unshare --net` (no network); no mount namespace'
        : 'no namespaces: NETWORK NOT BLOCKED',
    'Node permission model (fs read/write only in the sandbox dir; no child processes, no workers)',
    'empty environment',
    uid ? 'dedicated unprivileged uid' : 'same uid as the worker',
    rlimits
      ? 'prlimit: data segment, CPU seconds, file size, open files, processes'
      : 'no rlimits (prlimit missing): V8 heap limit only',
    cgroup.length
      ? `a cgroup per sandbox (${cgroup.join(', ')}${without.length ? `; no ${without.join(', ')}` : ''})`
      : 'no cgroup (none the worker may make): stopped between requests by SIGSTOP, CPU read from /proc, kernel memory unbounded',
    'wall-clock limits per request',
  ];
  return {
    level,
    networkBlocked: level !== 'node-permissions',
    filesystemNamespace: level === 'bwrap',
    dedicatedUid: uid,
    rlimits,
    fileCountLimit,
    cgroup,
    summary: `${level}: ${parts.join('; ')}`,
  };
}

async function works(cmd: string[]): Promise<boolean> {
  const r = await execa(cmd[0], cmd.slice(1), { reject: false, timeout: 10_000, env: {}, extendEnv: false });
  return r.exitCode === 0;
}

/**
 * Prepares a sandbox dir (and the scratch mount point) the sandbox uid can enter and write, and
 * the worker can clean up.
 */
export async function makeSandboxDir(uid: number | undefined): Promise<{ root: string; runDir: string }> {
  swept ??= sweepDeadWorkersDirs();
  await swept;
  const root = await mkdtemp(path.join(os.tmpdir(), `${DIR_PREFIX}${WORKER_TAG}-`));
  await chmod(root, 0o711);
  const runDir = path.join(root, 'run');
  for (const dir of [runDir, scratchDirOf(runDir)]) {
    await mkdir(dir, { mode: 0o700 });
    if (uid !== undefined) await chown(dir, uid, uid);
  }
  if (SECCOMP) await writeFile(seccompFileOf(runDir), SECCOMP, { mode: 0o644 });
  return { root, runDir };
}

/** A sandbox dir is `trace-sandbox-<worker tag>-<random suffix>` (worker-tag.ts). */
const DIR_PREFIX = 'trace-sandbox-';
let swept: Promise<void> | undefined;

/**
 * Removes the sandbox dirs of workers no longer running, once per worker: a worker killed as it is
 * leaves its own (each up to a bundle's 8 MiB and its scratch files; rerun 61b).
 */
async function sweepDeadWorkersDirs(): Promise<void> {
  for (const name of readdirSync(os.tmpdir())) {
    if (!ofDeadWorker(name, DIR_PREFIX)) continue;
    // Only a dir this uid made as a sandbox dir: a local user's look-alike, swapping its folders
    // for symlinks while it was removed, had root delete files it chose (rerun 63b).
    const dir = path.join(os.tmpdir(), name);
    const st = lstatSync(dir, { throwIfNoEntry: false });
    if (st?.isDirectory() && st.uid === process.getuid?.() && (st.mode & 0o777) === 0o711)
      await rm(dir, { recursive: true, force: true }).catch(() => {});
  }
}

/** Whether a sandbox of this shape starts node and hears from it, and what it printed where not. */
async function probe(
  level: IsolationLevel,
  prlimit: boolean,
  fileCountLimit: boolean,
  seccomp = true,
): Promise<{ ok: boolean; output: string }> {
  const uid = allocateUid();
  const { root, runDir } = await makeSandboxDir(uid);
  try {
    await writeFile(path.join(runDir, 'probe.mjs'), "process.stdout.write('sandbox-ok')");
    await chmod(path.join(runDir, 'probe.mjs'), 0o644);
    const limits: ResolvedLimits = {
      wallMs: 0,
      startMs: 0,
      budgetMs: 0,
      memoryMb: 256,
      outputBytes: 0,
      cpuSeconds: 10,
      maxProcesses: 64,
      diskMb: 1,
      maxFiles: 16,
      episodesPerProcess: 1,
      idleRetireMs: 1,
    };
    const cmd = sandboxCommand(level, { runDir, entry: 'probe.mjs', limits, uid, prlimit, fileCountLimit, seccomp });
    const r = await execa(cmd.file, cmd.args, {
      reject: false,
      timeout: 15_000,
      env: {},
      extendEnv: false,
      cwd: runDir,
      uid: cmd.uid,
      gid: cmd.gid,
    });
    return { ok: r.exitCode === 0 && r.stdout === 'sandbox-ok', output: `${r.stdout} ${r.stderr}`.trim() };
  } finally {
    await rm(root, { recursive: true, force: true });
  }
}

let detected: Promise<SandboxIsolation> | undefined;
const forced = new Map<IsolationLevel, Promise<SandboxIsolation | undefined>>();

async function detect(): Promise<SandboxIsolation> {
  const wanted = process.env.TRACE_SANDBOX_ISOLATION;
  if (wanted) {
    if (!ISOLATION_LEVELS.includes(wanted as IsolationLevel)) {
      throw new Error(`TRACE_SANDBOX_ISOLATION: '${wanted}' is not one of ${ISOLATION_LEVELS.join(', ')}`);
    }
    const iso = await isolationIfAvailable(wanted as IsolationLevel);
    if (!iso) throw new Error(`TRACE_SANDBOX_ISOLATION: '${wanted}' does not work on this machine`);
    return iso;
  }
  for (const level of ISOLATION_LEVELS) {
    const iso = await isolationIfAvailable(level);
    if (iso) return iso;
  }
  throw new Error('sandbox: node cannot start even with the permission model alone (Node ≥ 20 required)');
}

/**
 * The strongest isolation that actually works on this machine (probed once per process), or the
 * level named by TRACE_SANDBOX_ISOLATION (to pin a weaker one, e.g. where bwrap misbehaves).
 */
export function sandboxIsolation(): Promise<SandboxIsolation> {
  detected ??= detect();
  return detected;
}

/** A specific level, if it works here (tests exercise the fallbacks this way); undefined if not. */
export async function isolationIfAvailable(level: IsolationLevel): Promise<SandboxIsolation | undefined> {
  if (!forced.has(level)) {
    forced.set(
      level,
      (async () => {
        const prlimit = await works(['prlimit', '--nofile=256', '--', 'true']);
        const cgroup = (await cgroupSupport()).controls.map((c) => c.control);
        if (level === 'bwrap') {
          // Tried three times (a loaded machine can time a start out): what fails here is dropped
          // below, where the user namespace is refused, for good (rerun 84b: three failures by
          // chance fell back in silence; uids held elsewhere are no longer taken, allocateUid).
          const full = await probe(level, prlimit, true);
          if (full.ok || (await probe(level, prlimit, true)).ok || (await probe(level, prlimit, true)).ok)
            return describeIsolation(level, isRoot(), prlimit, true, cgroup);
          const why = full.output.replace(/\s+/g, ' ').slice(0, 300);
          // Where the user namespace works and only the filter fails, the filter is wrong: dropped
          // with the namespace, every sandbox ran without it (rerun 82b: a rule refused node's own
          // F_GETFL half the time, and 13 of 20 workers fell back in silence).
          if (SECCOMP && (await probe(level, prlimit, true, false)).ok)
            throw new Error(`sandbox: node does not start under the seccomp filter (seccomp.ts): ${why}`);
          console.warn(
            `sandbox: bwrap without a user namespace of its own, so without the seccomp filter and the file cap: ${why}`,
          );
        }
        return (await probe(level, prlimit, false)).ok
          ? describeIsolation(level, isRoot(), prlimit, false, cgroup)
          : undefined;
      })(),
    );
  }
  return forced.get(level)!;
}
