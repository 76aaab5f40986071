/**
 * Red-team rerun 18 (an outside pass on 7af5511): in-sandbox probes of machine-wide /proc readings that
 * could tell a loaded training machine from validation (real time, host data), judged by the harness.
 * Run by `node --import tsx bench/sandbox-redteam.ts bench/redteam/rerun18.ts`.
 * The confirmed holes of this pass are validation gaming through the trainer's real `collect`,
 * measured outside the harness (scripts in /tmp/rerun18, see the report):
 * - an empty (or whitespace-only) assistant reply is a `message` step with content '' in training
 *   (trace_trainer/rollout.py `_advance`), never in validation (stopPolicy and the base policy's empty
 *   reply end the episode without a request, validate.ts `stopPolicy`, `llmTurns`);
 * - a length cut (max_seq_len 4096) ends a training episode as 'max_steps' after 1 turn, which
 *   validation sends only after maxTurns turns; the module forces the cut with ~30 KB observations;
 * - tool calls whose arguments are not a JSON object (chat.py `_call` keeps a string as is) or miss a
 *   required property: check 4's random calls are always schema-shaped (native tool format only);
 * - evaluate `components` are not capped (only `details`): ~254 MB of trajectory JSON per iteration.
 */
import type { Attack } from '../sandbox-redteam.js';

const J = (expr: string): Attack =>
  `try { return JSON.stringify(${expr}); } catch (e: any) { return 'error ' + (e.code ?? e.name) + ' ' + String(e.message).slice(0, 120); }`;
const read = (p: string): Attack => J(`fs.readFileSync(${JSON.stringify(p)}, 'utf8').slice(0, 400)`);
const list = (p: string): Attack => J(`fs.readdirSync(${JSON.stringify(p)})`);

const attacks: Record<string, Attack> = {
  // pressure stall information: host-wide CPU/memory/io pressure, moves with the trainer's load
  procPressureCpu: read('/proc/pressure/cpu'),
  procPressureList: list('/proc/pressure'),
  // load average, host CPU counters, uptime, memory
  procLoadavg: read('/proc/loadavg'),
  procStat: read('/proc/stat'),
  procUptime: read('/proc/uptime'),
  procMeminfo: read('/proc/meminfo'),
  // the sandbox's mounts and cgroup (a host path or a cgroup name would tell the worker's role)
  procSelfMountinfo: read('/proc/self/mountinfo'),
  procSelfCgroup: read('/proc/self/cgroup'),
};
export default attacks;
