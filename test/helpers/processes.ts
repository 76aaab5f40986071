import { readdirSync, readFileSync } from 'node:fs';

/** State and parent of a process from /proc (undefined once it is gone). */
function procStat(pid: number | string): { state: string; ppid: number } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const [state, ppid] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { state, ppid: Number(ppid) };
  } catch {
    return undefined;
  }
}

/** A process that has exited but is not reaped yet (this container's init may never reap it) counts as dead. */
export const alive = (pid: number) => ![undefined, 'Z', 'X'].includes(procStat(pid)?.state);

/** Every live descendant of `pid`. */
export function descendants(pid: number): number[] {
  const children = new Map<number, number[]>();
  for (const entry of readdirSync('/proc')) {
    const st = /^\d+$/.test(entry) ? procStat(entry) : undefined;
    if (!st || !alive(Number(entry))) continue;
    children.set(st.ppid, [...(children.get(st.ppid) ?? []), Number(entry)]);
  }
  const out: number[] = [];
  for (let todo = [pid]; todo.length;) {
    const next = children.get(todo.pop()!) ?? [];
    out.push(...next);
    todo.push(...next);
  }
  return out;
}
