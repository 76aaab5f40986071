import { readlinkSync } from 'node:fs';

/**
 * What the worker names its sandbox dirs and cgroups after, `<pid ns>.<pid>`: a pid says whether
 * its worker runs only within its own pid namespace (containers may share a /tmp, or a cgroup).
 */
const PID_NAMESPACE = (() => {
  try {
    return /\d+/.exec(readlinkSync('/proc/self/ns/pid'))?.[0] ?? '0';
  } catch {
    return '0';
  }
})();
export const WORKER_TAG = `${PID_NAMESPACE}.${process.pid}`;

/** Whether `name` (`<prefix><pid ns>.<pid>-…`) was made by a worker of this pid namespace that no longer runs. */
export function ofDeadWorker(name: string, prefix: string): boolean {
  const [, ns, pid] = new RegExp(`^${prefix}(\\d+)\\.(\\d+)-`).exec(name) ?? [];
  if (ns !== PID_NAMESPACE || Number(pid) === process.pid) return false;
  try {
    process.kill(Number(pid), 0);
    return false;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code !== 'EPERM';
  }
}
