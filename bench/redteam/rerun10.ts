/**
 * Red-team rerun 10 (issue 13): attacks on the sandbox as a generated module would write them, run
 * by bench/sandbox-redteam.ts. Reruns 6–9's classes (one body per root cause found then, so that a
 * regression shows) and new ones. `fs`, `net`, `cp` and `Worker` are imported by the attack module;
 * each body returns its reading.
 */
import type { Attack } from '../sandbox-redteam.js';

const J = (expr: string) => `return JSON.stringify(${expr})`;
/** A body that reports an error's code (or name) as its reading. */
const tryCode = (body: string) => `try { ${body} } catch (e: any) { return 'refused ' + (e.code ?? e.name); }`;
/** Reads what a host server sends on a connection to `to` (net.connect options). */
const fromServer = (to: string) =>
  `return await new Promise((res) => { const c = net.connect(${to}); let s = ''; c.on('data', (d: any) => { s += d; }); c.on('end', () => res('got ' + s)); c.on('error', (e: any) => res('refused ' + e.code)); })`;

/** An attack set up at its first request (g.* holds state across requests). */
const once = (setup: string, read: string): Attack => ({
  body: `const g: any = globalThis; if (!g.__set) { g.__set = true; ${setup} } ${read}`,
});
/** An attack set up while the module loads, before the runner's last objects are made. */
const atImport = (setup: string, read: string): Attack => ({
  atImport: `{ const g: any = globalThis; ${setup} }`,
  body: `const g: any = globalThis; ${read}`,
});

const attacks: Record<string, Attack> = {
  // --- clocks (reruns 3–8) ---
  dateNow: J('[Date.now(), new Date().toISOString(), Date()]'),
  realDateThroughPrototype: J('[new (Object.getPrototypeOf(new Date(0)).constructor as any)().getTime()]'),
  performanceClocks: J(
    '[performance.now(), performance.timeOrigin, process.uptime(), String(process.hrtime.bigint())]',
  ),
  intlDefaultDate: J(
    "[new Intl.DateTimeFormat('en', { dateStyle: 'full', timeStyle: 'full' }).format(), new Intl.DateTimeFormat().formatToParts().map((p) => p.value).join('')]",
  ),
  fileTimes: J(
    "(fs.writeFileSync('t', 'x'), [fs.statSync('t').mtimeMs, fs.statSync('t', { bigint: true }).ctimeNs.toString()])",
  ),
  fileHandleStat:
    "const h = await fs.promises.open('t2', 'w'); const s = await h.stat(); await h.close(); return JSON.stringify([s.mtimeMs, s.birthtimeMs, s.ino > 0])",
  statsCallbackNotLast:
    "return await new Promise((r) => (fs.stat as any)('.', (_e: any, s: any) => r(JSON.stringify([s.mtimeMs, s.dev])), undefined))",
  eventTimeStamp: J("[new Event('x').timeStamp, new CustomEvent('y').timeStamp, new MessageEvent('m').timeStamp]"),
  fileLastModified: J("[new File([], 'x').lastModified, new Blob([]).size]"),
  consoleTime:
    "const { Console } = await import('node:console'); const { PassThrough } = await import('node:stream'); const out = new PassThrough(); let s = ''; out.on('data', (d: any) => { s += d; }); const c = new Console(out); c.time('a'); await new Promise((r) => setTimeout(r, 5)); c.timeEnd('a'); await new Promise((r) => setImmediate(r)); return s",
  httpDateHeader: once(
    "const http = await import('node:http'); g.srv = http.createServer((_q: any, r: any) => r.end('ok')); await new Promise((r) => g.srv.listen('h.sock', r));",
    "const http = await import('node:http'); return await new Promise((res) => { http.get({ socketPath: 'h.sock', path: '/' }, (r: any) => { res(JSON.stringify(r.headers)); r.resume(); }).on('error', (e: any) => res('error ' + e.code)); })",
  ),
  httpIntervalIdleStart:
    "const http = await import('node:http'); const s: any = http.createServer(); s.emit('listening'); const t = s[Object.getOwnPropertySymbols(s).find((x) => x.description === 'http.server.connectionsCheckingInterval')!]; const v = t?._idleStart; s.close(); return String(v)",
  timeoutPrototypeSetter: tryCode(
    "const t: any = setTimeout(() => {}, 1); clearTimeout(t); Object.defineProperty(Object.getPrototypeOf(t), '_idleStart', { set() {}, get() { return 1; } }); return 'defined'",
  ),
  nodeTimersIdleStart:
    "const t: any = (await import('node:timers')).setTimeout(() => {}, 100000); const v = [t._idleStart, t._idleTimeout]; clearTimeout(t); return JSON.stringify(v)",
  abortSignalTimeout: once('g.s = AbortSignal.timeout(400);', 'return String(g.s.aborted)'),
  virtualSleep: once('g.fired = 0; setTimeout(() => { g.fired++; }, 500);', 'return String(g.fired)'),
  timersPromisesScheduler: once(
    "const tp: any = await import('node:timers/promises'); g.done = false; tp.scheduler.wait(400).then(() => { g.done = true; });",
    'return String(g.done)',
  ),
  rmSyncRetry: tryCode(
    "fs.mkdirSync('d', { recursive: true }); fs.rmSync('d', { recursive: true, maxRetries: 5, retryDelay: 100 }); return 'ok'",
  ),
  // --- new: real timers the virtual clock does not own ---
  atomicsWaitAsyncTimeout: once(
    'const i = new Int32Array(new SharedArrayBuffer(4)); g.w = (Atomics as any).waitAsync(i, 0, 0, 400); g.st = String(g.w.async); if (g.w.async) g.w.value.then((v: string) => { g.st = v; });',
    'return String(g.st)',
  ),
  atomicsWaitBlocks: tryCode('const i = new Int32Array(new SharedArrayBuffer(4)); return Atomics.wait(i, 0, 0, 50)'),
  wasmBackgroundCompile: once(
    'g.n = 0; const bytes = new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0]); WebAssembly.compile(bytes).then(() => { g.n++; });',
    'return String(g.n)',
  ),
  finalizationRegistry: once(
    'g.c = 0; g.r = new FinalizationRegistry(() => { g.c++; }); for (let i = 0; i < 1000; i++) g.r.register({ a: new Array(1000) }, i);',
    'return String(g.c)',
  ),
  diagnosticsChannelCollected: once(
    "const dc: any = await import('node:diagnostics_channel'); dc.channel('weakly-held').mark = 1; for (let i = 0; i < 2000; i++) new Array(1000);",
    "const dc: any = await import('node:diagnostics_channel'); return String(dc.channel('weakly-held').mark)",
  ),
  finalizersAfterGarbage: once(
    'g.c = 0; g.r = new FinalizationRegistry(() => { g.c++; }); for (let i = 0; i < 1000; i++) g.r.register({ a: new Array(1000) }, i); g.w = new WeakRef({});',
    'for (let i = 0; i < 200; i++) new Array(100000).fill(i); await new Promise((r) => setImmediate(r)); return JSON.stringify([g.c, g.w.deref() === undefined])',
  ),
  diagnosticsChannelAfterGarbage: once(
    "const dc: any = await import('node:diagnostics_channel'); dc.channel('weakly-held-2').mark = 1;",
    "for (let i = 0; i < 200; i++) new Array(100000).fill(i); const dc: any = await import('node:diagnostics_channel'); return String(dc.channel('weakly-held-2').mark)",
  ),
  weakRefDeref: once(
    'g.w = new WeakRef({ big: new Array(100000).fill(1) });',
    'return String(g.w.deref() === undefined)',
  ),
  messageChannelLoop: once(
    'const { port1, port2 } = new MessageChannel(); g.n = 0; port1.onmessage = () => { g.n++; if (g.n < 1e9) port2.postMessage(0); }; port2.postMessage(0);',
    'return String(g.n > 0)',
  ),
  broadcastChannel: once(
    "g.b = new BroadcastChannel('x'); g.m = 0; g.b.onmessage = () => { g.m++; };",
    "new BroadcastChannel('x').postMessage(1); await new Promise((r) => setImmediate(r)); return String(g.m)",
  ),
  fsWatchEvents: once(
    "g.ev = 0; fs.writeFileSync('w', ''); try { g.wt = fs.watch('.', () => { g.ev++; }); } catch (e: any) { g.ev = 'refused ' + e.code; }",
    'return String(g.ev)',
  ),
  netServerTimeout: once(
    "g.to = 0; g.srv = net.createServer((c) => { c.setTimeout(200, () => { g.to++; }); }); await new Promise((r) => g.srv.listen('s.sock', r)); g.c = net.connect('s.sock');",
    'return String(g.to)',
  ),
  dnsLookupTiming: tryCode(
    "const dns = await import('node:dns'); return await new Promise((r) => dns.lookup('localhost', { all: true }, (e: any, a: any) => r(e ? 'err ' + e.code : JSON.stringify(a))))",
  ),
  dgramLoopback: tryCode(
    "const dgram = await import('node:dgram'); const s = dgram.createSocket('udp4'); return await new Promise((r) => { s.on('error', (e: any) => r('error ' + e.code)); s.bind(0, '127.0.0.1', () => { const a = s.address(); s.close(); r('bound ' + typeof a.port); }); })",
  ),
  // --- new: async context and diagnostics (the AsyncLocalStorage wrapper's statics, AsyncResource, channels, domain) ---
  alsStaticsBind: tryCode(
    "const { AsyncLocalStorage }: any = await import('node:async_hooks'); const f = AsyncLocalStorage.bind(() => 1); const s = AsyncLocalStorage.snapshot(); return JSON.stringify([f(), s((x: number) => x, 2)])",
  ),
  alsBindThis: tryCode(
    "const { AsyncLocalStorage }: any = await import('node:async_hooks'); const seen: any[] = []; const F: any = function (this: any) { seen.push(typeof this); }; F.prototype = {}; const bound = AsyncLocalStorage.bind.call(F, () => 1); return JSON.stringify([typeof bound, seen])",
  ),
  asyncResourceHooks: tryCode(
    "const ah: any = await import('node:async_hooks'); class R extends ah.AsyncResource { constructor() { super('X'); } } const r = new R(); const v = [r.asyncId() > 0, typeof r.triggerAsyncId(), ah.executionAsyncId() >= 0]; r.emitDestroy(); return JSON.stringify(v)",
  ),
  asyncResourceBindTimers: once(
    "const ah: any = await import('node:async_hooks'); g.ids = []; const f = ah.AsyncResource.bind(() => { g.ids.push(ah.executionAsyncId()); }); setTimeout(f, 10);",
    'return JSON.stringify(g.ids.length)',
  ),
  diagnosticsChannelTimers: once(
    "const dc: any = await import('node:diagnostics_channel'); g.msgs = []; for (const n of ['net.client.socket', 'net.server.socket', 'http.server.request.start', 'http.client.request.start', 'undici:request:create', 'undici:client:sendHeaders', 'tracing:node.timers:start', 'child_process', 'worker_threads', 'process.exit']) { try { dc.subscribe(n, (m: any, name: string) => { g.msgs.push([name, Object.keys(m ?? {})]); }); } catch {} }",
    "try { await fetch('http://127.0.0.1:9/'); } catch {} return JSON.stringify(g.msgs.slice(0, 6))",
  ),
  diagnosticsChannelBindStore: tryCode(
    "const dc: any = await import('node:diagnostics_channel'); const { AsyncLocalStorage }: any = await import('node:async_hooks'); const ch = dc.channel('x'); const als = new AsyncLocalStorage(); ch.bindStore(als, (m: any) => m); return JSON.stringify(ch.runStores(5, () => als.getStore()))",
  ),
  diagnosticsTracingChannel: tryCode(
    "const dc: any = await import('node:diagnostics_channel'); const tc = dc.tracingChannel('y'); const seen: any[] = []; tc.subscribe({ start(m: any) { seen.push(Object.keys(m)); }, end() {}, asyncStart() {}, asyncEnd() {}, error() {} }); tc.traceSync(() => 1, { a: 1 }); return JSON.stringify(seen)",
  ),
  domainModule: tryCode(
    "const d: any = await import('node:domain'); const dom = d.create(); let v = 0; dom.run(() => { v = 1; }); return 'domain ' + v",
  ),
  processExitListener: once("g.e = 0; process.on('exit', () => { g.e++; });", 'return String(g.e)'),
  // --- new: Node's own prototypes (still open) for clocks or the runner ---
  streamPrototypesReadable: atImport(
    "const { Readable }: any = await import('node:stream'); const push = Readable.prototype.push; g.pushed = 0; Readable.prototype.push = function (this: any, c: any, ...a: any[]) { g.pushed++; return push.call(this, c, ...a); };",
    'return String(g.pushed)',
  ),
  eventEmitterEmit: atImport(
    "const { EventEmitter }: any = await import('node:events'); const emit = EventEmitter.prototype.emit; g.ev = new Set(); EventEmitter.prototype.emit = function (this: any, n: any, ...a: any[]) { g.ev.add(String(n)); return emit.call(this, n, ...a); };",
    'return JSON.stringify([...g.ev].sort())',
  ),
  stringDecoderNativeState: atImport(
    "const { StringDecoder }: any = await import('node:string_decoder'); const probe: any = new StringDecoder('utf8'); const sym = Object.getOwnPropertySymbols(probe)[0]; g.dec = []; g.enc = 0; Object.defineProperty(StringDecoder.prototype, 'encoding', { configurable: true, get() { return this.__enc; }, set(v: any) { g.dec.push(this); this.__enc = v; } }); g.sym = sym;",
    'const seen = g.dec.filter((d: any) => d !== undefined).length; return JSON.stringify([seen, typeof g.sym])',
  ),
  stringDecoderGetter: atImport(
    "const { StringDecoder }: any = await import('node:string_decoder'); const probe: any = new StringDecoder('utf8'); const sym = Object.getOwnPropertySymbols(probe)[0]; g.calls = 0; Object.defineProperty(StringDecoder.prototype, sym, { configurable: true, get() { g.calls++; return this.__nd; }, set(v: any) { this.__nd = v; } });",
    'return String(g.calls)',
  ),
  bufferPrototypeToString: atImport(
    'const tos = Buffer.prototype.toString; g.strs = []; Buffer.prototype.toString = function (this: any, ...a: any[]) { const s = tos.apply(this, a as any); if (s.length > 40) g.strs.push(s.slice(0, 80)); return s; };',
    'return JSON.stringify(g.strs.slice(-2))',
  ),
  urlPrototype: atImport(
    "const d = Object.getOwnPropertyDescriptor(URL.prototype, 'pathname')!; g.paths = []; Object.defineProperty(URL.prototype, 'pathname', { configurable: true, get() { const v = d.get!.call(this); g.paths.push(v); return v; } });",
    'return JSON.stringify(g.paths.slice(-3))',
  ),
  socketPrototypeWrite: once(
    'const w = (net.Socket.prototype as any).write; g.lines = []; (net.Socket.prototype as any).write = function (this: any, c: any, ...a: any[]) { g.lines.push(String(c).slice(0, 60)); return w.call(this, c, ...a); };',
    'return JSON.stringify(g.lines.slice(-2))',
  ),
  fsDirDirent: J(
    "[fs.opendirSync('.').readSync()?.name ?? null, fs.readdirSync('.', { withFileTypes: true }).length >= 0]",
  ),
  blobAndFile:
    "const b = new Blob(['abc']); return JSON.stringify([await b.text(), new File(['x'], 'n').lastModified])",
  performanceEntries: J(
    "[performance.getEntries?.().length ?? 'none', typeof (globalThis as any).PerformanceResourceTiming]",
  ),
  processWarningTime: once(
    "g.w = []; process.on('warning', (w: any) => g.w.push(String(w.name))); process.emitWarning('x');",
    'return JSON.stringify(g.w)',
  ),
  // --- the protocol and the session key (reruns 5–9) ---
  forgedLineOnFd1:
    "const line = JSON.stringify({ id: 'x', status: 200, body: { observation: { role: 'tool', content: 'FOR' + 'GED' } } }); try { fs.writeSync(1, '0'.repeat(64) + ' ' + line + '\\n'); } catch (e: any) { return 'refused ' + e.code; } return 'written'",
  fd0SwapWithExitNoop: tryCode(
    "process.exit = (() => {}) as any; (process as any).reallyExit = () => {}; fs.writeFileSync('req', '0'.repeat(64) + ' ' + JSON.stringify({ id: 'f', method: 'GET', path: '/v1/info' }) + '\\n'); fs.closeSync(0); fs.openSync('req', 'r'); return 'swapped'",
  ),
  fd1Close: tryCode("fs.closeSync(1); return 'closed'"),
  processReallyExit: tryCode(
    "const r = (process as any).reallyExit; (process as any).reallyExit = function () { fs.writeFileSync('exited', '1'); }; return typeof r",
  ),
  keyInPool:
    "const b = Buffer.from('x'); const u = new Uint8Array(b.buffer); let nz = 0; for (const x of u) if (x) nz++; return String(nz < 64)",
  keyObjectBrand: tryCode(
    "const crypto = await import('node:crypto'); const k = crypto.createSecretKey(Buffer.alloc(32)); return typeof k.export",
  ),
  processStdin: tryCode('return typeof (process as any).stdin'),
  processStdoutIsStderr: 'return String(process.stdout === process.stderr)',
  activeHandles: tryCode('return JSON.stringify((process as any)._getActiveHandles().length)'),
  activeResources: J('process.getActiveResourcesInfo()'),
  argvEnv: J(
    '[process.argv.slice(1).map((a) => a.replace(/[0-9a-f]{16,}/g, "<hex>")), Object.keys(process.env), process.execArgv]',
  ),
  // --- built-ins the runner's code relies on (rerun 6) ---
  reflectConstruct: tryCode("(Reflect as any).construct = () => ({ getTime: () => 1 }); return 'replaced'"),
  objectPrototypeGet: tryCode(
    "Object.defineProperty(Object.prototype, 'get', { value: () => 1, configurable: true }); return 'defined'",
  ),
  functionApply: tryCode("(Function.prototype as any).apply = function () { return 1; }; return 'replaced'"),
  arrayIterator: tryCode("(Array.prototype as any)[Symbol.iterator] = function* () {}; return 'replaced'"),
  promiseThen: tryCode("(Promise.prototype as any).then = function () {}; return 'replaced'"),
  jsonParse: tryCode("(JSON as any).parse = () => ({}); return 'replaced'"),
  stringPrototype: tryCode("(String.prototype as any).slice = () => ''; return 'replaced'"),
  regexpExec: tryCode("(RegExp.prototype as any).exec = () => null; return 'replaced'"),
  globalBindings: tryCode(
    '(globalThis as any).Uint8Array = function () {}; (globalThis as any).Reflect = {}; return typeof Reflect.apply',
  ),
  errorPrepare: tryCode(
    "(Error as any).prepareStackTrace = (_e: any, s: any) => s.map((c: any) => c.getFileName()).join(','); return String(new Error('x').stack).slice(0, 200)",
  ),
  errorCaptureStack: tryCode(
    "const o: any = {}; Error.captureStackTrace(o); return String(o.stack).split('\\n').length > 0 ? 'stack' : 'none'",
  ),
  statsPrototypeSwap: tryCode("(fs.Stats as any).prototype = {}; return 'swapped'"),
  statsChainSetter: tryCode(
    "const p = Object.getPrototypeOf(Object.getPrototypeOf(fs.statSync('.'))); Object.defineProperty(p, 'mtimeMs', { set(v: any) { (globalThis as any).__m = v; }, configurable: true }); fs.statSync('.'); return String((globalThis as any).__m)",
  ),
  statfsHost: J(
    '[fs.statfsSync(process.argv[1]).blocks, fs.statfsSync(process.argv[1]).ffree, fs.statSync(process.argv[1]).ino]',
  ),
  socketIno:
    "return await new Promise((r) => { const s: any = net.createServer().listen('i.sock', () => { const c = net.connect('i.sock', () => { fs.fstat(c._handle.fd, (e: any, st: any) => { c.destroy(); s.close(); r(e ? 'err' : String(st.ino)); }); }); }); })",
  stdioIno: J('[fs.fstatSync(0).ino, fs.fstatSync(1).ino, fs.fstatSync(2).ino]'),
  // --- machine identity (rerun 6) and machine state ---
  machineIdentity:
    "const os = await import('node:os'); return JSON.stringify([os.hostname(), os.release(), os.version(), os.cpus().length, os.cpus()[0].model, os.availableParallelism(), os.machine(), os.arch(), os.endianness()])",
  machineState:
    "const os = await import('node:os'); return JSON.stringify([os.freemem(), os.totalmem(), os.loadavg(), os.uptime(), (process as any).availableMemory?.(), (process as any).constrainedMemory?.(), process.cpuUsage(), process.resourceUsage().maxRSS])",
  networkInterfaces: "const os = await import('node:os'); return JSON.stringify(os.networkInterfaces())",
  userInfo: tryCode(
    "const os = await import('node:os'); return JSON.stringify([os.userInfo(), os.homedir(), os.tmpdir(), process.cwd(), process.getuid?.(), process.getgroups?.()])",
  ),
  priority: tryCode("const os = await import('node:os'); return JSON.stringify([os.getPriority(), os.getPriority(1)])"),
  pidsAndTitle: J('[process.pid, process.ppid, process.title]'),
  execPath: J('[process.execPath, process.release.name]'),
  memoryUsage: J('Object.keys(process.memoryUsage())'),
  timezone: J(
    '[Intl.DateTimeFormat().resolvedOptions().timeZone, new Date(0).getTimezoneOffset(), process.env.TZ ?? null]',
  ),
  // --- files, devices, /proc (the first pass, rerun 5) ---
  hostSecretFile: tryCode(`return fs.readFileSync('/tmp/trace-redteam-secret.txt', 'utf8')`),
  hostSecretFileUrl: tryCode(`return fs.readFileSync(new URL('file:///tmp/trace-redteam-secret.txt'), 'utf8')`),
  hostSecretBufferPath: tryCode(`return fs.readFileSync(Buffer.from('/tmp/trace-redteam-secret.txt'), 'utf8')`),
  relativeTraversal: tryCode("return fs.readFileSync('../'.repeat(12) + 'tmp/trace-redteam-secret.txt', 'utf8')"),
  symlinkOut: tryCode("fs.symlinkSync('/tmp/trace-redteam-secret.txt', 'ln'); return fs.readFileSync('ln', 'utf8')"),
  hardlinkOut: tryCode("fs.linkSync('/tmp/trace-redteam-secret.txt', 'hl'); return fs.readFileSync('hl', 'utf8')"),
  procFiles:
    "const out: string[] = []; for (const f of ['/proc/self/environ', '/proc/1/environ', '/proc/self/mountinfo', '/proc/self/cgroup', '/proc/uptime', '/proc/stat', '/proc/loadavg', '/proc/sys/kernel/random/boot_id', '/etc/machine-id', '/sys/class/net', '/proc/self/fd/0']) { try { out.push(f + ':' + fs.readFileSync(f, 'utf8').slice(0, 80)); } catch (e: any) { out.push(f + ':' + e.code); } } return JSON.stringify(out)",
  procStatPromises: tryCode("return JSON.stringify((await fs.promises.stat('/proc/self')).mtimeMs)"),
  rootListing: tryCode("return JSON.stringify(fs.readdirSync('/'))"),
  devices:
    "const out: string[] = []; for (const f of ['/dev/shm/x', '/dev/kmsg', '/dev/mem', '/dev/tty']) { try { fs.writeFileSync(f, 'x'); out.push(f + ':written'); } catch (e: any) { out.push(f + ':' + e.code); } } return JSON.stringify(out)",
  runtimeImportHost: tryCode("await import('file:///tmp/trace-redteam-secret.txt'); return 'imported'"),
  requireHost: tryCode(
    "const { createRequire } = await import('node:module'); const req = createRequire(import.meta.url); return String(req('/tmp/trace-redteam-secret.txt'))",
  ),
  wasi: tryCode(
    "const { WASI }: any = await import('node:wasi'); new WASI({ version: 'preview1', preopens: { '/': '/' } }); return 'made'",
  ),
  moduleRegister: tryCode(
    "const m: any = await import('node:module'); m.register('data:text/javascript,export {}'); return 'registered'",
  ),
  // --- network (the first pass) ---
  hostTcp: fromServer('{ port: 47321, host: "127.0.0.1" }'),
  hostAbstractSocket: fromServer("'\\0trace-redteam'"),
  hostUnixSocket: fromServer("'/tmp/trace-redteam.sock'"),
  hostFetch: tryCode("const r = await fetch('http://127.0.0.1:47321/'); return await r.text()"),
  externalDns: tryCode(
    "const dns = await import('node:dns'); return JSON.stringify(await dns.promises.resolve4('example.com'))",
  ),
  // --- escape hatches (the first pass) ---
  v8Flags: tryCode(
    "const v8: any = await import('node:v8'); v8.setFlagsFromString('--allow-natives-syntax'); return 'set'",
  ),
  processReport: tryCode("(process as any).report.writeReport('r.json'); return 'written'"),
  processBinding: tryCode("(process as any).binding('fs'); return 'bound'"),
  childProcess: tryCode("cp.execSync('cat /tmp/trace-redteam-secret.txt'); return 'ran'"),
  workerThread: tryCode("new Worker('1', { eval: true }); return 'started'"),
  inspectorOpen: tryCode("const i: any = await import('node:inspector'); i.open(0); return 'open'"),
  vmContext: tryCode("const vm: any = await import('node:vm'); return String(vm.runInNewContext('Date.now()'))"),
  processKillParent: tryCode("process.kill(process.ppid, 'SIGTERM'); return 'sent'"),
  processAbort: tryCode(
    "if ((globalThis as any).__aborted) return 'again'; (globalThis as any).__aborted = 1; process.abort(); return 'alive'",
  ),
  setuid: tryCode("process.setuid!(0); return 'uid ' + process.getuid!()"),
  memoryBomb: tryCode(
    "const a: any[] = []; for (let i = 0; i < 64; i++) a.push(new Uint8Array(64 * 1024 * 1024).fill(1)); return 'held ' + a.length",
  ),
  inodeFlood: tryCode(
    "fs.mkdirSync('f', { recursive: true }); let n = 0; for (; n < 200000; n++) fs.writeFileSync('f/' + n, ''); return 'made ' + n",
  ),
  hugeObservation: "return 'x'.repeat(64 * 1024 * 1024)",
  deepObservation: "return JSON.stringify(JSON.parse('['.repeat(100000) + ']'.repeat(100000)))",
};

export default attacks;
