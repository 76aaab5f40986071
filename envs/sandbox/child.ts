import fs from 'node:fs';
import os from 'node:os';
import nodeModule, { syncBuiltinESMExports } from 'node:module';
import perfHooks from 'node:perf_hooks';
import { StringDecoder } from 'node:string_decoder';
import timers from 'node:timers';
import util from 'node:util';
import asyncHooks from 'node:async_hooks';
import type { Environment } from '../environment.js';
import { createProtocolHandler } from '../protocol/handler.js';
import type { ProtocolErrorType } from '../protocol/schemas.js';
import { FROZEN_EPOCH_MS, MAC_HEX, SESSION_KEY_BYTES } from './framing.js';
import { installVirtualTimers, type VirtualClock } from './virtual-time.js';
import { hmacSha256, utf8 } from './hmac-sha256.js';
import { lockIntrinsics } from './lockdown.js';
import { compareWithinRealLengths, refuseResizableBuffers } from './buffer-guard.js';
import { guardStringDecoder } from './string-decoder-guard.js';
import { keepBuffersAttached } from './detach-guard.js';
import { builtin } from './refusal.js';
import { shrinkSurface } from './surface.js';
import { refuseSharedWasmMemory } from './wasm-guard.js';

/**
 * Runs inside the sandbox, bundled in front of the generated module. This file is evaluated before
 * the generated one, so everything below is in place before any of its code runs. State the module
 * must not reach (the session key, the real stdout writer) lives in a closure, not at the bundle's
 * top level, which the module shares (a direct eval there sees every top-level name).
 */

const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ENETUNREACH',
  'EHOSTUNREACH',
  'EAI_AGAIN',
  'ENOTFOUND',
  'EADDRNOTAVAIL',
]);

const NETWORK_SYSCALLS = new Set(['connect', 'listen', 'bind', 'socket', 'send', 'sendto']);

const statfs = fs.statfsSync; // the runner's, taken before the module runs
const filesLeft = () => {
  try {
    return statfs('.').ffree;
  } catch {
    return undefined;
  }
};

function classify(err: unknown): { status: number; type: ProtocolErrorType; message?: string } | undefined {
  const e = (err ?? {}) as {
    code?: unknown;
    syscall?: unknown;
    permission?: unknown;
    resource?: unknown;
    message?: unknown;
  };
  const code = e.code;
  if (code === 'ERR_ACCESS_DENIED' && e.permission === 'Network') return { status: 500, type: 'network_denied' };
  if (code === 'ERR_ACCESS_DENIED') {
    // Node's own message does not say what was refused; its error fields do.
    const what = [e.permission, e.resource].filter((x) => typeof x === 'string' && x).join(' ');
    return { status: 500, type: 'permission_denied', message: `${String(e.message)}${what ? ` (${what})` : ''}` };
  }
  // The seccomp filter refuses every socket but unix ones (EPERM at connect, listen or bind): that is the network.
  if ((code === 'EACCES' || code === 'EPERM') && typeof e.syscall === 'string' && NETWORK_SYSCALLS.has(e.syscall))
    return { status: 500, type: 'network_denied' };
  if (code === 'EACCES' || code === 'EPERM') return { status: 500, type: 'permission_denied' };
  if (typeof code === 'string' && NETWORK_CODES.has(code)) return { status: 500, type: 'network_denied' };
  // A tmpfs out of inodes says ENOSPC too; its free count tells `maxFiles` from `diskMb`.
  if (code === 'ENOSPC' && filesLeft() === 0) return { status: 500, type: 'file_limit' };
  if (code === 'EFBIG' || code === 'ENOSPC' || code === 'EDQUOT') return { status: 500, type: 'disk_limit' };
  if (err instanceof RangeError && /allocation failed|out of memory/i.test(err.message))
    return { status: 500, type: 'out_of_memory' };
  return undefined;
}

/** A stand-in that throws when called or constructed (`new Worker(…)` must fail the same way). */
function refused(what: string, permission: 'Sandbox' | 'Network' = 'Sandbox'): () => never {
  return function refusedApi(): never {
    throw Object.assign(new Error(`sandbox: ${what} is disabled in the sandbox`), {
      code: 'ERR_ACCESS_DENIED',
      permission,
      resource: what,
    });
  };
}

/**
 * Closes the APIs that reach past JavaScript: run-time V8 flags (`--allow-natives-syntax` voids
 * V8's memory safety, `--trace-turbo-path` and heap snapshots write files), `process.report`
 * (writes wherever the process can see, past --allow-fs-write), native bindings, the inspector,
 * and new processes or threads (which could start with any V8 flag). The permission model
 * refuses some of these too; this does not rely on it.
 */
function disableEscapeHatches(writeStderr: (bytes: Uint8Array) => void): void {
  // Node makes a vm context of its own, once, the first time a deprecated Buffer() is called (a
  // stack walk; and a web stream's reader released, before web streams were refused): made now,
  // while vm still works, so honest code never meets vm's refusal (rerun 14).
  const quiet = process.noDeprecation;
  process.noDeprecation = true;
  (Buffer as unknown as (size: number) => Buffer)(0);
  process.noDeprecation = quiet;
  // Deprecated timer APIs that start a real internal timer on any object (its `_idleStart` the real
  // loop clock, and it fires across the worker's idle gaps: red-team rerun 3).
  for (const k of ['enroll', 'unenroll', 'active', '_unrefActive'])
    Object.defineProperty(timers, k, { value: refused(`timers.${k}`), configurable: false, writable: false });
  // Hooks see every async resource of the runner and of Node's internals, timers included (rerun 4);
  // AsyncLocalStorage's init hook handed them to a subclass's `_propagate` (rerun 8), and entering
  // one turned Node's async-id checks back on, aborts forged ids reached (rerun 72w). No hook can be
  // enabled, so the checks stay off (isolation.ts).
  for (const k of ['createHook', 'executionAsyncResource', 'AsyncLocalStorage'])
    Object.defineProperty(asyncHooks, k, { value: refused(`async_hooks.${k}`), configurable: false, writable: false });
  // Node installs a signal's handler from its own 'newListener' listener; without it, no listener
  // the module adds installs one. One that caught SIGXCPU answered on past cpuSeconds to the hard
  // limit, its death misnamed a crash (rerun 67b); a refusal in 'newListener' was passed by calling
  // Node's listener, taken from process.listeners (rerun 68b).
  const emitter = process as unknown as NodeJS.EventEmitter;
  for (const event of ['newListener', 'removeListener'])
    for (const f of emitter.listeners(event))
      if (/^(start|stop)ListeningIfSignal$/.test(f.name)) emitter.removeListener(event, f as () => void);
  freezeRequestPrototypes();
  shrinkSurface(refused, writeStderr);
  confineModuleResolution();
  syncBuiltinESMExports(); // named ESM imports of those modules see the refusals too
  Object.defineProperty(process, 'report', { get: refused('process.report'), configurable: false });
  // The title is the process's command line and name to the host (`ps`, /proc/<pid>/stat): a module
  // wrote "…) R 1 2 3" there, which a reader of stat that splits on ") " takes as its fields (rerun 41b).
  const title = process.title;
  Object.defineProperty(process, 'title', { get: () => title, set: refused('process.title'), configurable: false });
  // The handle lists hold the runner's own stdin and stdout sockets, past the process.stdin refusal (rerun 6).
  // _debugProcess sends SIGUSR1 to any pid (the sandbox's node blocks it; no signals from JavaScript: rerun 69b).
  for (const k of [
    'binding',
    '_linkedBinding',
    'dlopen',
    '_getActiveHandles',
    '_getActiveRequests',
    '_debugProcess',
    '_debugEnd',
  ])
    Object.defineProperty(process, k, { value: refused(`process.${k}`), configurable: false, writable: false });
}

/**
 * Node sets each request's `oncomplete` on the request itself, and every request inherits from
 * AsyncWrap.prototype: an accessor there was handed each callback, and with it a stat's raw numbers
 * before the frozen Stats were built (the real time, the pause between requests: rerun 72b). The
 * module holds no native handle to reach it by (surface.ts), but the runner's own read of fd 0 is
 * such a request (rerun 72m), so AsyncWrap.prototype and the file request's prototype are frozen.
 * Node adds nothing to them later.
 */
function freezeRequestPrototypes(): void {
  const deflate = (builtin('zlib') as { createDeflate: () => { _handle: object; close: () => void } }).createDeflate();
  let asyncWrap = Object.getPrototypeOf(deflate._handle) as object | null; // a handle, before zlib is refused
  while (asyncWrap && !Object.hasOwn(asyncWrap, 'getAsyncId'))
    asyncWrap = Object.getPrototypeOf(asyncWrap) as object | null;
  deflate.close();
  if (!asyncWrap) throw new Error('sandbox runner: no AsyncWrap prototype found in this Node');
  let fileRequest: object | undefined;
  Object.defineProperty(asyncWrap, 'oncomplete', {
    set(this: object, callback: unknown) {
      fileRequest = Object.getPrototypeOf(this) as object;
      Object.defineProperty(this, 'oncomplete', { value: callback, writable: true, configurable: true });
    },
    configurable: true,
  });
  fs.stat('.', () => {});
  delete (asyncWrap as { oncomplete?: unknown }).oncomplete;
  if (!fileRequest) throw new Error('sandbox runner: no file request prototype found in this Node');
  Object.freeze(fileRequest);
  Object.freeze(asyncWrap);
}

type CommonJsLoader = {
  _resolveFilename: (request: string, ...rest: unknown[]) => string;
  _extensions: Record<string, unknown>;
  prototype: object;
};

/**
 * Node's CommonJS resolver stats paths and reads package.json files without the permission model
 * (`require.resolve`, `Module._findPath`, `_stat`, `_readPackage` told which host files exist and
 * read a host package's manifest: rerun 12). The bundle holds every module the env needs, so at run
 * time only builtins resolve; every other request, path or name, fails the same way before any
 * file is looked at. (The bwrap level also mounts nothing of the host's for the ESM resolver to see.)
 */
function confineModuleResolution(): void {
  const loader = nodeModule as unknown as CommonJsLoader;
  const resolve = loader._resolveFilename;
  const isBuiltin = nodeModule.isBuiltin;
  const lock = (target: object, key: string, value: unknown) =>
    Object.defineProperty(target, key, { value, configurable: false, writable: false });
  lock(loader, '_resolveFilename', function resolveBuiltinOnly(request: string, ...rest: unknown[]): string {
    if (typeof request === 'string' && isBuiltin(request)) return resolve.call(loader, request, ...rest);
    return refused(`resolving modules at run time (${JSON.stringify(String(request)).slice(0, 80)})`)();
  });
  for (const k of ['_findPath', '_stat', '_readPackage', 'register', 'runMain', '_preloadModules'])
    lock(loader, k, refused(`module.${k}`));
  lock(loader.prototype, 'load', refused('module.Module.prototype.load'));
  for (const ext of Object.keys(loader._extensions))
    lock(loader._extensions, ext, refused(`module._extensions[${ext}]`));
  Object.freeze(loader._extensions);
}

const STAT_TIMES = ['atime', 'mtime', 'ctime', 'birthtime'] as const;

/**
 * Stops every clock the module can read, so that a module cannot behave differently once time has
 * passed since validation (or at another hour): Date (now, `new Date()`, `Date()`), Intl's default
 * date, performance.now/timeOrigin, process.hrtime/uptime, os.uptime and file timestamps all show
 * FROZEN_EPOCH_MS (relative clocks 0). generate(seed) must depend on the seed alone anyway, and a
 * date an env needs comes from its seed (envs/sdk/data.ts). Timers run on virtual time
 * (virtual-time.ts), and the real-time readings without a frozen form are refused.
 */
function freezeClocks(): void {
  const at = FROZEN_EPOCH_MS;
  const RealDate = Date;
  RealDate.now = () => at;
  const FrozenDate = new Proxy(RealDate, {
    construct: (target, args, newTarget) => Reflect.construct(target, args.length ? args : [at], newTarget),
    apply: () => new RealDate(at).toString(),
  });
  globalThis.Date = FrozenDate;
  RealDate.prototype.constructor = FrozenDate; // else `new (new Date(0).constructor)()` reads the real clock
  const format = Object.getOwnPropertyDescriptor(Intl.DateTimeFormat.prototype, 'format')!;
  Object.defineProperty(Intl.DateTimeFormat.prototype, 'format', {
    get(this: Intl.DateTimeFormat) {
      const f = format.get!.call(this) as (d?: Date | number) => string;
      return (d?: Date | number) => f(d ?? at);
    },
  });
  const toParts = Intl.DateTimeFormat.prototype.formatToParts;
  Intl.DateTimeFormat.prototype.formatToParts = function (this: Intl.DateTimeFormat, d?: Date | number) {
    return toParts.call(this, d ?? at);
  };
  // On the prototype as well as the instance: `Object.getPrototypeOf(performance).now.call(…)`
  // reached the real clock (red-team rerun 3).
  for (const perf of [performance, Object.getPrototypeOf(performance) as Performance]) {
    Object.defineProperty(perf, 'now', { value: () => 0 });
    Object.defineProperty(perf, 'timeOrigin', { get: () => at });
    Object.defineProperty(perf, 'toJSON', { value: () => ({ timeOrigin: at }) });
    // Other readings that grow with real time: performance entries and event-loop statistics
    // carry the real loop time.
    for (const k of ['mark', 'measure', 'eventLoopUtilization', 'timerify'])
      Object.defineProperty(perf, k, { value: refused(`performance.${k}`) });
    // fetch (undici) records each request through this one: refusing it crashed the process on
    // any fetch, so it records nothing instead.
    Object.defineProperty(perf, 'markResourceTiming', { value: () => undefined });
    Object.defineProperty(perf, 'nodeTiming', { get: refused('performance.nodeTiming') });
  }
  // A mark constructed directly starts at Node's own clock (rerun 4); the frozen one, a Proxy, led
  // back to the real class through util.inspect (reruns 72o, 72p). No env needs marks: refused.
  for (const holder of [perfHooks, globalThis] as Record<string, unknown>[])
    Object.defineProperty(holder, 'PerformanceMark', {
      value: refused('PerformanceMark'),
      writable: false,
      configurable: false,
      enumerable: false,
    });
  process.hrtime = Object.assign(() => [0, 0] as [number, number], { bigint: () => 0n });
  process.uptime = () => 0;
  os.uptime = () => 0;
  // An event's timeStamp is the real performance clock (`new Event('x').timeStamp`, an abort event's).
  Object.defineProperty(Event.prototype, 'timeStamp', { get: () => 0 });
  // And its inspection, which read the private stamp itself (rerun 72e: `util.inspect(new Event('x'))`
  // moved by each pause between requests): the same fields, the stamp as the getter shows it.
  Object.defineProperty(Event.prototype, util.inspect.custom, {
    value: function inspectEvent(
      this: Event,
      depth: number,
      options: util.InspectOptions,
      inspect: typeof util.inspect,
    ): string {
      const name = this.constructor.name;
      if (depth < 0) return name;
      const { type, defaultPrevented, cancelable } = this;
      const nested = { ...options, depth: options.depth == null ? null : options.depth - 1 };
      return `${name} ${inspect({ type, defaultPrevented, cancelable, timeStamp: 0 }, nested)}`;
    },
    writable: false,
    configurable: false,
  });
  for (const k of ['monitorEventLoopDelay', 'createHistogram', 'PerformanceObserver'])
    (perfHooks as unknown as Record<string, unknown>)[k] = refused(`perf_hooks.${k}`);
  (globalThis as Record<string, unknown>).PerformanceObserver = refused('PerformanceObserver');
  process.cpuUsage = () => ({ user: 0, system: 0 });
  const resourceUsage = process.resourceUsage;
  process.resourceUsage = () =>
    Object.fromEntries(Object.keys(resourceUsage()).map((k) => [k, 0])) as unknown as NodeJS.ResourceUsage;
  // CPU usage, the machine's CPU times since boot, its load, clock speed and free memory move with
  // real time or tell a busy phase (a trainer holding memory) from another. The CPUs' number and
  // model, the host name and the kernel tell one machine from another, and training's sandbox may
  // run on another machine than validation's (the GPU worker's): one fixed CPU, fixed names (rerun 6).
  os.cpus = () => [{ model: 'sandbox', speed: 0, times: { user: 0, nice: 0, sys: 0, idle: 0, irq: 0 } }];
  os.availableParallelism = () => 1;
  os.hostname = () => 'sandbox';
  os.release = () => '0.0.0';
  os.version = () => 'sandbox';
  // The host's cgroup memory limit (or none): a machine constant like the kernel's.
  (process as unknown as Record<string, unknown>).constrainedMemory = () => 0;
  os.loadavg = () => [0, 0, 0];
  // The niceness inherited from the worker (its own, or which settings fail): training's sandbox runs
  // under the GPU worker, validation's under the CPU worker, which may run at another (rerun 22).
  os.getPriority = () => 0;
  os.setPriority = refused('os.setPriority');
  os.freemem = () => 2 ** 30;
  os.totalmem = () => 2 ** 31;
  // libuv's reading of the machine's free memory, past the permission model (rerun 4).
  const proc = process as unknown as Record<string, unknown>;
  if (typeof proc.availableMemory === 'function') proc.availableMemory = () => 2 ** 30;
  // fs's timestamp helper answers a negative or non-finite time with Node's own clock (rerun 72d:
  // `fs._toUnixTimestamp(-1)` was the real time); it answers with the frozen instant.
  const toUnixTimestamp = (fs as unknown as Record<string, (time: unknown, name?: string) => number>)._toUnixTimestamp;
  Object.defineProperty(fs, '_toUnixTimestamp', {
    value: (time: unknown, name?: string) =>
      typeof time === 'number' && !(Number.isFinite(time) && time >= 0)
        ? FROZEN_EPOCH_MS / 1000
        : toUnixTimestamp(time, name),
    configurable: false,
    writable: false,
  });
  // A real Timeout (Node's own, e.g. AbortSignal.timeout's) carries the real loop time in
  // `_idleStart`, and its class's `refresh()` arms a real timer (rerun 6): never re-armed here.
  const probe = setTimeout(() => {}, 0);
  clearTimeout(probe);
  const timeoutPrototype = Object.getPrototypeOf(probe) as object;
  Object.defineProperty(timeoutPrototype, 'refresh', {
    value: refused('Timeout.refresh'),
    configurable: false,
    writable: false,
  });
  // Frozen (a Timeout's and an Immediate's fields are their own): a setter for `_idleStart` there
  // received the real loop clock as Node inserted a timer (rerun 8).
  const immediate = setImmediate(() => {});
  clearImmediate(immediate);
  Object.freeze(timeoutPrototype);
  Object.freeze(Object.getPrototypeOf(immediate));
  // util.log stamps its line with Node's own Date (rerun 5: the real date and second).
  Object.defineProperty(util, 'log', { value: refused('util.log'), configurable: false, writable: false });
  freezeStats(at);
  // The sync forms retry a busy path after a real sleep (Node's rimrafSync): a step blocked for
  // `retryDelay` of real time while work of the module's ran on (a ruler of machine speed, rerun 7).
  for (const k of ['rmSync', 'rmdirSync'] as const) {
    const f = fs[k] as (p: fs.PathLike, o?: unknown) => void;
    Object.defineProperty(fs, k, {
      value: (p: fs.PathLike, o?: unknown) => f(p, o && typeof o === 'object' ? { ...o, maxRetries: 0 } : o),
      writable: false,
      configurable: false,
    });
  }
}

/**
 * A file written now carries the real time in its timestamps, a socket's or pipe's inode number
 * comes from a machine-wide counter, and a tmpfs's device number is the next free one when it was
 * mounted (both count what else the machine was doing: rerun 6). Every `Stats` Node builds (sync,
 * callback, promise, `FileHandle.stat`, inside `fs.cp`) assigns those fields in its constructor,
 * so setters on the prototypes, which the module cannot replace, store fixed values there: the
 * real ones never reach an object the module sees. Wrapping each stat function missed forms (a
 * callback not last, a `then` getter on the stats' prototype as Node resolved its promise with
 * them, a setter there as Node built them: rerun 6).
 */
function freezeStats(at: number): void {
  const stats = fs.statSync('.');
  const bigStats = fs.statSync('.', { bigint: true });
  const own = (o: object, k: string, value: unknown) =>
    Object.defineProperty(o, k, { value, writable: true, enumerable: true, configurable: true });
  const store = (proto: object, k: string, value: (self: Record<string, unknown>, v: unknown) => unknown) =>
    Object.defineProperty(proto, k, {
      set(this: Record<string, unknown>, v: unknown) {
        own(this, k, value(this, v));
      },
      configurable: false,
    });
  const zero = (v: unknown) => (typeof v === 'bigint' ? 0n : 0);
  // The real device of each Stats as it is built: an inode number is kept only on the sandbox's own
  // file system. Elsewhere it counts the host's allocations (the bundle, bind-mounted from the
  // host's disk: rerun 8) or the machine's sockets and pipes (rerun 6).
  const ownDev = stats.dev;
  const devOf = new WeakMap<object, unknown>();
  for (const [proto, big] of [
    [Object.getPrototypeOf(stats) as object, false],
    [Object.getPrototypeOf(bigStats) as object, true],
  ] as const) {
    for (const k of STAT_TIMES) {
      store(proto, `${k}Ms`, () => (big ? BigInt(at) : at));
      if (big) store(proto, `${k}Ns`, () => BigInt(at) * 1_000_000n);
      store(proto, k, () => new Date(at));
    }
    // On the leaf prototypes too, so that they are found before anything the module puts on the chain
    // (StatsBase assigns these in the order dev, mode, …, ino, so the mode is known by then).
    store(proto, 'dev', (self, v) => {
      devOf.set(self, v);
      return zero(v);
    });
    store(proto, 'rdev', (_self, v) => zero(v));
    store(proto, 'ino', (self, v) => (Number(devOf.get(self)) === ownDev ? v : zero(v)));
    // `fs.Stats.prototype = {…}` would give every later Stats a prototype of the module's.
    Object.defineProperty((proto as { constructor: object }).constructor, 'prototype', { writable: false });
  }
  // statfs of the bind-mounted bundle read the host disk's size and its free blocks and inodes,
  // which move with the host's activity (rerun 8). Only the sandbox's own tmpfs answers.
  const TMPFS_MAGIC = 0x01021994;
  const statFs = Object.getPrototypeOf(fs.statfsSync('.')) as object;
  const isOwn = new WeakSet<object>();
  store(statFs, 'type', (self, v) => {
    if (Number(v) === TMPFS_MAGIC) isOwn.add(self);
    return isOwn.has(self) ? v : zero(v);
  });
  for (const k of ['bsize', 'blocks', 'bfree', 'bavail', 'files', 'ffree'])
    store(statFs, k, (self, v) => (isOwn.has(self) ? v : zero(v)));
}

/** The value of the runner's argument `prefix…`, taken out of argv before the module loads. */
function takeArg(prefix: string): string | undefined {
  const at = process.argv.findIndex((a) => a.startsWith(prefix));
  return at >= 0 ? process.argv.splice(at, 1)[0].slice(prefix.length) : undefined;
}

/**
 * Descriptors the worker held without close-on-exec (named by it in --close-fds) come through
 * every exec; the permission model does not guard writes to an open fd, so they are closed before
 * the module exists. Node's own descriptors cannot have those numbers: they were taken at start.
 */
function closeInheritedFds(): void {
  // Out of argv too: the list is the worker's own open descriptors, which differ from worker to worker (rerun 7).
  const arg = takeArg('--close-fds=');
  for (const fd of arg ? arg.split(',').map(Number) : []) {
    try {
      fs.closeSync(fd);
    } catch {
      // not open here (e.g. replaced on the way by the stdio set-up)
    }
  }
}

/** The first stdin line, read before the module exists, so only the runner ever holds it. */
function readSessionKey(readSync: typeof fs.readSync): Buffer {
  const line = Buffer.alloc(SESSION_KEY_BYTES * 2 + 1);
  for (let n = 0; n < line.length;) {
    const got = readSync(0, line, n, line.length - n, null);
    if (got === 0) process.exit(0); // the worker went away before the key came
    n += got;
  }
  // Buffer.from(hex) would decode into the shared Buffer pool, whose ArrayBuffer any module reaches
  // (`Buffer.from('x').buffer`): the key sat at byte 248 and the module could MAC lines of its own
  // (red-team rerun 5). Buffer.alloc has a buffer of its own; the hex is wiped, and decoded byte by
  // byte, so no string of it stays on the heap (rerun 72n).
  const key = Buffer.alloc(SESSION_KEY_BYTES);
  const nibble = (c: number) => (c <= 0x39 ? c - 0x30 : (c | 0x20) - 0x57);
  for (let i = 0; i < SESSION_KEY_BYTES; i++) key[i] = (nibble(line[2 * i]) << 4) | nibble(line[2 * i + 1]);
  line.fill(0);
  return key;
}

/** What a WeakRef may hold and a FinalizationRegistry watch: an object, or a symbol not in the registry. */
const canBeHeldWeakly = (v: unknown) =>
  (typeof v === 'object' && v !== null) ||
  typeof v === 'function' ||
  (typeof v === 'symbol' && Symbol.keyFor(v) === undefined);

/**
 * When the collector runs depends on real time and machine speed (V8's background marking threads,
 * its memory reducer's timers), and weak references show when it ran: a FinalizationRegistry's
 * callbacks fired at the request after a pause, and not without one (red-team rerun 10). The
 * language lets an implementation never collect a weakly held target, and here none is: a WeakRef
 * holds its target and a registry never calls back (the process's life is bounded by
 * `episodesPerProcess`).
 */
function holdWeakReferences(): void {
  const refuse = (what: string) => {
    throw new TypeError(`${what}: invalid target`);
  };
  class WeakRef<T extends WeakKey> {
    readonly #target: T;
    constructor(target: T) {
      if (!canBeHeldWeakly(target)) refuse('WeakRef');
      this.#target = target;
    }
    deref(): T {
      return this.#target;
    }
  }
  class FinalizationRegistry<T> {
    readonly #tokens = new WeakMap<WeakKey, number>();
    constructor(cleanup: (held: T) => void) {
      if (typeof cleanup !== 'function') throw new TypeError('FinalizationRegistry: cleanup must be callable');
    }
    register(target: WeakKey, held: T, token?: WeakKey): void {
      if (!canBeHeldWeakly(target) || Object.is(target, held)) refuse('FinalizationRegistry.register');
      if (token === undefined) return;
      if (!canBeHeldWeakly(token)) refuse('FinalizationRegistry.register (token)');
      this.#tokens.set(token, (this.#tokens.get(token) ?? 0) + 1);
    }
    unregister(token: WeakKey): boolean {
      if (!canBeHeldWeakly(token)) refuse('FinalizationRegistry.unregister');
      return this.#tokens.delete(token);
    }
  }
  for (const [C, tag] of [
    [WeakRef, 'WeakRef'],
    [FinalizationRegistry, 'FinalizationRegistry'],
  ] as const) {
    Object.defineProperty(C.prototype, Symbol.toStringTag, { value: tag, configurable: true });
    Object.defineProperty(globalThis, tag, { value: C, writable: true, configurable: true, enumerable: false });
  }
}

const REQUIRED = ['tools', 'systemPrompt', 'listTasks', 'reset'] as const;

/** Active libuv requests the module may be waiting on (file system incl. closes, DNS, connects, writes). */
const IO_REQUEST = /Req|^(Connect|Write|Shutdown|Send|Query)Wrap$/;
/** Zero-delay timers (and immediates) a request leaves behind run before its answer, at most this many. */
const DRAIN_MAX = 1000;

export const runSandboxChild: (mod: unknown) => void = (() => {
  closeInheritedFds();
  // Taken before the module could replace them (fs is not frozen; it keeps only its sync calls).
  const { read, readSync, writeSync } = fs;
  /** Writes all of `bytes` to `fd`, past a non-blocking pipe's EAGAIN. */
  const writeAll = (fd: number, bytes: Uint8Array) => {
    for (let off = 0; off < bytes.length;) {
      try {
        off += writeSync(fd, bytes, off, bytes.length - off);
      } catch (err) {
        if ((err as { code?: unknown }).code !== 'EAGAIN') throw err;
      }
    }
  };
  // An answer longer than this is not MACed and sent (seconds for 100 MiB) for the worker to refuse
  // at its first 4 MiB: the runner answers output_limit at once (a 64 MiB one had run past the wall
  // clock: rerun 10).
  const outputBytes = Number(takeArg('--output-bytes=') ?? Infinity);
  freezeClocks();
  // The runner keeps the real timers and stdin to itself; the module gets virtual ones.
  const realImmediate = setImmediate;
  const activeResources = process.getActiveResourcesInfo.bind(process);
  const clock: VirtualClock = installVirtualTimers();
  holdWeakReferences();
  // Uncaught errors go to Node's capture callback, not to a listener: a module could remove a
  // listener and hang until the wall clock (a known gap of rerun 13). Set before process.report is
  // refused (Node's setter reads it), then the setter is refused.
  // Node emits 'uncaughtExceptionMonitor' before it calls the capture callback, looking process.emit
  // up: a monitor listener, or an emit of the module's, that threw there sent Node down its own
  // fatal exit, which hung until the wall clock (rerun 14). process.emit is the runner's and fixed,
  // and an error thrown for that event is dropped. After the 'exit' listeners, the runner exits
  // itself (onExitEvent).
  const realEmit = process.emit;
  let onExitEvent: () => void = () => {};
  Object.defineProperty(process, 'emit', {
    value: function emit(this: unknown, type: unknown, ...args: unknown[]) {
      if (type === 'exit')
        try {
          return Reflect.apply(realEmit, this, [type, ...args]);
        } finally {
          onExitEvent();
        }
      if (type !== 'uncaughtExceptionMonitor') return Reflect.apply(realEmit, this, [type, ...args]);
      try {
        return Reflect.apply(realEmit, this, [type, ...args]);
      } catch {
        return false;
      }
    },
    writable: false,
    configurable: false,
  });
  let onUncaught: (err: unknown) => void = () => {};
  process.setUncaughtExceptionCaptureCallback((err) => onUncaught(err));
  Object.defineProperty(process, 'setUncaughtExceptionCaptureCallback', {
    value: refused('process.setUncaughtExceptionCaptureCallback'),
    configurable: false,
    writable: false,
  });
  // Node's C++ asks process._fatalException about each uncaught error; Node's own calls the callback
  // above. A module's replacement answering false had Node exit with process.exitCode, past the
  // runner's notice and its cap at 127: 152 read as SIGXCPU, a faked limit (rerun 69b).
  Object.defineProperty(process, '_fatalException', {
    value: (process as unknown as { _fatalException: unknown })._fatalException,
    configurable: false,
    writable: false,
  });
  disableEscapeHatches((bytes) => writeAll(2, bytes)); // after freezeClocks: its syncBuiltinESMExports carries the frozen fs/os functions to named imports
  refuseSharedWasmMemory(refused); // a wasm atomic wait on a shared memory blocks for real time
  refuseResizableBuffers(refused); // each reserves a mapping no memory limit counts
  compareWithinRealLengths(); // Node bounded the target by a length the module can claim
  // Node's own code looks Buffer's statics and methods up when it calls them: a replaced
  // `allocUnsafe` (rerun 77a), `slice`, `toString` or a `byteLength` getter on the prototype (rerun
  // 78a) ran the module inside assert's reading of a source file, each level holding a descriptor
  // past the module's 192, until none was left for Node's fatal-error report (a file then). After
  // the guards above, which replace `compare`.
  Object.freeze(Buffer);
  Object.freeze(Buffer.prototype);
  guardStringDecoder(refused); // the state Node's native decoder trusts, checked
  keepBuffersAttached(refused); // a detached buffer is freed under native calls still using it
  lockIntrinsics(); // last: the runner's own changes to the built-ins are in place
  // The key lives only in the MAC's own pads (Node's createHmac let a getter on its prototypes see it: rerun 6).
  const key = readSessionKey(readSync);
  const mac = hmacSha256(key);
  key.fill(0);
  // The protocol runs on fds 0 and 1 themselves, below Node's streams: their prototypes are Node's,
  // not frozen, and a module that patched them got the runner's stdin socket and every answer line
  // (rerun 7). Neither stream is ever made (process.stdin is refused, process.stdout is the module's
  // stderr: surface.ts), so both fds keep the blocking mode the spawn gave them; everything the
  // module prints goes to fd 2, and a line it writes to fd 1 itself lacks the runner's MAC and the
  // worker refuses it.
  Object.defineProperty(process, 'stdin', { get: refused('process.stdin'), configurable: false });
  // The runner's own exit, taken now: `process.exit` is the module's to replace, and a no-op there
  // had the runner go on to serve a request line it had refused (red-team rerun 9). Node's exit in
  // turn looks `process.reallyExit` up when called (a no-op there kept the runner reading a file the
  // module had put on fd 0: rerun 10), so the native one is called itself; the module's 'exit'
  // listeners are not run.
  const reallyExit = (process as unknown as { reallyExit: (code: number) => never }).reallyExit;
  const exit = (code: number): never => Reflect.apply(reallyExit, process, [code]);
  // Taken now and called by Reflect.apply: Node's prototypes and functions stay open, and a module
  // that defined its own `call` on StringDecoder's `write` read and rewrote every request (rerun 8).
  // The decoder is made now too: made after the module had loaded, Node's constructor had handed it
  // to a setter of the module's on StringDecoder.prototype, and a getter there for the native state's
  // symbol was called at every chunk the runner read (rerun 10).
  const decode = StringDecoder.prototype.write;
  const decoder = new StringDecoder('utf8');
  const chunk = new Uint8Array(1 << 16); // an intrinsic view: nothing of Node's between the fd and the decoder
  const apply = Reflect.apply;
  const stringify = JSON.stringify;
  const charCodeAt = String.prototype.charCodeAt;
  const setBytes = Uint8Array.prototype.set;
  const Bytes = Uint8Array;
  /** Writes one protocol line: its MAC, a space, the line's UTF-8 bytes (encoded once, by the caller). */
  const send = (line: Uint8Array) => {
    const hex = mac(line);
    const bytes = new Bytes(MAC_HEX + 1 + line.length + 1);
    for (let i = 0; i < MAC_HEX; i++) bytes[i] = apply(charCodeAt, hex, [i]);
    bytes[MAC_HEX] = 0x20;
    apply(setBytes, bytes, [line, MAC_HEX + 1]);
    bytes[bytes.length - 1] = 0x0a;
    writeAll(1, bytes);
  };
  // The module's own exits are told to the worker first, in a signed line, and it kills the process:
  // Node's exit joins its thread pool, where the runner's read of fd 0 is pending between chunks, so
  // an exit from a callback (or Node's fatal exit on an uncaught error) hung until the worker's wall
  // clock fired, 10 s later and under that limit's name (rerun 13).
  const moduleExit = (code: number, why: string): never => {
    try {
      send(utf8(stringify({ exit: code, message: why })));
    } catch {
      // the worker has gone: nothing to tell
    }
    return exit(code);
  };
  // The worker reads a death by signal (or bwrap's 128 + N) as the limit behind it: SIGXCPU as
  // cpuSeconds, SIGXFSZ as diskMb, SIGABRT with Node's out-of-memory report as memoryMb. The module
  // may exit, but not as a signal: no signals of its own, no exit code over 127 (as 1). Node's
  // process.exit calls this after the 'exit' listeners (replaceable, as Node has it: a module's own
  // replacement can reach only this one).
  const cappedExit = (code: unknown): never => {
    const valid = Number.isInteger(code) && (code as number) >= 0 && (code as number) <= 127;
    return moduleExit(valid ? (code as number) : 1, `the module exited with code ${String(code).slice(0, 40)}`);
  };
  (process as unknown as { reallyExit: (code: unknown) => never }).reallyExit = cappedExit;
  // Node's own exit, once nothing is left to run (a top-level await that never settles, the
  // runner's read of fd 0 made to never complete), takes process.exitCode as it stands, past the cap
  // above: 152 read as SIGXCPU, at import and in a request (rerun 72b). Node emits 'exit' first.
  onExitEvent = () => cappedExit(process.exitCode ?? 0);
  for (const k of ['kill', '_kill', 'abort'])
    Object.defineProperty(process, k, { value: refused(`process.${k}`), configurable: false, writable: false });
  // An error the module leaves uncaught (a throw in a callback, an unhandled rejection) ends the
  // process with its text, not through Node's fatal exit (an exit listener's exitCode 152 would read
  // as SIGXCPU there).
  onUncaught = (err) => {
    let text: string;
    try {
      text = String((err as { stack?: unknown })?.stack ?? err);
    } catch {
      text = '(an error that cannot be printed)';
    }
    moduleExit(70, `the module left an error uncaught: ${text.slice(0, 2000)}`);
  };
  /** Calls `onText` with each chunk of stdin, decoded; exits at its end. */
  const readRequests = (onText: (text: string) => void) => {
    const next = () => {
      reading = true;
      read(0, chunk, 0, chunk.length, null, (err, n) => {
        reading = false;
        if (err || n === 0) exit(0);
        onText(apply(decode, decoder, [new Uint8Array(chunk.buffer, 0, n)]));
        next();
      });
    };
    next();
  };
  let reading = false; // the runner's own read of fd 0, always pending between requests

  // Virtual time moves only while a request is being answered and the module waits on nothing
  // but timers: then the earliest fires, one per turn of the event loop (I/O the module started
  // completes first, so a timeout raced against a file read does not win by accident). The
  // module's import counts as one request: an honest top-level await of a timer had left Node with
  // nothing to run, exit code 13 (rerun 72b).
  let inFlight = 1;
  let pumping = false;
  const step = () => {
    pumping = false;
    if (!inFlight || !clock.size) return;
    let io = 0;
    for (const r of activeResources()) if (IO_REQUEST.test(r)) io++;
    if (io <= (reading ? 1 : 0)) clock.fireNext();
    pump();
  };
  const pump = () => {
    if (pumping || !inFlight || !clock.size) return;
    pumping = true;
    realImmediate(step);
  };
  clock.onSchedule = pump;
  const turn = () => new Promise<void>((r) => realImmediate(r));

  return (mod: unknown) => {
    inFlight--; // the import is done
    const env = mod as Environment;
    const missing = env && typeof env === 'object' ? REQUIRED.filter((k) => typeof env[k] !== 'function') : REQUIRED;
    if (missing.length || typeof env.info !== 'object') {
      writeAll(
        2,
        utf8(
          `sandbox: the module's default export is not an Environment (missing ${missing.length ? missing.join(', ') : 'info'})\n`,
        ),
      );
      exit(3);
    }
    // The parent owns episode lifetime; it closes the whole process rather than sweeping idle
    // episodes. The handler's sweep interval would be the one real timer in the process, firing at
    // the first turn after a pause longer than its period (30 s; async hooks saw it: rerun 4), so it
    // is never created.
    const virtualSetInterval = globalThis.setInterval;
    globalThis.setInterval = (() => ({ unref() {} })) as unknown as typeof setInterval;
    let handler: ReturnType<typeof createProtocolHandler>;
    try {
      handler = createProtocolHandler(env, { idleTimeoutMs: 2 ** 31 - 1, classifyError: classify });
    } finally {
      globalThis.setInterval = virtualSetInterval;
    }
    /** The request in a line the worker signed; else the runner exits (its input is not the worker's). */
    const verified = (line: string) => {
      const json = line.slice(MAC_HEX + 1);
      const expected = mac(utf8(`request ${json}`));
      let diff = line[MAC_HEX] === ' ' && line.length > MAC_HEX ? 0 : 1;
      for (let i = 0; i < MAC_HEX; i++) diff |= expected.charCodeAt(i) ^ line.charCodeAt(i);
      if (!diff) return json;
      writeSync(2, utf8('sandbox: a request line the worker did not sign; the runner stops\n'));
      return exit(4);
    };
    const serve = async (line: string) => {
      let id: unknown = null;
      let reply: { status: number; body: unknown };
      inFlight++;
      pump();
      try {
        const req = JSON.parse(line) as { id: unknown; method: string; path: string; body?: unknown };
        id = req.id;
        reply = await handler.handle(req);
      } catch (err) {
        reply = {
          status: 400,
          body: { error: { type: 'bad_request', message: `sandbox: bad request line: ${(err as Error).message}` } },
        };
      } finally {
        inFlight--;
      }
      // What the request left for "right after" (setTimeout 0, setImmediate) runs before it is
      // answered, so how much of it ran never depends on when the next request comes.
      for (let n = 0; n < DRAIN_MAX; n++) {
        await turn();
        if (!clock.fireDue(1)) break;
      }
      let out: string;
      try {
        out = stringify({ id, ...reply });
      } catch (err) {
        out = stringify({
          id,
          status: 500,
          body: {
            error: { type: 'internal', message: `response is not JSON-serializable: ${(err as Error).message}` },
          },
        });
      }
      // A string longer than the limit is over it in bytes too: only shorter ones are encoded to tell.
      let bytes = out.length > outputBytes ? undefined : utf8(out);
      if (!bytes || bytes.length > outputBytes)
        bytes = utf8(
          stringify({
            id,
            status: 500,
            body: { error: { type: 'output_limit', message: `a response over ${outputBytes} bytes` } },
          }),
        );
      send(bytes);
    };
    let buf = '';
    readRequests((text) => {
      buf += text;
      for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
        const line = buf.slice(0, nl).replace(/\r$/, '');
        buf = buf.slice(nl + 1);
        if (line) void serve(verified(line));
      }
    });
  };
})();
