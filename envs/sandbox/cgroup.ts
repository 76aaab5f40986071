import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import path from 'node:path';
import { ofDeadWorker, WORKER_TAG } from './worker-tag.js';

/**
 * What a cgroup of its own does for a sandbox process tree, each where this machine lets the
 * worker make one (cgroup v2 where its subtree is delegated, v1 controllers where writable, root):
 * - `freeze`: the stop between requests, atomic for the whole tree; no signal undoes it (a SIGCONT
 *   from a POSIX timer or a message queue did undo SIGSTOP: reruns 72z, 73b);
 * - `cpu`: CPU time of every process it ever held, those the kernel reaped included (rerun 72z);
 * - `memory`: all memory the tree uses, the kernel's for it included (1 GiB of epoll watches went
 *   past every other limit: rerun 73b);
 * - `pids`: processes and threads, whatever their uid.
 */
export type CgroupControl = 'freeze' | 'cpu' | 'memory' | 'pids';
export const CGROUP_CONTROLS: CgroupControl[] = ['freeze', 'cpu', 'memory', 'pids'];

/** The v1 controller that does each; in v2 `freeze` and `cpu` are the core's, the others controllers. */
const V1_CONTROLLER: Record<CgroupControl, string> = {
  freeze: 'freezer',
  cpu: 'cpuacct',
  memory: 'memory',
  pids: 'pids',
};

/** Where the worker makes sandbox cgroups in one hierarchy: its own cgroup there. */
interface Hierarchy {
  version: 1 | 2;
  /** The worker's own cgroup dir in this hierarchy. */
  dir: string;
  controls: CgroupControl[];
}

export interface CgroupSupport {
  hierarchies: Hierarchy[];
  /** Each control this machine gives, and in which version (for the isolation summary). */
  controls: { control: CgroupControl; version: 1 | 2 }[];
}

/** A sandbox cgroup is `trace-sandbox-<worker tag>-<random suffix>` (worker-tag.ts). */
const PREFIX = 'trace-sandbox-';

/** A cgroup hierarchy mounted here, and the worker's own cgroup dir in it. */
export type OwnCgroup = { version: 1 | 2; dir: string; controllers: string[] };

/**
 * The worker's own cgroup dir in each hierarchy mounted here: its path there (`/proc/self/cgroup`)
 * under the mount point, relative to the cgroup the mount shows (`/proc/self/mountinfo`'s root
 * field: a container's mount shows only its own subtree). None where the mount does not show it.
 */
export function ownCgroups(mountinfo: string, selfCgroup: string): OwnCgroup[] {
  const memberships = selfCgroup
    .split('\n')
    .map((line) => /^\d+:([^:]*):(.*)$/.exec(line))
    .filter((m) => m !== null)
    .map(([, controllers, cgroup]) => ({ controllers: controllers ? controllers.split(',') : [], cgroup }));
  return mountinfo.split('\n').flatMap((line): OwnCgroup[] => {
    const [before, after = ''] = line.split(' - ');
    const [fstype, , superOptions = ''] = after.split(' ');
    const [, , , root, mountPoint] = before.split(' ');
    if (fstype !== 'cgroup' && fstype !== 'cgroup2') return [];
    const version = fstype === 'cgroup2' ? 2 : 1;
    const controllers = version === 2 ? [] : superOptions.split(',');
    const entry = memberships.find((m) =>
      version === 2 ? m.controllers.length === 0 : m.controllers.some((c) => controllers.includes(c)),
    );
    const relative = entry && path.posix.relative(root, entry.cgroup);
    if (relative === undefined || relative.startsWith('..')) return [];
    return [{ version, dir: path.posix.join(mountPoint, relative), controllers }];
  });
}

/** Whether a cgroup made in `dir` can hold a process and set what `control` needs. */
async function works(dir: string, version: 1 | 2, control: CgroupControl): Promise<boolean> {
  const probe = path.join(dir, `${PREFIX}${WORKER_TAG}-probe-${control}`);
  try {
    mkdirSync(probe);
  } catch {
    return false;
  }
  const child = spawn('/bin/sh', ['-c', 'read -r _'], { stdio: ['pipe', 'ignore', 'ignore'] });
  try {
    const file = CONTROL_FILE[control][version === 1 ? 'v1' : 'v2'];
    if (!existsSync(path.join(probe, file))) return false;
    if (control === 'memory') writeFileSync(path.join(probe, file), String(64 * 2 ** 20));
    if (control === 'pids') writeFileSync(path.join(probe, file), '64');
    if (control === 'freeze') writeFileSync(path.join(probe, file), version === 1 ? 'THAWED' : '0');
    writeFileSync(path.join(probe, 'cgroup.procs'), String(child.pid));
    return true;
  } catch {
    return false;
  } finally {
    child.kill('SIGKILL');
    await new Promise((resolve) => child.once('close', resolve));
    await removeDir(probe);
  }
}

/** The file each control is set or read through, by version. */
const CONTROL_FILE: Record<CgroupControl, { v1: string; v2: string }> = {
  freeze: { v1: 'freezer.state', v2: 'cgroup.freeze' },
  cpu: { v1: 'cpuacct.usage', v2: 'cpu.stat' },
  memory: { v1: 'memory.limit_in_bytes', v2: 'memory.max' },
  pids: { v1: 'pids.max', v2: 'pids.max' },
};

/**
 * The controls this machine gives the worker, each from one hierarchy: v2 first (its freezer and
 * CPU count are the core's, in every delegated subtree), else the v1 controller. Probed once per
 * process by making a cgroup and moving a process into it. None where `TRACE_SANDBOX_CGROUP=off`.
 */
export async function cgroupSupport(): Promise<CgroupSupport> {
  support ??= detect();
  return support;
}
let support: Promise<CgroupSupport> | undefined;

async function detect(): Promise<CgroupSupport> {
  const none = { hierarchies: [], controls: [] };
  if (process.env.TRACE_SANDBOX_CGROUP === 'off') return none;
  let found: OwnCgroup[];
  try {
    found = ownCgroups(readFileSync('/proc/self/mountinfo', 'utf8'), readFileSync('/proc/self/cgroup', 'utf8'));
  } catch {
    return none;
  }
  const hierarchies: Hierarchy[] = [];
  const controls: CgroupSupport['controls'] = [];
  for (const control of CGROUP_CONTROLS) {
    const candidates = [
      ...found.filter((m) => m.version === 2),
      ...found.filter((m) => m.version === 1 && m.controllers.includes(V1_CONTROLLER[control])),
    ];
    for (const { version, dir } of candidates) {
      if (!(await works(dir, version, control))) continue;
      const h = hierarchies.find((x) => x.dir === dir);
      if (h) h.controls.push(control);
      else hierarchies.push({ version, dir, controls: [control] });
      controls.push({ control, version });
      break;
    }
  }
  return { hierarchies, controls };
}

/** Removes an empty cgroup dir, waiting a little for its last processes to be reaped; false if it stays. */
async function removeDir(dir: string): Promise<boolean> {
  for (let attempt = 0; attempt < 40; attempt++) {
    try {
      rmdirSync(dir);
      return true;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return true;
      if ((e as NodeJS.ErrnoException).code !== 'EBUSY') return false;
    }
    await sleep(25);
  }
  return false;
}

const pidsOf = (dir: string) => readFileSync(path.join(dir, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean);

/** The longest `drained` waits for the kernel to finish with a killed sandbox's processes. */
const DRAIN_MS = 30_000;

/** Rounds of reading a v1 cgroup's processes and killing them, where no freezer stops its forks. */
const KILL_ROUNDS = 8;

/** Kills every process in a cgroup. */
function killAll(dir: string, freeze: ((on: boolean) => void) | undefined) {
  if (existsSync(path.join(dir, 'cgroup.kill'))) return writeFileSync(path.join(dir, 'cgroup.kill'), '1');
  // v1: frozen first, so nothing forks between the reading and the signal; a frozen process dies once thawed.
  freeze?.(true);
  for (let round = 0, pids = pidsOf(dir); pids.length && round < KILL_ROUNDS; round++, pids = pidsOf(dir)) {
    for (const pid of pids) {
      try {
        process.kill(Number(pid), 'SIGKILL');
      } catch {
        // gone meanwhile
      }
    }
    if (freeze) break;
  }
  freeze?.(false);
}

let swept: Promise<void> | undefined;
/** Kills and removes the cgroups of workers no longer running (a worker killed as it is leaves its own). */
async function sweepDeadWorkers(s: CgroupSupport) {
  for (const h of s.hierarchies) {
    for (const name of readdirSync(h.dir)) {
      if (!ofDeadWorker(name, PREFIX)) continue;
      const dir = path.join(h.dir, name);
      try {
        killAll(dir, undefined);
      } catch {
        // not ours to kill, or gone
      }
      await removeDir(dir);
    }
  }
}

/**
 * One sandbox process tree's cgroup, one dir per hierarchy. The process joins it before it
 * runs anything of its own: its command waits on a line of stdin the worker writes once it has
 * moved the process in (`join`), so every process it forks is born inside.
 */
export class SandboxCgroup {
  private constructor(private readonly dirs: { version: 1 | 2; dir: string; controls: CgroupControl[] }[]) {}

  /**
   * A new cgroup under the worker's own, with `memoryBytes` (all memory, the kernel's for the
   * tree included; no swap) and `pids` (processes and threads) as its limits where those controls exist.
   */
  static async create(s: CgroupSupport, limits: { memoryBytes: number; pids: number }): Promise<SandboxCgroup> {
    swept ??= sweepDeadWorkers(s);
    await swept;
    const name = `${PREFIX}${WORKER_TAG}-${randomBytes(6).toString('hex')}`;
    const cgroup = new SandboxCgroup(s.hierarchies.map((h) => ({ ...h, dir: path.join(h.dir, name) })));
    try {
      for (const { version, dir, controls } of cgroup.dirs) {
        mkdirSync(dir);
        if (controls.includes('memory')) {
          writeFileSync(path.join(dir, CONTROL_FILE.memory[version === 1 ? 'v1' : 'v2']), String(limits.memoryBytes));
          // No swap: memory the limit turns away is not pushed out to disk instead.
          const swap = version === 1 ? 'memory.memsw.limit_in_bytes' : 'memory.swap.max';
          if (existsSync(path.join(dir, swap)))
            writeFileSync(path.join(dir, swap), version === 1 ? String(limits.memoryBytes) : '0');
        }
        if (controls.includes('pids')) writeFileSync(path.join(dir, 'pids.max'), String(limits.pids));
      }
    } catch (err) {
      await cgroup.remove();
      throw err;
    }
    return cgroup;
  }

  private dirFor(control: CgroupControl) {
    return this.dirs.find((d) => d.controls.includes(control));
  }

  has(control: CgroupControl): boolean {
    return this.dirFor(control) !== undefined;
  }

  /** Moves a process (one that runs nothing of its own yet) into every hierarchy's cgroup. */
  join(pid: number) {
    for (const { dir } of this.dirs) writeFileSync(path.join(dir, 'cgroup.procs'), String(pid));
  }

  /** Stops (or lets go on) every process of the cgroup, and every one it forks meanwhile. */
  freeze(on: boolean) {
    const d = this.dirFor('freeze');
    if (!d) return;
    const value = d.version === 1 ? (on ? 'FROZEN' : 'THAWED') : on ? '1' : '0';
    writeFileSync(path.join(d.dir, CONTROL_FILE.freeze[d.version === 1 ? 'v1' : 'v2']), value);
  }

  /** CPU seconds every process it held has used, reaped ones included (undefined without the cpu control). */
  cpuSeconds(): number | undefined {
    const d = this.dirFor('cpu');
    if (!d) return undefined;
    try {
      if (d.version === 1) return Number(readFileSync(path.join(d.dir, 'cpuacct.usage'), 'utf8')) / 1e9;
      const usec = /^usage_usec (\d+)$/m.exec(readFileSync(path.join(d.dir, 'cpu.stat'), 'utf8'))?.[1];
      return usec === undefined ? undefined : Number(usec) / 1e6;
    } catch {
      return undefined;
    }
  }

  /** Whether it refused a process or thread for its `pids` limit. */
  pidsLimited(): boolean {
    const d = this.dirFor('pids');
    if (!d) return false;
    try {
      return Number(/^max (\d+)$/m.exec(readFileSync(path.join(d.dir, 'pids.events'), 'utf8'))?.[1] ?? 0) > 0;
    } catch {
      return false;
    }
  }

  /**
   * Waits until no process is left in it (at most DRAIN_MS): a process the kernel is still tearing
   * down is charged for that CPU (rerun 74b: freeing 5 M epoll watches took 3-5 s after the kill).
   */
  async drained() {
    const d = this.dirFor('cpu') ?? this.dirs[0];
    if (!d) return;
    const populated = () => {
      try {
        if (d.version === 2) return /^populated 1$/m.test(readFileSync(path.join(d.dir, 'cgroup.events'), 'utf8'));
        return pidsOf(d.dir).length > 0 || readFileSync(path.join(d.dir, 'tasks'), 'utf8').trim() !== '';
      } catch {
        return false;
      }
    };
    for (const start = performance.now(); populated() && performance.now() - start < DRAIN_MS;) await sleep(25);
  }

  /** Whether the kernel killed a process of it for its memory limit. */
  oomKilled(): boolean {
    const d = this.dirFor('memory');
    if (!d) return false;
    try {
      const file = d.version === 1 ? 'memory.oom_control' : 'memory.events';
      return Number(/^oom_kill (\d+)$/m.exec(readFileSync(path.join(d.dir, file), 'utf8'))?.[1] ?? 0) > 0;
    } catch {
      return false;
    }
  }

  /** Kills every process it holds, wherever in (or out of) the tree they are. */
  kill() {
    const d = this.dirFor('freeze') ?? this.dirs[0];
    if (!d) return;
    try {
      killAll(d.dir, d.controls.includes('freeze') ? (on) => this.freeze(on) : undefined);
    } catch {
      // removed already
    }
  }

  /** Kills what is left and removes its dirs (a dir that stays busy is swept by a later worker). */
  async remove() {
    this.kill();
    for (const { dir } of this.dirs) await removeDir(dir);
  }
}
