/**
 * `oneLine` (the module's text in a SandboxError, escaped and cut to one line) on 2 M newlines in a
 * thrown error against 2 M plain characters, the baseline, in this process: the worker ran it on
 * every such answer, and escaping the whole text held its event loop 0.3-0.45 s (rerun 72f).
 * Run: node --import tsx bench/one-line.ts [--runs N]
 */
import { performance } from 'node:perf_hooks';
import { oneLine } from '../envs/sandbox/process.js';

const runsArg = process.argv.indexOf('--runs');
const RUNS = runsArg > 0 ? Number(process.argv[runsArg + 1]) : 20;
const LENGTH = 2_000_000; // newlines a 4 MiB response holds, each written as two bytes of JSON

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const inputs = { newlines: '\n'.repeat(LENGTH), plain: 'a'.repeat(LENGTH) };
const ms: Record<keyof typeof inputs, number[]> = { newlines: [], plain: [] };
for (let run = 0; run < RUNS; run++) {
  // Interleaved, so load changes hit both alike.
  for (const name of ['newlines', 'plain'] as const) {
    const t0 = performance.now();
    oneLine(inputs[name]);
    ms[name].push(performance.now() - t0);
  }
}
const [escaped, plain] = [median(ms.newlines), median(ms.plain)];
console.log(
  `oneLine, ${LENGTH} characters, median of ${RUNS}: newlines ${escaped.toFixed(3)} ms, plain ${plain.toFixed(3)} ms, ratio ${(escaped / plain).toFixed(1)}`,
);
