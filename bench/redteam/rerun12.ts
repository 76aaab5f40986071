/**
 * Red-team rerun 12 (outside team): new angles, run by
 * `node --import tsx bench/sandbox-redteam.ts bench/redteam/rerun12.ts`.
 * `fs`, `net`, `cp`, `Worker` are imported by the attack module; each body returns its reading.
 */
import type { Attack } from '../sandbox-redteam.js';

/** Counts requests in this process. */
const N = 'const g: any = globalThis; g.n = (g.n ?? 0) + 1;';
/** A few real-I/O turns of the event loop (no virtual timer involved). */
const TURN = "const turn = async (k = 5) => { for (let i = 0; i < k; i++) await fs.promises.stat('.'); };";

const attacks: Record<string, Attack> = {
  // --- readline's stamp: an own property on the instance shadows the runner's inert accessor ---
  readLinesOwnStamp: `fs.writeFileSync('cr.txt', 'a\\r');
    const fh = await fs.promises.open('cr.txt', 'r');
    const rl: any = (fh as any).readLines();
    let p: any = rl; let sym: any;
    while (p && !sym) { sym = Object.getOwnPropertySymbols(p).find((s) => s.description === '_sawReturnAt'); p = Object.getPrototypeOf(p); }
    Object.defineProperty(rl, sym, { value: 0, writable: true, configurable: true, enumerable: true });
    const lines: string[] = [];
    rl.on('line', (l: string) => lines.push(l));
    await new Promise((r) => rl.on('close', r));
    return JSON.stringify([lines, String(rl[sym])]);`,
  // the same through the class its constructor leads to, on a PassThrough of the module's own
  readLinesCtorOwnStamp: `const { PassThrough } = await import('node:stream');
    fs.writeFileSync('e.txt', '');
    const fh = await fs.promises.open('e.txt', 'r');
    const RL: any = (fh as any).readLines().constructor;
    const input = new PassThrough();
    const rl: any = new RL({ input, crlfDelay: 100 });
    let p: any = rl; let sym: any;
    while (p && !sym) { sym = Object.getOwnPropertySymbols(p).find((s) => s.description === '_sawReturnAt'); p = Object.getPrototypeOf(p); }
    Object.defineProperty(rl, sym, { value: 0, writable: true, configurable: true });
    input.write('x\\r');
    for (let i = 0; i < 3; i++) await fs.promises.stat('.');
    const v = String(rl[sym]); rl.close(); await fh.close().catch(() => {});
    return JSON.stringify([typeof sym, v]);`,
  // the stamp's delta without reading it: crlfDelay compares the own stamp with Node's clock,
  // so a '\\n' after a '\\r' is dropped only when less than crlfDelay ms of real time passed
  readLinesCrlfAcrossPause: `${N} ${TURN}
    const { PassThrough } = await import('node:stream');
    if (g.n === 1) {
      fs.writeFileSync('e.txt', '');
      g.fh = await fs.promises.open('e.txt', 'r');
      const RL: any = (g.fh as any).readLines().constructor;
      g.input = new PassThrough();
      g.rl = new RL({ input: g.input, crlfDelay: 400 });
      let p: any = g.rl; let sym: any;
      while (p && !sym) { sym = Object.getOwnPropertySymbols(p).find((s) => s.description === '_sawReturnAt'); p = Object.getPrototypeOf(p); }
      Object.defineProperty(g.rl, sym, { value: 0, writable: true, configurable: true });
      g.lines = [];
      g.rl.on('line', (l: string) => g.lines.push(JSON.stringify(l)));
    }
    if (g.n === 2) g.input.write('a\\r');
    if (g.n === 3) g.input.write('\\nb\\n');
    await turn();
    return g.lines.join(',');`,
  // --- real Node timers captured before the runner by a static import (readline's keypress decoder) ---
  keypressEscapeTimer: {
    atImport: "import * as rlStatic from 'node:readline';",
    body: `${N} ${TURN}
    const { PassThrough } = await import('node:stream');
    if (g.n === 2) {
      g.fired = [];
      for (const ms of [100, 300, 600, 1200]) {
        const s = new PassThrough();
        (rlStatic as any).emitKeypressEvents(s, { escapeCodeTimeout: ms });
        s.on('keypress', (_c: any, k: any) => g.fired.push(ms + ':' + k?.name));
        s.write('\\x1b');
      }
    }
    await turn();
    return JSON.stringify(g.fired ?? []);`,
  },
  // the same without a static import (control: readline loads after the virtual timers)
  keypressEscapeTimerLazy: `${N} ${TURN}
    const { PassThrough } = await import('node:stream');
    const rl: any = await import('node:readline');
    if (g.n === 2) {
      g.fired = [];
      for (const ms of [100, 300, 600, 1200]) {
        const s = new PassThrough();
        rl.emitKeypressEvents(s, { escapeCodeTimeout: ms });
        s.on('keypress', (_c: any, k: any) => g.fired.push(ms + ':' + k?.name));
        s.write('\\x1b');
      }
    }
    await turn();
    return JSON.stringify(g.fired ?? []);`,
  // --- node:test loaded by a static import: real createHook, real hrtime, real setTimeout ---
  testRunnerTimeout: {
    atImport: "import { test as nodeTest } from 'node:test';",
    body: `${N} ${TURN}
    if (g.n === 2) {
      g.res = [];
      for (const ms of [150, 400, 700]) nodeTest('t' + ms, { timeout: ms }, () => new Promise(() => {})).then(() => g.res.push(ms), (e: any) => g.res.push('e' + ms));
    }
    await turn();
    return JSON.stringify(g.res ?? []);`,
  },
  testRunnerDuration: {
    atImport: "import { test as nodeTest } from 'node:test';",
    body: `${N} ${TURN}
    if (g.n === 1) {
      g.out = '';
      const w = process.stderr.write;
      (process.stderr as any).write = function (this: any, c: any, ...a: any[]) { g.out += String(c); return w.call(this, c, ...a); };
    }
    if (g.n === 2) { nodeTest('held', () => new Promise((r) => { g.release = r; })); }
    if (g.n === 3) g.release();
    await turn(20);
    const d = [...String(g.out).matchAll(/duration_ms[: ]+([0-9.]+)|\\(([0-9.]+)ms\\)/g)].map((m) => Math.floor(Number(m[1] ?? m[2]) / 300));
    return JSON.stringify(d);`,
  },
  // node:test with its reporter's writes to the real fd-1 stream (made by node:test as it loaded) caught
  testRunnerTimeoutQuiet: {
    atImport:
      "import { test as nodeTest } from 'node:test'; import netStatic from 'node:net'; { const g: any = globalThis; g.out = ''; const w = (netStatic as any).Socket.prototype.write; (netStatic as any).Socket.prototype.write = function (this: any, c: any, ...a: any[]) { if (this._handle?.fd === 1) { g.out += String(c); const cb = a.find((x: any) => typeof x === 'function'); if (cb) process.nextTick(cb); return true; } return w.call(this, c, ...a); }; }",
    body: `${N} ${TURN}
    if (g.n === 2) {
      g.res = [];
      for (const ms of [150, 400, 700, 1500]) nodeTest('t' + ms, { timeout: ms }, () => new Promise(() => {})).then(() => g.res.push(ms), () => g.res.push('e' + ms));
    }
    await turn(10);
    return JSON.stringify([g.res ?? [], (String(g.out).match(/timed out after \\d+ms/g) ?? [])]);`,
  },
  testRunnerDurationQuiet: {
    atImport:
      "import { test as nodeTest } from 'node:test'; import netStatic from 'node:net'; { const g: any = globalThis; g.out = ''; const w = (netStatic as any).Socket.prototype.write; (netStatic as any).Socket.prototype.write = function (this: any, c: any, ...a: any[]) { if (this._handle?.fd === 1) { g.out += String(c); const cb = a.find((x: any) => typeof x === 'function'); if (cb) process.nextTick(cb); return true; } return w.call(this, c, ...a); }; }",
    body: `${N} ${TURN}
    if (g.n === 2) { nodeTest('held', () => new Promise((r) => { g.release = r; })); }
    if (g.n === 3) g.release();
    await turn(20);
    const d = [...String(g.out).matchAll(/duration_ms[: ]+([0-9.]+)/g)].map((m) => Math.floor(Number(m[1]) / 300));
    return JSON.stringify(d);`,
  },
  // --- the real WeakRef, past the runner's replacement: AbortSignal.any keeps real ones under a symbol ---
  weakRefRealViaAbortAny: `const g: any = globalThis;
    if (!g.__set) {
      g.__set = true;
      const ac = new AbortController(); const s: any = AbortSignal.any([ac.signal]);
      const sym = Object.getOwnPropertySymbols(s).find((x) => x.description === 'kSourceSignals')!;
      const ref: any = [...s[sym]][0];
      g.RealWeakRef = Object.getPrototypeOf(ref.constructor);
      g.refs = []; for (let i = 0; i < 1000; i++) g.refs.push(new g.RealWeakRef({ i }));
    }
    for (let i = 0; i < 40; i++) new Array(100000).fill(i);
    await fs.promises.stat('.');
    return JSON.stringify([g.RealWeakRef !== WeakRef, g.RealWeakRef.name, g.refs.filter((r: any) => r.deref() === undefined).length]);`,
  // the same with no garbage of the module's: only a collection V8 starts by itself (time, idle) would show
  weakRefRealNoGarbage: `const g: any = globalThis;
    if (!g.__set) {
      g.__set = true;
      const ac = new AbortController(); const s: any = AbortSignal.any([ac.signal]);
      const sym = Object.getOwnPropertySymbols(s).find((x) => x.description === 'kSourceSignals')!;
      const RealWeakRef: any = Object.getPrototypeOf([...s[sym]][0].constructor);
      g.refs = []; for (let i = 0; i < 5000; i++) g.refs.push(new RealWeakRef({ i, pad: new Array(20).fill(i) }));
    }
    for (let i = 0; i < 3; i++) await fs.promises.stat('.');
    return String(g.refs.filter((r: any) => r.deref() === undefined).length);`,
  // a major collection started by allocation at the 2nd request and left unfinished: does it finish across the pause?
  weakRefRealIncrementalGc: `${N} ${TURN}
    if (g.n === 1) {
      const ac = new AbortController(); const s: any = AbortSignal.any([ac.signal]);
      const sym = Object.getOwnPropertySymbols(s).find((x) => x.description === 'kSourceSignals')!;
      const RealWeakRef: any = Object.getPrototypeOf([...s[sym]][0].constructor);
      g.refs = []; for (let i = 0; i < 5000; i++) g.refs.push(new RealWeakRef({ i }));
    }
    if (g.n === 2) { let keep: any[] = []; for (let i = 0; i < 24; i++) { keep.push(new Array(1 << 20).fill(i)); if (keep.length > 4) keep.shift(); } keep = []; }
    await turn(2);
    return String(g.refs.filter((r: any) => r.deref() === undefined).length);`,
  // --- node:test/reporters loaded by a static import: junit took os.hostname before the runner ---
  junitHostname: {
    atImport: "import { junit as junitReporter } from 'node:test/reporters';",
    body: `const src = (async function* () { yield { type: 'test:start', data: { name: 's', nesting: 0 } }; yield { type: 'test:start', data: { name: 'c', nesting: 1 } }; yield { type: 'test:pass', data: { name: 'c', nesting: 1, details: { duration_ms: 1 } } }; yield { type: 'test:pass', data: { name: 's', nesting: 0, details: { duration_ms: 1 } } }; })();
    let out = ''; for await (const c of (junitReporter as any)(src)) out += c;
    return (out.match(/hostname="[^"]*"/) ?? ['none'])[0];`,
  },
  // --- host files outside the sandbox: existence and type through the module resolver (no permission check) ---
  resolverProbesHostFiles: `const { createRequire, Module }: any = await import('node:module');
    const req = createRequire(import.meta.url);
    const paths = ['/usr/bin/nvidia-smi', '/usr/local/cuda', '/usr/local/go/VERSION', '/usr/bin/docker', '/usr/bin/python3', '/usr/bin/bwrap',
      '/usr/lib/node_modules/npm', '/usr/share/zoneinfo/UTC', '/proc/uptime', '/proc/sys/kernel/random/boot_id', '/proc/1/environ', '/dev/null', process.execPath, '/no/such/file'];
    const out = paths.map((p) => {
      let r: string, f: string, m: string;
      try { r = req.resolve(p); } catch (e: any) { r = e.code; }
      try { f = String(Module._findPath(p, [], false)); } catch (e: any) { f = e.code; }
      return p + ' resolve=' + r + ' findPath=' + f;
    });
    for (const p of ['/usr/bin/python3', '/no/such/file']) { try { await import(p); out.push(p + ' import=ok'); } catch (e: any) { out.push(p + ' import=' + e.code); } }
    return JSON.stringify(out);`,
  // --- named imports of node:process: refusals defined after the runner's syncBuiltinESMExports never reach them ---
  processReportNamedImport: {
    atImport:
      "import { report as realReport, stdin as realStdin } from 'node:process'; (realStdin as any)._handle?.setBlocking?.(true);",
    body: `const r: any = (realReport as any).getReport();
    const h = r.header;
    return JSON.stringify({ osRelease: h.osRelease, cpu: h.cpus?.[0]?.model, cpus: h.cpus?.length, host: h.host, now: h.dumpEventTimeStamp, time: h.dumpEventTime,
      cpuSec: Math.round((r.resourceUsage?.userCpuSeconds ?? 0) * 1000), libs: (r.sharedObjects ?? []).slice(0, 3), handles: (r.libuv ?? []).map((x: any) => x.type) });`,
  },
  activeRequestsNamedImport: {
    atImport:
      "import { _getActiveRequests as realRequests, _getActiveHandles as realHandles, stdin as realStdin } from 'node:process'; (realStdin as any)._handle?.setBlocking?.(true);",
    body: `${N}
    const reqs: any[] = (realRequests as any)();
    const hs: any[] = (realHandles as any)();
    if (g.n === 1) {
      g.sizes = [];
      for (const q of reqs) { const orig = q.oncomplete; if (typeof orig === 'function') q.oncomplete = function (this: any, err: any, n: any) { g.sizes.push(n); return orig.call(this, err, n); }; }
    }
    return JSON.stringify({ reqs: reqs.map((q) => q.constructor?.name + ':' + String(q.oncomplete).slice(0, 40)), handles: hs.map((x) => x.constructor?.name + ':' + (x._handle?.fd ?? x.fd)), runnerReadSizes: g.sizes });`,
  },
  // the runner's own pending read of fd 0 (its FSReqCallback), wrapped: every request's byte count passes through the module
  runnerReadHooked: {
    atImport:
      "import { _getActiveRequests as realRequests2, stdin as realStdin2 } from 'node:process'; (realStdin2 as any)._handle?.setBlocking?.(true);",
    body: `${N}
    if (g.n === 2) {
      g.sizes = []; g.hooked = 0;
      for (const q of (realRequests2 as any)()) { const orig = q.oncomplete; if (typeof orig === 'function' && /bytesRead/.test(String(orig))) { g.hooked++; q.oncomplete = (err: any, n: any) => { g.sizes.push(n); return orig(err, n); }; } }
    }
    return JSON.stringify([g.hooked ?? 0, g.sizes ?? []]);`,
  },
  // --- node:test's runner spawns through child_process captured before the refusal ---
  testRunnerRunSpawn: {
    atImport: "import { run as nodeRun } from 'node:test';",
    body: `try { fs.writeFileSync('a.test.mjs', 'console.log(1)'); const s: any = nodeRun({ files: ['a.test.mjs'] }); const ev: string[] = []; for await (const e of s) { ev.push(e.type + ':' + JSON.stringify(e.data?.details?.error?.code ?? e.data?.message ?? '').slice(0, 80)); if (ev.length > 8) break; } return JSON.stringify(ev); } catch (e: any) { return 'refused ' + (e.code ?? e.name); }`,
  },
  // --- domain loaded by a static import: a real async hook; callbacks counted per request ---
  domainStaticHook: {
    atImport:
      "import domainMod from 'node:domain'; { const g: any = globalThis; g.enters = 0; const d: any = domainMod.create(); d.on('error', () => {}); const e = d.enter; d.enter = function (this: any) { g.enters++; return e.call(this); }; d.enter(); g.dom = d; }",
    body: `${N} ${TURN} const before = g.enters; await turn(); return JSON.stringify([g.n, g.enters - before]);`,
  },
  // --- the stop between requests, from the inside ---
  sigcontCount: `const g: any = globalThis; if (!g.__set) { g.__set = true; g.c = 0; process.on('SIGCONT', () => { g.c++; }); } await fs.promises.stat('.'); return String(g.c);`,
  // --- exit codes and signals the worker reads as a limit ---
  selfSigxcpu: `${N} if (g.n === 3) process.kill(process.pid, 'SIGXCPU'); return 'n' + g.n;`,
  selfSigxfsz: `${N} if (g.n === 3) process.kill(process.pid, 'SIGXFSZ'); return 'n' + g.n;`,
  exitCodeAsSigxcpu: `${N} if (g.n === 3) process.exit(128 + 24); return 'n' + g.n;`,
  fakeOomText: `${N} if (g.n === 3) { fs.writeSync(2, 'FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory\\n'); process.exit(134); } return 'n' + g.n;`,
};

export default attacks;
