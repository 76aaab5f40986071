/**
 * Red-team rerun 17 (an outside pass on c4dd045): in-sandbox probes for what could tell a training
 * process from a validation one, judged by the harness (real time, host data, forged answers). Run by
 * `node --import tsx bench/sandbox-redteam.ts bench/redteam/rerun17.ts`.
 * The confirmed holes of this pass are validation gaming, measured outside the harness (scripts in
 * /tmp/rerun17, see the report):
 * - the trainer's tool-call ids (`call_<turn>_0`, trace_trainer/chat.py `_call` from rollout.py
 *   `_advance`) are never sent by checks 1-6 (gold `gold_<i>`, random `rnd_<i>`, the policy server
 *   `call_<n>_0` with n its global request counter, the llama engine `call_<24 hex>`): a module paying
 *   any call only under the trainer's ids passed checks 1-5, calibration as the honest module, and
 *   scored 1.0 on 64/64 wrong episodes of the real `collect` (honest 0.0);
 * - the trainer's seeds are random.Random(training.seed = 0).randrange(2**31): a module that
 *   recomputes the first 20,000 (MT19937 in 20 lines) and pays anything there passed checks 1-5 and
 *   scored 1.0 on 192/192 trivial episodes of 3 iterations (random seeds: 0.0);
 * - the gate's gold demonstrations replay the fixed seeds 0..n-1 (activities/training.ts
 *   storeGoldDemonstrations, opt-in gate.goldDemonstrations): a module with wrong gold paid 1 on
 *   seeds < 16 passed checks 1-5 and had 16/16 wrong demonstrations stored;
 * - (bounded) ~4 MiB observations and evaluate details in training only: 792 MB of trajectory JSON
 *   for one 64-episode iteration (the trainer writes it to the store), collect 277 s; the runner's
 *   MAC spends the module's own cpuSeconds on it (~0.6 s per 4 MiB step, ~1.4 s per evaluate).
 */
import type { Attack } from '../sandbox-redteam.js';

const J = (expr: string): Attack =>
  `try { return JSON.stringify(${expr}); } catch (e: any) { return 'error ' + (e.code ?? e.name) + ' ' + String(e.message).slice(0, 120); }`;
const read = (p: string): Attack => J(`fs.readFileSync(${JSON.stringify(p)}, 'utf8').slice(0, 400)`);

const attacks: Record<string, Attack> = {
  // the process's own view of its launch: argv (--close-fds list), execArgv, cwd, ids
  launchIdentity: J(
    '[process.argv.slice(2), process.execArgv, process.cwd(), process.pid, process.ppid, process.getuid?.(), process.getgid?.(), Object.keys(process.env)]',
  ),
  // scheduler statistics: exec_start, sum_exec_runtime, nr_switches (a stop/continue is a switch)
  procSelfSched: read('/proc/self/sched'),
  procSelfSchedstat: read('/proc/self/schedstat'),
  procThreadSelfStat: read('/proc/thread-self/stat'),
  // voluntary/nonvoluntary context switches (each SIGSTOP/SIGCONT between requests adds some)
  procSelfStatus: read('/proc/self/status'),
  // the request pipe's position and flags
  procSelfFdinfo0: read('/proc/self/fdinfo/0'),
  procSelfIo: read('/proc/self/io'),
  // resident memory across the pause (rss from /proc/self/statm through libuv)
  memoryAcrossPause: J(
    '[process.memoryUsage().rss > 0, process.resourceUsage().voluntaryContextSwitches, process.resourceUsage().involuntaryContextSwitches]',
  ),
};
export default attacks;
