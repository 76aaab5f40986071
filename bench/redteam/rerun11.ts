/**
 * Red-team rerun 11 (outside team): new angles on the sandbox, run by
 * `node --import tsx bench/sandbox-redteam.ts bench/redteam/rerun11.ts`.
 * `fs`, `net`, `cp`, `Worker` are imported by the attack module; each body returns its reading.
 */
import type { Attack } from '../sandbox-redteam.js';

/** Three real-I/O turns of the event loop (no virtual timer involved). */
const TURN = "const turn = async () => { for (let i = 0; i < 3; i++) await fs.promises.stat('.'); };";
/** Counts requests in this process. */
const N = 'const g: any = globalThis; g.n = (g.n ?? 0) + 1;';
/** A listener on 127.0.0.1:port with an accept queue of 1 (Node turns backlog 0 into 511). */
const listen = (port: number) =>
  `g.srv = net.createServer(() => {}); await new Promise((r) => g.srv.listen({ port: ${port}, host: '127.0.0.1', backlog: 1 }, r));`;
/** Two connects that fill that accept queue (they run at nextTick, before the loop can accept). */
const fill = (port: number) => `for (let i = 0; i < 2; i++) net.connect(${port}, '127.0.0.1').on('error', () => {});`;

const attacks: Record<string, Attack> = {
  // --- real time across the pause: a real Node timer (net's happy-eyeballs attempt timer) ---
  happyEyeballsAttemptTimer: `${N} ${TURN}
    if (g.n === 1) { g.ev = []; ${listen(41001)} return 'listening'; }
    if (g.n === 2) {
      ${fill(41001)}
      const c: any = net.connect({ host: 'x.test', port: 41001, autoSelectFamily: true, autoSelectFamilyAttemptTimeout: 400,
        lookup: (_h: any, _o: any, cb: any) => process.nextTick(cb, null, [{ address: '127.0.0.1', family: 4 }, { address: '127.0.0.2', family: 4 }]) } as any);
      c.on('connectionAttempt', (a: string) => g.ev.push('attempt ' + a));
      c.on('connectionAttemptTimeout', (a: string) => g.ev.push('attemptTimeout ' + a));
      c.on('connect', () => g.ev.push('connect'));
      c.on('error', (e: any) => g.ev.push('error ' + e.code));
    }
    await turn();
    return JSON.stringify(g.ev);`,
  // the same timer armed at the first request, 200 ms
  happyEyeballsAttemptTimerEarly: `${N} ${TURN}
    if (g.n === 1) {
      g.ev = []; ${listen(41003)} ${fill(41003)}
      const c: any = net.connect({ host: 'x.test', port: 41003, autoSelectFamily: true, autoSelectFamilyAttemptTimeout: 200,
        lookup: (_h: any, _o: any, cb: any) => process.nextTick(cb, null, [{ address: '127.0.0.1', family: 4 }, { address: '127.0.0.3', family: 4 }]) } as any);
      c.on('connectionAttemptTimeout', () => g.ev.push('attemptTimeout'));
      c.on('error', (e: any) => g.ev.push('error'));
    }
    await turn();
    return JSON.stringify(g.ev);`,
  // the same timer reached through http.get's agent (options pass to net.createConnection)
  happyEyeballsViaHttp: `${N} ${TURN}
    const http = await import('node:http');
    if (g.n === 1) { g.ev = []; ${listen(41004)} return 'listening'; }
    if (g.n === 2) {
      ${fill(41004)}
      const req: any = http.get({ host: 'x.test', port: 41004, path: '/', autoSelectFamily: true, autoSelectFamilyAttemptTimeout: 400,
        lookup: (_h: any, _o: any, cb: any) => process.nextTick(cb, null, [{ address: '127.0.0.1', family: 4 }, { address: '127.0.0.4', family: 4 }]) } as any);
      req.on('socket', (s: any) => { s.on('connectionAttemptTimeout', (a: string) => g.ev.push('attemptTimeout ' + a)); s.on('connectionAttempt', (a: string) => g.ev.push('attempt ' + a)); });
      req.on('error', (e: any) => g.ev.push('error ' + (e.code ?? e.name)));
    }
    await turn();
    return JSON.stringify(g.ev);`,
  // --- real time across the pause: a kernel timer (TCP SYN retransmission, 1 s) ---
  synRetransmitKernelTimer: `${N} ${TURN}
    const crypto = await import('node:crypto');
    if (g.n === 1) { ${listen(41002)} return 'listening'; }
    if (g.n === 2) {
      ${fill(41002)}
      g.up = false; g.d = net.connect(41002, '127.0.0.1'); g.d.on('connect', () => { g.up = true; }); g.d.on('error', () => {});
      await turn();
      return 'dropped ' + g.up;
    }
    crypto.pbkdf2Sync('p', 's', 350000, 32, 'sha256'); // ~200 ms of CPU (not a clock reading)
    await turn();
    return 'connected ' + g.up;`,
  // --- readline's real Date.now stamp through the internal Interface (fs.promises FileHandle.readLines) ---
  readLinesSawReturnAt: `fs.writeFileSync('cr.txt', 'a\\r');
    const fh = await fs.promises.open('cr.txt', 'r');
    const rl: any = (fh as any).readLines();
    const lines: string[] = [];
    rl.on('line', (l: string) => lines.push(l));
    await new Promise((r) => rl.on('close', r));
    const sym = Object.getOwnPropertySymbols(rl).find((s) => s.description === '_sawReturnAt')!;
    return JSON.stringify([lines, String(rl[sym]), rl.constructor.name]);`,
  readLinesConstructor: `const { PassThrough } = await import('node:stream');
    fs.writeFileSync('e.txt', '');
    const fh = await fs.promises.open('e.txt', 'r');
    const RL: any = (fh as any).readLines().constructor;
    const input = new PassThrough();
    const rl: any = new RL({ input, crlfDelay: 100 });
    input.write('x\\r');
    for (let i = 0; i < 3; i++) await fs.promises.stat('.');
    const sym = Object.getOwnPropertySymbols(rl).find((s) => s.description === '_sawReturnAt')!;
    const v = String(rl[sym]); rl.close(); await fh.close().catch(() => {});
    return JSON.stringify([typeof RL, v]);`,
  // --- GC timing through Node's native weak callbacks (a dropped FileHandle / Dir is closed on GC) ---
  fileHandleGcClose: `const g: any = globalThis;
    if (!g.__set) {
      g.__set = true; g.w = 0;
      process.on('warning', (w: any) => { if (/garbage collection/i.test(String(w.message))) g.w++; });
      fs.writeFileSync('h', 'x');
      for (let i = 0; i < 120; i++) await fs.promises.open('h', 'r');
      for (let i = 0; i < 40; i++) fs.opendirSync('.');
    }
    for (let i = 0; i < 40; i++) new Array(100000).fill(i);
    await new Promise((r) => process.nextTick(r));
    const fd = fs.openSync('h', 'r'); fs.closeSync(fd);
    return JSON.stringify([g.w, fd]);`,
  fileHandleGcNoGarbage: `const g: any = globalThis;
    if (!g.__set) {
      g.__set = true; g.w = 0;
      process.on('warning', (w: any) => { if (/garbage collection/i.test(String(w.message))) g.w++; });
      fs.writeFileSync('h', 'x');
      for (let i = 0; i < 150; i++) await fs.promises.open('h', 'r');
      for (let i = 0; i < 20; i++) new Array(100000).fill(i);
    }
    await fs.promises.stat('.');
    const fd = fs.openSync('h', 'r'); fs.closeSync(fd);
    return JSON.stringify([g.w, fd]);`,
  // --- descriptors left open in node (fd 3: the seccomp filter the shell opened for bwrap) ---
  fdEnumeration: `const out: any[] = [];
    let fd3 = 'none';
    for (let fd = 0; fd < 64; fd++) {
      try {
        const s = fs.fstatSync(fd);
        const t = s.isFile() ? 'file' : s.isSocket() ? 'sock' : s.isFIFO() ? 'fifo' : s.isCharacterDevice() ? 'chr' : s.isDirectory() ? 'dir' : 'other';
        out.push([fd, t, s.size, s.mode.toString(8), s.uid, s.nlink, s.blksize]);
        if (fd === 3 && t === 'file') { const b = Buffer.alloc(32); const n = fs.readSync(3, b, 0, 32, 0); fd3 = b.subarray(0, n).toString('hex'); }
      } catch {}
    }
    return JSON.stringify([out, fd3]);`,
  // --- the runner's top-level names through a direct eval at the bundle's top level ---
  directEvalScope: {
    atImport:
      "{ const g: any = globalThis; g.names = ['runSandboxChild', 'readSessionKey', 'hmacSha256', 'utf8', 'installVirtualTimers', 'createProtocolHandler', 'freezeClocks', 'lockIntrinsics', 'refused', 'takeArg', 'closeInheritedFds', 'holdWeakReferences'].map((n) => { try { return n + ':' + eval('typeof ' + n); } catch (e: any) { return n + ':' + e.name; } }); }",
    body: 'return JSON.stringify((globalThis as any).names)',
  },
  // --- host-side events on the bind-mounted bundle (inotify on a host inode) ---
  bundleInotify: `const g: any = globalThis;
    if (!g.__set) { g.__set = true; g.ev = []; try { fs.watch(process.argv[1], (t: string) => g.ev.push(t)); fs.watch('.', (t: string, f: any) => g.ev.push('dir ' + t + ' ' + f)); } catch (e: any) { g.ev.push('refused ' + e.code); } }
    await fs.promises.stat('.');
    return JSON.stringify(g.ev);`,
  // --- bundle content: host paths the bundler wrote into it ---
  bundleHostPaths: `const s = fs.readFileSync(process.argv[1], 'utf8');
    const m = [...new Set([...s.matchAll(/\\/(?:work|home|root|tmp|Users)\\/[A-Za-z0-9._\\/-]{3,80}/g)].map((x) => x[0]))];
    return JSON.stringify([s.length > 0, m.slice(0, 8)]);`,
  // --- batch 2 ---
  // kernel memory outside memoryMb: loopback TCP send/receive buffers the module fills and never reads
  socketBufferMemory: `const g: any = globalThis;
    if (!g.__set) {
      g.__set = true;
      const srv = net.createServer({ pauseOnConnect: true }, () => {});
      await new Promise((r) => srv.listen(41010, '127.0.0.1', () => r(0)));
      g.socks = []; let total = 0;
      const chunk = Buffer.alloc(256 * 1024, 1);
      for (let i = 0; i < 110; i++) {
        const c = net.connect(41010, '127.0.0.1'); c.on('error', () => {});
        await new Promise((r) => c.on('connect', r));
        g.socks.push(c);
        for (let k = 0; k < 400; k++) {
          let done = false;
          c.write(chunk, () => { done = true; });
          for (let t = 0; t < 12 && !done; t++) await fs.promises.stat('.');
          if (!done) break;
          total += chunk.length;
        }
      }
      g.mb = Math.round(total / 2 ** 20 / 100) * 100;
      g.rss = Math.round(process.memoryUsage.rss() / 2 ** 20 / 100) * 100;
    }
    return 'kernel-held ~' + g.mb + ' MiB, own rss ~' + g.rss + ' MiB (memoryMb 512)';`,
  // several real attempt timers (100, 300, 600, 1200 ms) armed at the second request: which fired tells how long the gap was
  happyEyeballsGapRuler: `${N} ${TURN}
    if (g.n === 1) { ${listen(41006)} return 'listening'; }
    if (g.n === 2) {
      g.fired = [];
      ${fill(41006)}
      [100, 300, 600, 1200].forEach((ms, i) => {
        const c: any = net.connect({ host: 'x.test', port: 41006, autoSelectFamily: true, autoSelectFamilyAttemptTimeout: ms,
          lookup: (_h: any, _o: any, cb: any) => process.nextTick(cb, null, [{ address: '127.0.0.1', family: 4 }, { address: '127.0.1.' + (i + 1), family: 4 }]) } as any);
        c.on('connectionAttemptTimeout', () => g.fired.push(ms)); c.on('error', () => {});
      });
    }
    await turn();
    return 'gap longer than ' + JSON.stringify([...g.fired].sort((a: number, b: number) => a - b)) + ' ms';`,
  // the kernel timer alone across the 900 ms pause (no CPU spin): dropped at the first request
  synRetransmitNoSpin: `${N} ${TURN}
    if (g.n === 1) {
      ${listen(41005)} ${fill(41005)}
      g.up = false; g.d = net.connect(41005, '127.0.0.1'); g.d.on('connect', () => { g.up = true; }); g.d.on('error', () => {});
    }
    await turn();
    return 'connected ' + g.up;`,
  // the real attempt timer as a stopwatch inside one request: real-I/O turns until a 30 ms timer fires
  happyEyeballsStopwatch: `${N} ${TURN}
    const port = 41100 + g.n;
    ${listen(0).replace('port: 0', 'port')} ${fill(0).replace('net.connect(0', 'net.connect(port')}
    let fired = false;
    const c: any = net.connect({ host: 'x.test', port, autoSelectFamily: true, autoSelectFamilyAttemptTimeout: 30,
      lookup: (_h: any, _o: any, cb: any) => process.nextTick(cb, null, [{ address: '127.0.0.1', family: 4 }, { address: '127.0.0.9', family: 4 }]) } as any);
    c.on('connectionAttemptTimeout', () => { fired = true; }); c.on('error', () => {});
    let turns = 0;
    while (!fired && turns < 100000) { await fs.promises.stat('.'); turns++; }
    g.srv.close();
    return 'fired ' + fired + ' after ' + turns + ' real-I/O turns';`,
  // runner internals through direct eval: the MAC's typed-array constants and a getter on the encoder's brand
  directEvalMacInternals: {
    atImport:
      "{ const g: any = globalThis; g.calls = 0; g.seen = ['K', 'H0', 'encoder', 'HEX', 'IO_REQUEST', 'NETWORK_CODES'].map((n) => { try { return n + ':' + eval('typeof ' + n); } catch (e: any) { return n + ':' + e.name; } }); try { const enc: any = eval('encoder'); const sym = Object.getOwnPropertySymbols(enc)[0]; Object.defineProperty(enc, sym, { get() { g.calls++; return true; }, configurable: true }); g.hook = 'hooked'; } catch (e: any) { g.hook = 'refused ' + e.name; } try { const K: any = eval('K'); g.kWritable = Object.isFrozen(K) ? 'frozen' : 'writable'; } catch (e: any) { g.kWritable = e.name; } }",
    body: 'const g: any = globalThis; return JSON.stringify([g.seen, g.hook, g.kWritable, g.calls > 0])',
  },
};

export default attacks;
