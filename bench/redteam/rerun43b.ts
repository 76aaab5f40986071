/**
 * Red-team reruns 42b and 43b (outside passes on 10a38cf and 40ae0de at the bwrap level: the env's CPU total and
 * tool schemas). Run by `node --import tsx bench/sandbox-redteam.ts bench/redteam/rerun43b.ts`. Their findings were
 * on the worker's side (probes in /tmp/rerun42b/probe and /tmp/rerun43b/probe; RED-TEAM.md "Red-team rerun 42b", "43b"):
 * cpuSeconds counted as 0 for a process that died, a 1 s floor per new process, processes alive together each
 * given the whole remainder, close's grace, shutdowns that overlap losing CPU, a failed start's CPU dropped, and
 * long enum members (136 s of xgrammar for one tool) or strings reached through $refs (206 MiB in the trainer).
 * The probe below reads what the module can of its own CPU limit (RLIMIT_CPU tells validation from training).
 */
import type { Attack } from '../sandbox-redteam.js';

const attacks: Record<string, Attack> = {
  // refused or frozen: /proc/self/limits is hidden, resourceUsage frozen
  cpuLimit: `const t = (f: () => unknown) => { try { return String(f()).slice(0, 80); } catch (e) { return 'E:' + String((e as Error).message).slice(0, 60); } };
    return [t(() => fs.readFileSync('/proc/self/limits', 'utf8')), t(() => JSON.stringify(process.resourceUsage()))].join(' | ');`,
};
export default attacks;
