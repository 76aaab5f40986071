/**
 * Red-team rerun 41b (an outside pass on 9e9b0dc at the bwrap level, aimed at the sandbox boundary).
 * Run by `node --import tsx bench/sandbox-redteam.ts bench/redteam/rerun41b.ts`. Nothing read host
 * files or secrets, reached a host socket, wrote outside scratch, or read a real clock or the CPU
 * limit (23 probes contained). Its findings were on the worker's side (scripts in /tmp/rerun41b):
 * - a tool schema's `required` list of 14 000 names reached 4 900 times through $refs passed the
 *   worker's start-up check in 23 s of its CPU, 1.5 s per call check (fixed in d706497: every value
 *   counts toward the 20 000 the trainer inlines; the call check charges each name);
 * - a module writing a byte at a time to fd 1 grew the worker's heap 67 MiB per 2.5 MB (fixed: the
 *   unended line is one buffer);
 * - `process.title` set by the module showed on the host (`ps`, /proc/<pid>/stat; fixed: refused).
 * The two in-sandbox ones are below; the harness reads their answers.
 */
import type { Attack } from '../sandbox-redteam.js';

const attacks: Record<string, Attack> = {
  // refused now (permission); the host's name of the process was the module's text
  processTitle: `try { process.title = 'fake) R 1 2 3'; return 'set ' + process.title; } catch (e) { return 'refused: ' + (e as Error).message; }`,
  // the worker holds the unended line as one buffer; the request times out at the wall clock
  byteAtATime: `for (let i = 0; i < 200000; i++) { fs.writeSync(1, 'x'); if (i % 64 === 0) await new Promise((r) => setImmediate(r)); } return 'done';`,
};
export default attacks;
