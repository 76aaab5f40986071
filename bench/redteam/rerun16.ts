/**
 * Red-team rerun 16 (an outside pass after 4cc4f14): in-sandbox angles on lastFatalReport (the
 * last fatal report on stderr names a signal death). Run by
 * `node --import tsx bench/sandbox-redteam.ts bench/redteam/rerun16.ts`.
 * Rows are judged on reading (a failure's reason: `memory` vs `crash` in the module's words).
 * The confirmed holes of this pass were measured outside the harness (scripts in /tmp/rerun16, see
 * the report):
 * - check 4's lockstep batch holds 30 distinct seeds, the trainer's batch K rollouts of each seed
 *   opened back to back: a module that rewards answering without tools only for an instance reset
 *   >= 5 times with no evaluate between (calibration's pool of 4 never does) passes checks 1-5 and
 *   scores 1 on all 64 trainer-pattern episodes (0 one at a time);
 * - check 4 sends its 30 resets/evaluates at once, each under wallMs from the moment it is sent while
 *   the child answers in turn: an honest evaluate() of ~0.5 s fails validation as non_triviality
 *   "the environment crashed: ... evaluate did not answer in time (wallMs = 10000 ms)";
 * - the grammar conversion's mergeAllOf runs before any budget charge: allOf of 2,000 $refs to a
 *   5,000-property definition stalled the worker's event loop 5.8 s in check 1 (80 KB of schema;
 *   R x P work, minutes at the 100,000-value cap), 12,000 $refs to 10,000 required names took 6.4 s
 *   and 1.5 GiB before "Invalid array length".
 */
import type { Attack } from '../sandbox-redteam.js';

const N = 'const g: any = globalThis; g.n = (g.n ?? 0) + 1;';
const OOM = 'const a: any[] = []; for (;;) a.push(new Array(4096).fill(g.n));';

const attacks: Record<string, Attack> = {
  // a made-up native check queued on the threadpool, racing V8's own out-of-memory report
  asyncFakeCheckRacingRealOom: `${N}
    if (g.n === 3) { for (let i = 0; i < 2000; i++) fs.write(2, '# Check failed: made up ' + i + '\\n', () => {}); ${OOM} }
    return 'n' + g.n;`,
  // made-up out-of-memory text, then a self-sent abort (a death with no report of its own)
  fakeOomThenAbort: `${N}
    if (g.n === 3) { console.error('FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory'); try { (process as any).abort(); } catch (e: any) { return 'abort ' + (e.code ?? e.name); } }
    return 'n' + g.n;`,
  fakeOomThenSelfSignal: `${N}
    if (g.n === 3) { console.error('Fatal process out of memory: made up'); try { process.kill(process.pid, 'SIGSEGV'); } catch (e: any) { return 'kill ' + (e.code ?? e.name); } }
    return 'n' + g.n;`,
  // made-up check text, then 4 KiB of noise so that the real report's start falls out of the tail
  fakeCheckThenRealOomAfterNoise: `${N}
    if (g.n === 3) { console.error('# Check failed: made up'); console.error('x'.repeat(4000)); ${OOM} }
    return 'n' + g.n;`,
  // made-up check text, then a real V8 fatal on a too-large Set (a size error, not a heap limit)
  fakeCheckThenSetOverflow: `${N}
    if (g.n === 3) { console.error('# Check failed: made up'); const s = new Set<number>(); try { for (let i = 0; ; i++) s.add(i); } catch (e: any) { return 'set ' + e.name + ' ' + s.size; } }
    return 'n' + g.n;`,
  // made-up out-of-memory text, then a real native check? (a closed handle's internals)
  fakeOomThenStackOverflowInNative: `${N}
    if (g.n === 3) { console.error('JavaScript heap out of memory'); const f = (d: number): string => JSON.stringify({ d, x: f(d + 1) }); try { f(0); } catch (e: any) { return 'so ' + e.name; } }
    return 'n' + g.n;`,
  // made-up text written straight to fd 2 with the worker's death marker shapes, then exit code 128+6
  fakeCheckThenExit134: `${N}
    if (g.n === 3) { fs.writeSync(2, '# Check failed: made up\\n'); process.exit(134); }
    return 'n' + g.n;`,
};
export default attacks;
