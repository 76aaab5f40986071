/**
 * `trace` start-up: the compiled CLI (.build/cli, cli/build.mjs) against the same sources run
 * through tsx (TRACE_CLI_TSX=1), on a command that rejects a bad config (no server needed) and on
 * --help, beside bare `node -e 0` (the floor). Runs are interleaved so load changes hit all
 * variants alike; wall and CPU (user+sys, from /proc/self/stat's children times) medians.
 * Run: node --import tsx bench/cli-startup.ts [--runs N]
 */
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { PROJECT_ROOT } from '../infra/temporal.js';

const runsArg = process.argv.indexOf('--runs');
const RUNS = runsArg > 0 ? Number(process.argv[runsArg + 1]) : 10;
const TRACE = path.join(PROJECT_ROOT, 'cli', 'trace.mjs');
const TICK_S = 0.01; // USER_HZ

/** CPU seconds of this process's waited-for children (cutime + cstime). */
function childCpu(): number {
  const fields = readFileSync('/proc/self/stat', 'utf8').split(') ')[1].split(' ');
  return (Number(fields[13]) + Number(fields[14])) * TICK_S; // fields 16 and 17 of stat(5)
}

function timed(args: string[], env: NodeJS.ProcessEnv): { wall: number; cpu: number } {
  const cpu0 = childCpu();
  const t0 = performance.now();
  const r = spawnSync(process.execPath, args, { cwd: PROJECT_ROOT, env, encoding: 'utf8' });
  const wall = (performance.now() - t0) / 1000;
  if (r.error) throw r.error;
  return { wall, cpu: childCpu() - cpu0 };
}

const dir = mkdtempSync(path.join(os.tmpdir(), 'trace-bench-cli-'));
const bad = path.join(dir, 'bad.yaml');
writeFileSync(bad, 'env: {name: toy-orders}\nrollouts: {batchSize: 0}\n');
const plain = { ...process.env, TRACE_CLI_TSX: '0' };
const tsx = { ...process.env, TRACE_CLI_TSX: '1' };
const variants: [string, string[], NodeJS.ProcessEnv][] = [
  ['node -e 0 (floor)', ['-e', '0'], plain],
  ['trace run bad.yaml, compiled', [TRACE, 'run', bad], plain],
  ['trace run bad.yaml, tsx', [TRACE, 'run', bad], tsx],
  ['trace --help, compiled', [TRACE, '--help'], plain],
  ['trace --help, tsx', [TRACE, '--help'], tsx],
];

timed([TRACE, '--help'], plain); // builds the bundle if it is stale, so no run below pays for it
const samples = new Map(variants.map(([name]) => [name, [] as { wall: number; cpu: number }[]]));
for (let i = 0; i < RUNS; i++) for (const [name, args, env] of variants) samples.get(name)!.push(timed(args, env));
rmSync(dir, { recursive: true, force: true });

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const med = (name: string) => ({
  wall: median(samples.get(name)!.map((s) => s.wall)),
  cpu: median(samples.get(name)!.map((s) => s.cpu)),
});
console.log(
  `${RUNS} runs each, interleaved; load average ${os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')} on ${os.cpus().length} cores`,
);
console.log('variant                          wall median   cpu median');
for (const [name] of variants) {
  const m = med(name);
  console.log(`${name.padEnd(32)} ${m.wall.toFixed(3).padStart(8)} s  ${m.cpu.toFixed(2).padStart(8)} s`);
}
for (const cmd of ['trace run bad.yaml', 'trace --help']) {
  const c = med(`${cmd}, compiled`);
  const t = med(`${cmd}, tsx`);
  console.log(`${cmd}: tsx/compiled ${(t.wall / c.wall).toFixed(2)}x wall, ${(t.cpu / c.cpu).toFixed(2)}x cpu`);
}
