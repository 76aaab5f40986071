/**
 * Red-team rerun 15 (an outside pass after 0fd55fd): in-sandbox angles on the newest fixes (the
 * capture callback and fixed process.emit, the native-abort rule, frozen clocks through perf_hooks
 * histograms and bigint stats). Run by
 * `node --import tsx bench/sandbox-redteam.ts bench/redteam/rerun15.ts`.
 * Several rows are judged on reading (a failure's reason: `crash` in milliseconds vs `timeout` at
 * wallMs). The confirmed holes of this pass were measured outside the harness (see the report):
 * a fake "# Check failed" line before a real SIGXCPU/OOM (process.ts onExit), the quadratic
 * toolNameFault and grammar `required`, and esbuild globs behind an acorn parse failure.
 */
import type { Attack } from '../sandbox-redteam.js';

const N = 'const g: any = globalThis; g.n = (g.n ?? 0) + 1;';

const attacks: Record<string, Attack> = {
  // --- (e) the capture callback formats the uncaught value: values whose formatting throws ---
  uncaughtMessageGetterThrows: `${N}
    if (g.n === 3) { const e: any = new Error('x'); Object.defineProperty(e, 'message', { get() { throw new Error('m'); } }); Object.defineProperty(e, 'stack', { get() { throw new Error('s'); } }); setImmediate(() => { throw e; }); }
    return 'n' + g.n;`,
  uncaughtProxyAllTrapsThrow: `${N}
    if (g.n === 3) { const h = new Proxy({}, { get() { throw new Error('trap'); } }); const p = new Proxy({}, h as any); setImmediate(() => { throw p; }); }
    return 'n' + g.n;`,
  uncaughtToPrimitiveRecurses: `${N}
    if (g.n === 3) { const o: any = { toString() { return String(o); }, [Symbol.toPrimitive]() { return String(o); } }; setImmediate(() => { throw o; }); }
    return 'n' + g.n;`,
  uncaughtCauseCycle: `${N}
    if (g.n === 3) { const a: any = new Error('a'); const b: any = new Error('b', { cause: a }); a.cause = b; Object.defineProperty(a, 'name', { get() { throw a; } }); setImmediate(() => { throw a; }); }
    return 'n' + g.n;`,
  rejectSymbolAndRevokedProxy: `${N}
    if (g.n === 3) { const r = Proxy.revocable({}, {}); r.revoke(); void Promise.reject(r.proxy); void Promise.reject(Symbol('s')); }
    return 'n' + g.n;`,
  // the prototype's emit (process.emit is fixed as an own property): does Node route the monitor through it?
  eventEmitterProtoEmitThrows: `${N}
    if (g.n === 3) { const EE: any = (process as any).getBuiltinModule('events'); const orig = EE.prototype.emit; let r = 'patched'; try { EE.prototype.emit = function (this: any, ev: any, ...a: any[]) { if (String(ev).startsWith('uncaught')) throw new Error('proto'); return orig.call(this, ev, ...a); }; } catch (e: any) { r = e.name; } setImmediate(() => { throw new Error('bye'); }); return 'n3 ' + r; }
    return 'n' + g.n;`,
  processEmitRedefine: `${N}
    const out: string[] = [];
    for (const f of [() => Object.defineProperty(process, 'emit', { value: () => false }), () => Reflect.setPrototypeOf(process, {}), () => { delete (process as any).emit; }, () => (process as any).__proto__.emit = () => false]) { try { out.push(String(f())); } catch (e: any) { out.push(e.name); } }
    if (g.n === 3) setImmediate(() => { throw new Error('bye'); });
    return 'n' + g.n + ' ' + out.join(',');`,
  // stack overflow inside the runner's own report: the uncaught error thrown at the stack's edge
  uncaughtAtStackEdge: `${N}
    if (g.n === 3) setImmediate(() => { const f = (d: number): number => f(d + 1) + 1; f(0); });
    return 'n' + g.n;`,
  // --- (e) a fake native-check line before a real death (SIGABRT from V8's stack overflow in a regexp? a real OOM) ---
  fakeCheckThenRealOom: `${N}
    if (g.n === 3) { console.error('# Check failed: made up by the module'); const a: any[] = []; for (;;) a.push(new Array(4096).fill(g.n)); }
    return 'n' + g.n;`,
  fakeCheckThenRealExitCode: `${N}
    if (g.n === 3) { console.error('Assertion failed: made up'); process.exitCode = 3; setImmediate(() => process.exit()); }
    return 'n' + g.n;`,

  // --- (a) native clocks behind perf_hooks' histograms and bigint stats ---
  histogramRecordDelta: `${N}
    const ph: any = (process as any).getBuiltinModule('perf_hooks');
    try { g.h ??= ph.createHistogram(); g.h.recordDelta(); return 'n' + g.n + ' max ' + g.h.max + ' min ' + g.h.min + ' mean ' + g.h.mean; } catch (e: any) { return 'n' + g.n + ' err ' + (e.code ?? e.name); }`,
  monitorEventLoopDelay: `${N}
    const ph: any = (process as any).getBuiltinModule('perf_hooks');
    try { if (!g.m) { g.m = ph.monitorEventLoopDelay({ resolution: 10 }); g.m.enable(); } await new Promise((r) => setTimeout(r, 30)); return 'n' + g.n + ' count ' + g.m.count + ' max ' + g.m.max; } catch (e: any) { return 'n' + g.n + ' err ' + (e.code ?? e.name); }`,
  bigintStatsOfPipesAndScratch: `${N}
    const out: string[] = [];
    for (const fd of [0, 1, 2]) { try { const s: any = fs.fstatSync(fd, { bigint: true }); out.push(fd + ':' + s.atimeNs + '/' + s.mtimeNs + '/' + s.ctimeNs + '/' + s.birthtimeNs); } catch (e: any) { out.push(fd + ':' + e.code); } }
    fs.writeFileSync('f' + g.n, 'x');
    try { const s: any = fs.statSync('f' + g.n, { bigint: true }); out.push('f:' + s.mtimeNs + '/' + s.ctimeNs); } catch (e: any) { out.push('f:' + e.code); }
    try { const h = await fs.promises.open('f' + g.n); const s: any = await h.stat({ bigint: true }); await h.close(); out.push('fh:' + s.mtimeNs); } catch (e: any) { out.push('fh:' + e.code); }
    try { const d = fs.opendirSync('.'); out.push('dir:' + typeof d); d.closeSync(); } catch (e: any) { out.push('dir:' + e.code); }
    return out.join(' ');`,
  statsInternals: `const out: string[] = [];
    fs.writeFileSync('g', 'x'); const s: any = fs.statSync('g');
    for (const k of ['atimeMs', 'mtimeMs', 'ctimeMs', 'birthtimeMs']) out.push(k + '=' + s[k]);
    try { const S: any = fs.Stats; const raw = new S(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1700000000123, 0, 0, 0); out.push('ctor ' + raw.atimeMs + ' ' + raw.atime?.toISOString?.()); } catch (e: any) { out.push('ctor ' + e.name); }
    const syms = Object.getOwnPropertySymbols(s).map(String); out.push('syms ' + syms.join(','));
    return out.join(' ');`,
  timeOriginAndUptime: `${N}
    const t = (f: () => unknown) => { try { return String(f()); } catch (e: any) { return 'err ' + (e.code ?? e.name); } };
    const ph: any = (process as any).getBuiltinModule('perf_hooks');
    return 'n' + g.n + ' ' + [t(() => performance.timeOrigin), t(() => process.uptime()), t(() => ph.performance.nodeTiming?.idleTime), t(() => JSON.stringify(ph.performance.nodeTiming)), t(() => ph.performance.toJSON?.().timeOrigin), t(() => JSON.stringify(ph.performance.eventLoopUtilization()))].join(' ');`,
  // --- (c) forging: a line written to fd 1 holding a MAC-shaped prefix and an exit notice ---
  forgedExitNotice: `${N}
    if (g.n === 3) { try { fs.writeSync(1, '0'.repeat(64) + ' {"exit":0,"message":"F' + 'ORGED"}\\n'); } catch (e: any) { return 'w ' + e.code; } }
    return 'n' + g.n;`,
};
export default attacks;
