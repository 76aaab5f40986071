/**
 * What of Node the module can reach. Node's native bindings trust the JavaScript that calls them:
 * module code that forged the state a binding reads, handed one native object where another was
 * expected, or dropped the only reference keeping a pending call's memory alive read freed memory
 * (the real time) or wrote into it (red-team reruns 72i–72l). Every such route went through an
 * object holding a native handle of its own: sockets and their write requests, HTTP parsers, zlib
 * streams, the requests of asynchronous file and crypto calls, file handles, directories, Blobs,
 * message ports, TextDecoder's converter. Guarding them one by one did not converge (each pass found
 * more), so the module is given none of them:
 * - builtin modules by an allow-list; the rest (networking, compression, terminals, threads) refused;
 * - `fs` keeps its synchronous functions on the module's own descriptors (scratch files), `crypto`
 *   its hashes and MACs (the runner's own, over a native one-shot) and random numbers;
 * - the globals that hold native handles are refused, TextDecoder wrapped, and structured
 *   cloning's transfer hooks refused;
 * - `process.stdout`/`stderr` are streams of JavaScript's that write to fd 2.
 * What is left is computation, JavaScript streams and the frozen clocks: all an env needs, since a
 * generated env imports only `#env-sdk` and runs with no network.
 */
import { builtin, type Refused } from './refusal.js';

/**
 * The builtin modules the module may use; every other one, and those only `node:` names (`test`,
 * `sea`), is refused whole. An allow-list, since a module missed by a deny-list gave back what the
 * others closed (rerun 72m: `_stream_wrap`'s class extends `net.Socket`, native pipes and all).
 */
const ALLOWED_MODULES = new Set([
  'assert',
  'assert/strict',
  'async_hooks', // AsyncResource; createHook and AsyncLocalStorage refused (child.ts)
  'buffer',
  'console',
  'constants',
  'crypto', // narrowed below
  'diagnostics_channel',
  'events',
  'fs', // narrowed below
  'module', // resolves builtins only (child.ts)
  'os', // fixed readings (child.ts)
  'path',
  'path/posix',
  'path/win32',
  'perf_hooks', // frozen (child.ts)
  'process',
  'punycode',
  'querystring',
  'stream',
  'stream/consumers',
  'stream/promises',
  '_stream_duplex',
  '_stream_passthrough',
  '_stream_readable',
  '_stream_transform',
  '_stream_writable',
  'string_decoder', // its native state checked (string-decoder-guard.ts)
  'sys',
  'timers', // virtual (virtual-time.ts)
  'timers/promises',
  'url',
  'util',
  'util/types',
]);
const ONLY_WITH_SCHEME = ['node:test', 'node:test/reporters', 'node:sea'];

/** The refused modules whose refusal reads as `network`: there is none (IP sockets fail in seccomp too). */
const NETWORK = /^(net|dgram|dns|dns\/promises|https?|http2|tls|_tls_\w+|_http_\w+|_stream_wrap)$/;

/** `fs` keeps these and its synchronous functions (but opendirSync: a Dir is a native handle). */
const FS_KEPT = new Set(['constants', 'Stats', 'Dirent', 'F_OK', 'R_OK', 'W_OK', 'X_OK', '_toUnixTimestamp']);

/** `crypto` keeps these; the rest (keys, ciphers, certificates, key derivation) no env needs. */
const CRYPTO_KEPT = new Set([
  'constants',
  'hash', // a native one-shot digest: strings and bytes in, bytes out
  'getHashes',
  'getCiphers',
  'getCurves',
  'randomUUID',
  'randomFillSync',
  'timingSafeEqual',
  'getRandomValues',
  'webcrypto',
]);

/** Globals that hold native handles, or make them (a Blob's data, ports, zlib, a converter). */
const GLOBALS = [
  // Web streams: their methods take `this` by two symbols any stream carries, so a controller the
  // module forged ran the byte-stream machinery, whose enqueue and BYOB read detach the buffer they
  // are given (rerun 72q: freed memory read and written 3/3). No env needs them; Node streams stay.
  'ReadableStream',
  'ReadableStreamDefaultReader',
  'ReadableStreamBYOBReader',
  'ReadableStreamBYOBRequest',
  'ReadableByteStreamController',
  'ReadableStreamDefaultController',
  'TransformStream',
  'TransformStreamDefaultController',
  'WritableStream',
  'WritableStreamDefaultWriter',
  'WritableStreamDefaultController',
  'ByteLengthQueuingStrategy',
  'CountQueuingStrategy',
  'TextEncoderStream',
  // The Fetch API's bodies are web streams, and there is no network to fetch from; its Headers and
  // MessageEvent load undici, whose parser is WebAssembly and whose internals hold Blobs and streams.
  'fetch',
  'Request',
  'Response',
  'Headers',
  'MessageEvent',
  'Blob',
  'File',
  'MessageChannel',
  'MessagePort',
  'BroadcastChannel',
  'CompressionStream',
  'DecompressionStream',
  'TextDecoderStream',
  'FormData', // its file entries are Files, made from any Blob-like the module builds
];

type Exports = Record<PropertyKey, unknown>;

/**
 * What a refused getter gives (`fs.promises`, `crypto.subtle`): an object every use of which throws
 * the refusal. The getter itself must not throw: Node reads every export to give named ESM imports.
 */
function refusedObject(what: string, refused: Refused): object {
  const refuse = Object.freeze(refused(what));
  return new Proxy(refuse, { get: refuse, apply: refuse, construct: refuse });
}

/** Replaces `obj[key]` (a value or a getter) with the refusal of `what`, fixed. */
function refuseKey(obj: object, key: PropertyKey, what: string, refused: Refused): void {
  const d = Object.getOwnPropertyDescriptor(obj, key);
  if (d && !d.configurable) {
    if (d.get || !d.writable) return; // fixed by Node (tls.rootCertificates, crypto.subtle: see below)
    (obj as Exports)[key] = refused(what);
    return;
  }
  const value = d?.get ? refusedObject(what, refused) : refused(what);
  Object.defineProperty(obj, key, { value, enumerable: d?.enumerable ?? false, writable: false, configurable: false });
}

export function shrinkSurface(refused: Refused, writeStderr: (bytes: Uint8Array) => void): void {
  // First: loading some builtins reads process.stderr (colors, through assert), which would make
  // Node's own stderr socket.
  replaceStdio(writeStderr);
  // Loading deprecated builtins (sys, _stream_wrap) warns on stderr, as the module's own output.
  const quiet = process.noDeprecation;
  process.noDeprecation = true;
  try {
    closeModules(refused);
  } finally {
    process.noDeprecation = quiet;
  }
}

/** The allow-list and the narrowed modules and globals (`shrinkSurface`'s work, with warnings off). */
function closeModules(refused: Refused): void {
  const ids = [...(builtin('module') as unknown as { builtinModules: string[] }).builtinModules, ...ONLY_WITH_SCHEME];
  // All loaded before any is refused: one loads from another as it first loads (inspector/promises
  // wraps inspector's Session). Those that cannot load here (domain, repl, test: they need the
  // refused createHook) cannot load for the module either.
  const loaded: [string, Exports][] = [];
  for (const id of ids.filter((id) => !ALLOWED_MODULES.has(id))) {
    try {
      loaded.push([id.replace(/^node:/, ''), builtin(id)]);
    } catch {
      // not loadable
    }
  }
  for (const [id, mod] of loaded) refuseModule(id, mod, NETWORK.test(id) ? 'Network' : 'Sandbox', refused);
  keepSyncFs(refused);
  keepHashesAndRandom(refused);
  refuseNativeGlobals(refused);
  refuseTransferHooks(refused);
}

/**
 * Structured cloning's hooks, and the makers of native transferables: `AbortController`'s static
 * `kMakeTransferable` (behind util's refused transferables) made one the module could give a
 * prototype of its own, whose clone hook had Node build a real Blob again (rerun 72s).
 */
const TRANSFER_HOOK = /^messaging_|transferable/i;

/**
 * Web streams and AbortSignal keep the hooks structured cloning calls on them under symbols the
 * module lists (`messaging_transfer_list_symbol` and its kin), and each makes Node's own
 * MessageChannel: a port, closed and posted to with a transfer list, detached and freed any buffer
 * at once, and a Buffer method's offset `valueOf` doing so read and wrote freed memory 30/30
 * (rerun 72n). Every such hook on what the module reaches (the globals, the allowed modules, and
 * what their values and prototypes lead to) is refused; cloning itself (`structuredClone`) is
 * native and does not call them.
 */
function refuseTransferHooks(refused: Refused): void {
  const roots: unknown[] = [globalThis];
  const getterValues = (o: object) => {
    for (const k of Reflect.ownKeys(o)) {
      const get = Object.getOwnPropertyDescriptor(o, k)?.get;
      try {
        if (get) roots.push(Reflect.apply(get, o, []));
      } catch {
        // a refused or failing getter leads nowhere
      }
    }
  };
  getterValues(globalThis); // the lazy globals (AbortSignal, …; undici's are refused values by now)
  for (const id of ALLOWED_MODULES) {
    roots.push(builtin(id));
    getterValues(builtin(id));
  }
  const seen = new WeakSet<object>();
  const hooks: [object, symbol][] = [];
  while (roots.length) {
    const o = roots.pop();
    if ((typeof o !== 'object' && typeof o !== 'function') || o === null || seen.has(o)) continue;
    seen.add(o);
    for (const k of Reflect.ownKeys(o)) {
      if (typeof k === 'symbol' && TRANSFER_HOOK.test(k.description ?? '')) hooks.push([o, k]);
      const d = Object.getOwnPropertyDescriptor(o, k);
      if (d && 'value' in d) roots.push(d.value);
    }
    roots.push(Object.getPrototypeOf(o));
  }
  if (!hooks.some(([o]) => o === AbortSignal.prototype))
    throw new Error('sandbox runner: no structured-clone hooks found on AbortSignal in this Node');
  if (!hooks.some(([o]) => o === AbortController))
    throw new Error('sandbox runner: no kMakeTransferable found on AbortController in this Node');
  for (const [o, k] of hooks) refuseKey(o, k, `${k.description} (transferring is not open in the sandbox)`, refused);
}

/**
 * Every export of `mod` throws the refusal. A module that is a class itself (`_stream_wrap`) cannot
 * be swapped out of Node's cache: its methods are refused, and it inherits from the refusal, so its
 * constructor's `super()` throws before anything is built on a native handle.
 */
function refuseModule(id: string, mod: Exports, permission: 'Sandbox' | 'Network', refused: Refused): void {
  const why = permission === 'Network' ? 'there is no network' : 'not open in the sandbox';
  const refuse = (what: string) => refused(what, permission);
  for (const k of Reflect.ownKeys(mod))
    refuseKey(mod, k, `${id}${typeof k === 'string' ? `.${k}` : ''} (${why})`, refuse);
  if (typeof mod === 'function') {
    const proto = (mod as { prototype?: object }).prototype;
    if (proto) {
      for (const k of Reflect.ownKeys(proto)) refuseKey(proto, k, `${id}.prototype.${String(k)} (${why})`, refuse);
      Object.setPrototypeOf(proto, null);
      Object.freeze(proto);
    }
    Object.setPrototypeOf(mod, refuse(`${id} (${why})`));
  }
  Object.freeze(mod);
}

/**
 * Asynchronous fs calls hand their native request to the callback as `this` (a setter on its
 * prototype freed the buffer being read into: rerun 72l), and keep the buffers of `readv`/`writev`
 * only through a list the module can empty while the thread pool works. The synchronous forms
 * finish before the module runs again.
 */
function keepSyncFs(refused: Refused): void {
  const fs = builtin('fs');
  for (const k of Reflect.ownKeys(fs)) {
    if (typeof k !== 'string' || FS_KEPT.has(k) || (k.endsWith('Sync') && k !== 'opendirSync')) continue;
    refuseKey(fs, k, `fs.${k} (only synchronous file calls are open in the sandbox)`, refused);
  }
  onlyOwnDescriptors(fs, refused);
}

/** The calls that take a descriptor first, and those that take one in place of a path. */
const FD_CALLS = [
  'closeSync',
  'fchmodSync',
  'fchownSync',
  'fdatasyncSync',
  'fstatSync',
  'fsyncSync',
  'ftruncateSync',
  'futimesSync',
  'readSync',
  'readvSync',
  'writeSync',
  'writevSync',
];
const FD_OR_PATH_CALLS = ['readFileSync', 'writeFileSync', 'appendFileSync'];

/**
 * Descriptors the module may hold open at once, below `RLIMIT_NOFILE` (256): Node keeps ~20 of its
 * own and opens more as it works (assert reads a call site's source). Its report of a fatal error,
 * when that was a file, found none (rerun 76a: V8's out-of-memory death read as a crash); it goes
 * to fd 1 now (isolation.ts), and this cap is the second line.
 */
const MAX_OWN_DESCRIPTORS = 192;

/**
 * A descriptor is the module's only if its own `openSync` returned it. The process's others are the
 * runner's protocol (0, 1, 2) and Node's and libuv's own pipes: a message written to libuv's signal
 * pipe is a pointer it follows (rerun 72p: SIGSEGV 3/3), and the permission model does not guard
 * writes to an open descriptor. (Node's own fs calls go through these same exports, so a file
 * `writeFileSync` opens is the module's while it writes.)
 */
function onlyOwnDescriptors(fs: Exports, refused: Refused): void {
  const own = new Set<unknown>();
  const apply = Reflect.apply;
  const wrap = (k: string, checked: (args: unknown[]) => boolean) => {
    const f = fs[k] as (...a: unknown[]) => unknown;
    const refuse = refused(`fs.${k} on a descriptor the module did not open`);
    Object.defineProperty(fs, k, {
      value: function ownDescriptorsOnly(...args: unknown[]) {
        if (checked(args) && !own.has(args[0])) refuse();
        if (k === 'openSync' && own.size >= MAX_OWN_DESCRIPTORS)
          throw Object.assign(new Error(`EMFILE: too many open files, open (the module holds ${own.size})`), {
            code: 'EMFILE',
            syscall: 'open',
          });
        const result = apply(f, fs, args);
        if (k === 'openSync') own.add(result);
        if (k === 'closeSync') own.delete(args[0]);
        return result;
      },
      writable: false,
      configurable: false,
      enumerable: true,
    });
  };
  wrap('openSync', () => false);
  for (const k of FD_CALLS) wrap(k, () => true);
  for (const k of FD_OR_PATH_CALLS) wrap(k, (args) => typeof args[0] === 'number');
}

/** HMAC's block size for the hashes a MAC may use (RFC 2104; bytes). */
const HMAC_BLOCK: Record<string, number> = { md5: 64, sha1: 64, sha224: 64, sha256: 64, sha384: 128, sha512: 128 };

type OneShot = (algorithm: string, data: Uint8Array, encoding: 'buffer') => Uint8Array;

/**
 * `createHash` and `createHmac` without Node's Hash and Hmac: their objects keep a native handle
 * under a symbol, and Node's own code reads and stores it through prototypes and constructors the
 * module can change (reruns 72m, 72p: a Proxy on the stream prototypes, a `Symbol.hasInstance` on
 * `Transform`, each caught one; its native constructor then took other objects as keys and hashes,
 * SIGSEGV). These keep the input's bytes and digest them at once with `crypto.hash`, a native
 * one-shot that hands out nothing (HMAC as RFC 2104 over it).
 */
function oneShotDigests(hash: OneShot, refused: Refused) {
  const from = Buffer.from;
  const concat = Buffer.concat;
  const toText = Buffer.prototype.toString;
  const finalized = () => Object.assign(new Error('Digest already called'), { code: 'ERR_CRYPTO_HASH_FINALIZED' });
  const bytes = (data: unknown, encoding?: unknown): Uint8Array => {
    if (typeof data === 'string') return Reflect.apply(from, Buffer, [data, encoding ?? 'utf8']) as Uint8Array;
    if (!ArrayBuffer.isView(data))
      throw Object.assign(new TypeError('The "data" argument must be a string, a Buffer, a TypedArray or a DataView'), {
        code: 'ERR_INVALID_ARG_TYPE',
      });
    return new Uint8Array(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
  };
  const output = (digest: Uint8Array, encoding: unknown) =>
    encoding === undefined || encoding === 'buffer' ? digest : Reflect.apply(toText, digest, [encoding]);
  class Hash {
    #algorithm: string;
    #chunks: Uint8Array[];
    #done = false;
    constructor(algorithm: string, chunks: Uint8Array[] = []) {
      this.#algorithm = algorithm;
      this.#chunks = chunks;
    }
    update(data: unknown, encoding?: unknown): this {
      if (this.#done) throw finalized();
      this.#chunks.push(bytes(data, encoding));
      return this;
    }
    digest(encoding?: unknown): unknown {
      if (this.#done) throw finalized();
      this.#done = true;
      return output(
        hash(this.#algorithm, Reflect.apply(concat, Buffer, [this.#chunks]) as Uint8Array, 'buffer'),
        encoding,
      );
    }
    copy(): Hash {
      if (this.#done) throw finalized();
      return new Hash(this.#algorithm, [...this.#chunks]);
    }
  }
  class Hmac {
    #inner: Hash;
    #outer: Hash;
    constructor(algorithm: string, key: Uint8Array, block: number) {
      const k = new Uint8Array(block);
      k.set(key.length > block ? hash(algorithm, key, 'buffer') : key);
      this.#inner = new Hash(algorithm).update(k.map((b) => b ^ 0x36));
      this.#outer = new Hash(algorithm).update(k.map((b) => b ^ 0x5c));
    }
    update(data: unknown, encoding?: unknown): this {
      this.#inner.update(data, encoding);
      return this;
    }
    digest(encoding?: unknown): unknown {
      return output(this.#outer.update(this.#inner.digest() as Uint8Array).digest() as Uint8Array, encoding);
    }
  }
  const xof = refused('crypto.createHash with outputLength (not open in the sandbox)');
  return {
    createHash: (algorithm: string, options?: { outputLength?: unknown }) => {
      if (options && typeof options === 'object' && options.outputLength !== undefined) xof();
      hash(algorithm, new Uint8Array(0), 'buffer'); // Node's own error for an algorithm it lacks
      return new Hash(algorithm);
    },
    createHmac: (algorithm: string, key: unknown) => {
      const block = HMAC_BLOCK[String(algorithm).toLowerCase()];
      if (!block)
        refused(
          `crypto.createHmac('${String(algorithm).slice(0, 40)}') (HMAC over ${Object.keys(HMAC_BLOCK).join(', ')} only)`,
        )();
      return new Hmac(String(algorithm), bytes(key), block);
    },
  };
}

/**
 * `createCipher` and `createDecipher` are fixed by Node (deprecated: neither writable nor
 * configurable), so refusing them on `crypto` does not hold, and they made a working Cipher whose
 * native CipherBase took any object as a key (rerun 80a: a plain `{}` to `initiv`, SIGSEGV 2/2).
 * CipherBase's own methods are refused instead: every cipher stops at its first native call.
 */
function refuseCipherHandles(crypto: Exports, refused: Refused): void {
  const cipher = (crypto.createCipheriv as (...a: unknown[]) => object)(
    'aes-128-cbc',
    new Uint8Array(16),
    new Uint8Array(16),
  );
  const handle = Object.getOwnPropertySymbols(cipher)
    .map((s) => (cipher as Record<symbol, unknown>)[s])
    .find((v) => typeof v === 'object' && v !== null && v.constructor?.name === 'CipherBase');
  if (!handle) throw new Error("sandbox: Node's Cipher no longer holds a CipherBase; its methods cannot be refused");
  const base = Object.getPrototypeOf(handle) as object;
  for (const k of Reflect.ownKeys(base))
    Object.defineProperty(base, k, {
      value: refused('crypto ciphers (not open in the sandbox)'),
      writable: false,
      configurable: false,
    });
  Object.freeze(base);
}

/**
 * An asynchronous random or key call hands its native job to the callback as `this` (a setter on
 * RandomBytesJob.prototype's `ondone` wrote into freed memory: rerun 72l); the synchronous forms
 * hand out nothing native.
 */
function keepHashesAndRandom(refused: Refused): void {
  const crypto = builtin('crypto');
  refuseCipherHandles(crypto, refused); // while createCipheriv is Node's
  const syncOnly = (name: string) => {
    const f = crypto[name] as (...a: unknown[]) => unknown;
    const refuse = refused(`crypto.${name} with a callback (only the synchronous form is open in the sandbox)`);
    return (...args: unknown[]) =>
      typeof args[args.length - 1] === 'function' ? refuse() : Reflect.apply(f, crypto, args);
  };
  const kept: Exports = {
    ...oneShotDigests(crypto.hash as OneShot, refused),
    randomBytes: syncOnly('randomBytes'),
    randomInt: syncOnly('randomInt'),
  };
  for (const k of Reflect.ownKeys(crypto)) {
    if (typeof k === 'string' && k in kept)
      Object.defineProperty(crypto, k, { value: kept[k], enumerable: true, writable: false, configurable: false });
    else if (typeof k !== 'string' || !CRYPTO_KEPT.has(k))
      refuseKey(crypto, k, `crypto.${String(k)} (not open in the sandbox)`, refused);
    // The runner looks randomUUID up for each episode's id: a module's replacement, carried to
    // every import by syncBuiltinESMExports, chose them (rerun 84a). What is kept is fixed.
    else if (Object.getOwnPropertyDescriptor(crypto, k)?.configurable)
      Object.defineProperty(crypto, k, { writable: false, configurable: false });
  }
  // WebCrypto's subtle runs native jobs; crypto.subtle (fixed by Node) reads it through this getter.
  const subtle = refusedObject('crypto.subtle (not open in the sandbox)', refused);
  Object.defineProperty(Object.getPrototypeOf(globalThis.crypto) as object, 'subtle', {
    get: () => subtle,
    configurable: false,
  });
}

/** The globals that lead to native handles: refused, but TextDecoder, whose converter is hidden. */
function refuseNativeGlobals(refused: Refused): void {
  for (const name of GLOBALS)
    Object.defineProperty(globalThis, name, {
      value: refused(`${name} (not open in the sandbox)`),
      writable: false,
      configurable: false,
      enumerable: false,
    });
  const buffer = builtin('buffer');
  for (const k of ['Blob', 'File', 'resolveObjectURL'])
    refuseKey(buffer, k, `buffer.${k} (not open in the sandbox)`, refused);
  for (const k of ['createObjectURL', 'revokeObjectURL'])
    refuseKey(URL, k, `URL.${k} (Blobs are not open in the sandbox)`, refused);
  // A consumer that hands back a real Blob (and its class, through `constructor`).
  refuseKey(builtin('stream/consumers'), 'blob', 'stream/consumers.blob (Blobs are not open in the sandbox)', refused);
  // util's transferable signal and controller make a native transferable object of any object the
  // module passes (Node checks it by one symbol the module can copy), and the clone hook structured
  // cloning then looks up through its prototype is the module's own: it named an internal class to
  // build, a real Blob, and through it the real ReadableStream (rerun 72r: freed memory written 4/4).
  const util = builtin('util');
  for (const k of ['transferableAbortSignal', 'transferableAbortController'])
    refuseKey(util, k, `util.${k} (transferring is not open in the sandbox)`, refused);
  // And the ways between Node streams and web streams.
  const { Readable, Writable, Duplex } = builtin('stream') as Record<string, object>;
  for (const [name, cls] of [
    ['Readable', Readable],
    ['Writable', Writable],
    ['Duplex', Duplex],
  ] as const)
    for (const k of ['toWeb', 'fromWeb'])
      refuseKey(cls, k, `stream.${name}.${k} (web streams are not open in the sandbox)`, refused);
  // A non-UTF-8 TextDecoder passes its converter, read from a symbol-keyed field, to native code,
  // which took any native object there as one (rerun 72j): here the decoder is the runner's alone.
  const Real = globalThis.TextDecoder;
  class TextDecoder {
    readonly #real: InstanceType<typeof Real>;
    constructor(label?: string, options?: TextDecoderOptions) {
      this.#real = new Real(label, options);
    }
    get encoding(): string {
      return this.#real.encoding;
    }
    get fatal(): boolean {
      return this.#real.fatal;
    }
    get ignoreBOM(): boolean {
      return this.#real.ignoreBOM;
    }
    decode(input?: AllowSharedBufferSource, options?: TextDecodeOptions): string {
      return this.#real.decode(input, options);
    }
  }
  Object.defineProperty(TextDecoder.prototype, Symbol.toStringTag, { value: 'TextDecoder' });
  Object.defineProperty(globalThis, 'TextDecoder', { value: TextDecoder, writable: true, configurable: true });
  Object.defineProperty(builtin('util'), 'TextDecoder', { value: TextDecoder, writable: false, configurable: false });
}

/**
 * Node's stdout and stderr are sockets (or TTYs) over native handles: the module's are a stream of
 * JavaScript's that hands a copy of each chunk to the runner, which writes it to fd 2. Made before
 * anything has asked for Node's own, so `console` binds to this one.
 */
function replaceStdio(writeStderr: (bytes: Uint8Array) => void): void {
  const { Writable } = builtin('stream') as unknown as typeof import('node:stream');
  // Two streams, as Node has them: ending stdout (a pipeline into it) left stderr and console
  // silent for the rest of the process when they were one (rerun 72n). Destroying one leaves it
  // usable, as Node's own stdio does.
  const make = (fd: number) => {
    const stream = new Writable({
      write(chunk: Uint8Array, _encoding, done) {
        try {
          writeStderr(new Uint8Array(chunk));
          done();
        } catch (err) {
          done(err as Error);
        }
      },
      destroy(err, done) {
        done(err);
        (this as unknown as { _undestroy: () => void })._undestroy();
      },
    });
    return Object.assign(stream, { fd, isTTY: false });
  };
  for (const [k, stream] of [
    ['stdout', make(1)],
    ['stderr', make(2)],
  ] as const)
    Object.defineProperty(process, k, { get: () => stream, configurable: false, enumerable: true });
}
