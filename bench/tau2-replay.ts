/**
 * tau2 port benchmark: gold replay of all 164 current airline + retail tasks (tool calls/s, total
 * time), the cost of a copy-on-write reset (fork of the cached DB) against a naive deep-copy reset
 * and a re-parse from disk, and evaluation cost per replayed WRITE call.
 * Run: node --import tsx bench/tau2-replay.ts
 */
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import type { Message } from '../core/messages.js';
import { evaluateEnvironment } from '../envs/tau2/evaluator.js';
import { getDomain, loadDb, type Tau2DomainName } from '../envs/tau2/domains.js';
import { Tau2State } from '../envs/tau2/state.js';
import { loadTasks } from '../envs/tau2/tasks.js';
import { Tau2Db } from '../envs/tau2/toolkit.js';

const DOMAINS: Tau2DomainName[] = ['airline', 'retail'];
const ms = (t0: number) => performance.now() - t0;
/** CPU milliseconds of this process since `c0`: less sensitive than wall time to a busy machine. */
const cpuMs = (c0: NodeJS.CpuUsage) => {
  const d = process.cpuUsage(c0);
  return (d.user + d.system) / 1000;
};
const fmt = (x: number, d = 3) => x.toFixed(d);

function timeEach(n: number, fn: () => void): number {
  const t0 = performance.now();
  for (let i = 0; i < n; i++) fn();
  return ms(t0) / n;
}

const t0 = performance.now();
for (const d of DOMAINS) Tau2State.initial(getDomain(d));
console.log(
  `load average ${os
    .loadavg()
    .map((x) => x.toFixed(1))
    .join(' ')} on ${os.cpus().length} CPUs`,
);
console.log(`cold load (parse airline 7 MB + retail DBs once per process): ${fmt(ms(t0), 1)} ms`);

let calls = 0;
let writes = 0;
let toolMs = 0;
let hashMs = 0;
const trajectories: { domain: Tau2DomainName; taskId: string; messages: Message[]; writes: number }[] = [];
const tReplay = performance.now();
const cReplay = process.cpuUsage();
let tasks = 0;
for (const d of DOMAINS) {
  const domain = getDomain(d);
  for (const task of loadTasks(d)) {
    tasks++;
    const state = Tau2State.forTask(domain, task);
    const messages: Message[] = [];
    let w = 0;
    for (const [i, a] of (task.evaluation_criteria?.actions ?? []).entries()) {
      const t = performance.now();
      const out = state.call(a.requestor, a.name, a.arguments);
      toolMs += ms(t);
      calls++;
      if (state.isMutating(a.requestor, a.name)) w++;
      messages.push({
        role: 'assistant',
        content: null,
        tool_calls: [
          { id: `c${i}`, type: 'function', function: { name: a.name, arguments: JSON.stringify(a.arguments) } },
        ],
      });
      messages.push({ role: 'tool', tool_call_id: `c${i}`, content: out.content });
    }
    writes += w;
    const th = performance.now();
    state.db.hash();
    hashMs += ms(th);
    trajectories.push({ domain: d, taskId: task.id, messages, writes: w });
  }
}
const replayMs = ms(tReplay);
console.log(
  `gold replay: ${tasks} tasks, ${calls} tool calls (${writes} WRITE) in ${fmt(replayMs, 1)} ms total (${fmt(cpuMs(cReplay), 1)} ms CPU)`,
);
console.log(
  `  tool execution: ${fmt(toolMs, 1)} ms → ${Math.round(calls / (toolMs / 1000))} tool calls/s (incl. output serialisation)`,
);
console.log(
  `  end-to-end incl. reset + DB hash per task: ${Math.round(calls / (replayMs / 1000))} tool calls/s; hash ${fmt(hashMs / tasks, 2)} ms/task`,
);

for (const d of DOMAINS) {
  const domain = getDomain(d);
  const base = Tau2State.initial(domain).db;
  const fork = timeEach(200, () => base.fork());
  const deep = timeEach(5, () => new Tau2Db(base.type, structuredClone(base.tables)));
  const reparse = timeEach(3, () => loadDb(domain.agent.dbType, d, domain.agent.dbFile));
  console.log(
    `reset ${d}: copy-on-write fork ${fmt(fork)} ms | naive deep copy ${fmt(deep, 1)} ms (${Math.round(deep / fork)}x slower) | re-parse from disk ${fmt(reparse, 1)} ms (${Math.round(reparse / fork)}x slower)`,
  );
}

const tEval = performance.now();
const cEval = process.cpuUsage();
for (const t of trajectories) {
  const task = loadTasks(t.domain).find((x) => x.id === t.taskId)!;
  const r = evaluateEnvironment({ domain: getDomain(t.domain), task, messages: t.messages, termination: 'agent_stop' });
  if (r.dbReward !== 1) throw new Error(`gold trajectory of ${t.domain} ${t.taskId} did not score DB 1`);
}
const evalMs = ms(tEval);
const evalCpu = cpuMs(cEval);
console.log(
  `evaluation (DB check: two fresh envs, gold actions, WRITE replays with output check, DB comparison) of ${trajectories.length} gold trajectories: ${fmt(evalMs / trajectories.length, 2)} ms/task, ${fmt(evalMs / writes, 2)} ms per replayed WRITE call (CPU: ${fmt(evalCpu / trajectories.length, 2)} ms/task)`,
);
