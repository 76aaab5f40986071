/**
 * Node's native bindings trust the state their own JavaScript hands them, and module code reaches
 * that state (a symbol-keyed field, `_handle`, `_http_common`). Rerun 72i forged it:
 * - a StringDecoder's state buffer, whose byte count Node's flush believes: 255 bytes read past a
 *   7-byte one held freed stat results, the real time to ~5 ms and the pause between requests;
 * - an HTTP parser's connections list: any native object passed as one, or a parser closed while
 *   listed, was used after it was not one (SIGSEGV);
 * - a zlib handle's result array and buffers, whose memory native code keeps writing after the
 *   module detached it (8 chosen bytes into freed memory, corrupting the heap).
 * Each guard checks the state once, before the native call, or gives native code memory of the
 * runner's that the module cannot reach.
 */

type Refused = (what: string) => () => never;
type Method = (this: unknown, ...args: unknown[]) => unknown;

const apply = Reflect.apply;
const builtin = (id: string) =>
  (process as unknown as { getBuiltinModule: (id: string) => Record<string, unknown> }).getBuiltinModule(id);

/** Replaces `proto[name]` with `wrap(original)`, fixed. */
function wrapMethod(proto: object, name: string, wrap: (original: Method) => Method): void {
  const original = (proto as Record<string, Method>)[name];
  Object.defineProperty(proto, name, { value: wrap(original), writable: false, configurable: false });
}

export function guardNativeState(refused: Refused): void {
  guardStringDecoder(refused);
  guardHttpParser(refused);
  guardZlib(refused);
}

const viewBuffer = Object.getOwnPropertyDescriptor(Object.getPrototypeOf(Uint8Array.prototype), 'buffer')!.get!;
const viewOffset = Object.getOwnPropertyDescriptor(Object.getPrototypeOf(Uint8Array.prototype), 'byteOffset')!.get!;
const viewLength = Object.getOwnPropertyDescriptor(Object.getPrototypeOf(Uint8Array.prototype), 'byteLength')!.get!;
const dataViewBuffer = Object.getOwnPropertyDescriptor(DataView.prototype, 'buffer')!.get!;
const dataViewOffset = Object.getOwnPropertyDescriptor(DataView.prototype, 'byteOffset')!.get!;
const dataViewLength = Object.getOwnPropertyDescriptor(DataView.prototype, 'byteLength')!.get!;

/** The state's layout (src/string_decoder.h): 4 bytes of an incomplete character, then these. */
const MISSING_BYTES = 4;
const BUFFERED_BYTES = 5;
const ENCODING_FIELD = 6;
const STATE_FIELDS = 7;
const INCOMPLETE_CHARACTER_BYTES = 4;

function guardStringDecoder(refused: Refused): void {
  const { StringDecoder } = builtin('string_decoder') as { StringDecoder: new (encoding: string) => object };
  const state = Object.getOwnPropertySymbols(new StringDecoder('utf8')).find((s) => s.description === 'kNativeDecoder');
  if (!state) throw new Error('sandbox runner: no StringDecoder state found in this Node');
  const encodings = new Set(
    ['ascii', 'utf8', 'base64', 'base64url', 'utf16le', 'hex', 'latin1'].map(
      (e) => (new StringDecoder(e) as Record<symbol, Uint8Array>)[state][ENCODING_FIELD],
    ),
  );
  const isUint8Array = (builtin('util').types as { isUint8Array: (v: unknown) => v is Uint8Array }).isUint8Array;
  const changed: () => never = refused('a StringDecoder whose state was changed');
  const set = Uint8Array.prototype.set;
  // The state read once and checked, and Node's method run on a copy only the runner holds, copied
  // back after: a getter on the decoder could answer the check and the native call apart, and
  // \`text\` calls the module's \`buf.slice\` between them (rerun 72j: the byte count set there had the
  // native decoder write 193 chosen bytes past the state).
  const decoding = (decoder: unknown, method: Method, args: unknown[]) => {
    const s = (decoder as Record<symbol, unknown>)[state];
    if (
      !isUint8Array(s) ||
      (apply(viewLength, s, []) as number) < STATE_FIELDS ||
      s[MISSING_BYTES] + s[BUFFERED_BYTES] > INCOMPLETE_CHARACTER_BYTES ||
      !encodings.has(s[ENCODING_FIELD])
    )
      changed();
    const own = new Uint8Array(STATE_FIELDS);
    for (let i = 0; i < STATE_FIELDS; i++) own[i] = s[i];
    const holder: Record<string | symbol, unknown> = { __proto__: null, [state]: own };
    holder.write = (buf: unknown) => apply(write, holder, [buf]);
    try {
      return apply(method, holder, args);
    } finally {
      try {
        apply(set, s, [own]);
      } catch {
        // detached by the module meanwhile: nothing to copy back to
      }
    }
  };
  const proto = StringDecoder.prototype;
  const write = (proto as Record<string, Method>).write;
  for (const name of ['write', 'end', 'text'])
    wrapMethod(
      proto,
      name,
      (original) =>
        function guardedDecode(this: unknown, ...args: unknown[]) {
          return decoding(this, original, args);
        },
    );
}

function guardHttpParser(refused: Refused): void {
  const { HTTPParser } = builtin('_http_common') as { HTTPParser: { prototype: object } };
  const probe = new (builtin('http').Server as new () => NodeJS.EventEmitter)();
  probe.emit('listening'); // creates its connections list (and a check interval, cleared below)
  const field = (d: string) =>
    (probe as unknown as Record<symbol, unknown>)[
      Object.getOwnPropertySymbols(probe).find((s) => s.description === d)!
    ];
  const all = (Object.getPrototypeOf(field('http.server.connections')) as { all: Method }).all;
  clearInterval(field('http.server.connectionsCheckingInterval') as NodeJS.Timeout);
  const proto = HTTPParser.prototype as Record<string, Method>;
  const remove = proto.remove;
  // The list each parser is in, and each list's parsers: native code holds raw pointers both ways,
  // so each keeps the other alive, and a parser leaves its list before it is re-initialized or freed.
  const listOf = new WeakMap<object, object>();
  const members = new WeakMap<object, Set<object>>();
  // Native parsing runs the module's callbacks (headers, body) with the parser mid-call: closing or
  // re-initializing it there freed what the call went on to use (rerun 72j: close from its own
  // headers callback, SIGSEGV 3/3). Node's own code defers those, and never parses re-entrantly.
  const parsing = new WeakSet<object>();
  const busy = refused('an HTTP parser closed, re-initialized or run again while it parses');
  const idle = (parser: unknown) => {
    if (parsing.has(parser as object)) busy();
  };
  const unlist = (parser: object) => {
    const list = listOf.get(parser);
    if (!list) return;
    apply(remove, parser, []);
    members.get(list)?.delete(parser);
    listOf.delete(parser);
  };
  wrapMethod(
    proto,
    'initialize',
    (initialize) =>
      function guardedInitialize(this: unknown, ...args: unknown[]) {
        idle(this);
        const list = args[4];
        // Anything but a real connections list throws here ("Illegal invocation"), before native
        // code takes it for one.
        if (list !== undefined && list !== null) apply(all, list, []);
        unlist(this as object);
        const done = apply(initialize, this, args);
        if (list !== undefined && list !== null) {
          listOf.set(this as object, list as object);
          if (!members.has(list as object)) members.set(list as object, new Set());
          members.get(list as object)!.add(this as object);
        }
        return done;
      },
  );
  wrapMethod(
    proto,
    'close',
    (close) =>
      function guardedClose(this: unknown) {
        idle(this);
        unlist(this as object);
        return apply(close, this, []);
      },
  );
  // Parsing straight off a stream took the stream's native object from its argument unchecked (a
  // zlib handle: SIGSEGV); Node's server then feeds the parser from JavaScript, as for any socket.
  wrapMethod(proto, 'consume', () => function notConsumed() {});
  // Native parsing holds pointers into its input across the module's callbacks (headers, body), which
  // could detach it: it parses a copy only the runner holds.
  const copy = Uint8Array.prototype.slice;
  const isView = ArrayBuffer.isView;
  const parse = (parser: unknown, method: Method, args: unknown[]) => {
    idle(parser);
    parsing.add(parser as object);
    try {
      return apply(method, parser, args);
    } finally {
      parsing.delete(parser as object);
    }
  };
  wrapMethod(
    proto,
    'execute',
    (execute) =>
      function guardedExecute(this: unknown, data: unknown) {
        return parse(this, execute, [isView(data) ? apply(copy, viewBytes(data), []) : data]);
      },
  );
  wrapMethod(
    proto,
    'finish',
    (finish) =>
      function guardedFinish(this: unknown) {
        return parse(this, finish, []);
      },
  );
}

/** A view's bytes as a Uint8Array over the same memory, read by the intrinsic getters. */
function viewBytes(view: ArrayBufferView): Uint8Array {
  const dv = view instanceof DataView;
  return new Uint8Array(
    apply(dv ? dataViewBuffer : viewBuffer, view, []) as ArrayBuffer,
    apply(dv ? dataViewOffset : viewOffset, view, []) as number,
    apply(dv ? dataViewLength : viewLength, view, []) as number,
  );
}

/** What a zlib handle's native side writes to, all of it the runner's. */
interface ZlibMemory {
  /** Where native code writes avail_out and avail_in (the module's array gets a copy). */
  own: Uint32Array;
  shown: unknown;
  /** The last call's input and output, which the native stream still points into between calls. */
  input?: Uint8Array | null;
  output?: Uint8Array;
  /** Where the last asynchronous write's output goes once it is done. */
  pending?: { out: Uint8Array; at: number; length: number };
}

function guardZlib(refused: Refused): void {
  const zlib = builtin('zlib') as Record<string, () => { _handle: object; close: () => void }>;
  const again = refused('initializing a zlib handle twice');
  const set = Uint8Array.prototype.set;
  const subarray = Uint8Array.prototype.subarray;
  const isView = ArrayBuffer.isView;
  // Deflate and friends take (…, writeState, callback, dictionary) at 4; Brotli's decoder at 1 (its
  // encoder's init is refused outright, above).
  for (const [create, at] of [
    ['createDeflate', 4],
    ['createBrotliDecompress', 1],
  ] as const) {
    const stream = zlib[create]();
    const proto = Object.getPrototypeOf(stream._handle) as Record<string, Method>;
    stream.close();
    const memory = new WeakMap<object, ZlibMemory>();
    const show = (m: ZlibMemory) => {
      const shown = m.shown as Record<number, number>;
      shown[0] = m.own[0];
      shown[1] = m.own[1];
    };
    wrapMethod(
      proto,
      'init',
      (init) =>
        function guardedInit(this: unknown, ...args: unknown[]) {
          if (memory.has(this as object)) again();
          const m: ZlibMemory = { own: new Uint32Array(2), shown: args[at] };
          const callback = args[at + 1];
          args[at] = m.own;
          if (typeof callback === 'function')
            args[at + 1] = function written(this: unknown, ...rest: unknown[]) {
              finish(m);
              return apply(callback, this, rest);
            };
          memory.set(this as object, m);
          return apply(init, this, args);
        },
    );
    /** Copies what the native call wrote back to the module's memory, as far as it is still there. */
    const finish = (m: ZlibMemory) => {
      show(m);
      const p = m.pending;
      m.pending = undefined;
      if (!p || !m.output) return;
      const produced = p.length - m.own[0];
      let out: Uint8Array;
      try {
        out = viewBytes(p.out);
      } catch {
        return; // detached by the module meanwhile
      }
      if (produced > 0 && p.at + produced <= out.length)
        apply(set, out, [apply(subarray, m.output, [0, produced]), p.at]);
    };
    // (flush, in, in_off, in_len, out, out_off, out_len): native code gets copies it alone points into.
    const prepare = (self: unknown, args: unknown[]) => {
      const m = memory.get(self as object);
      const [flush, input, inOff, inLen, out, outOff, outLen] = args;
      if (!m || !isView(out) || (input !== null && !isView(input))) return args;
      const inBytes = input === null ? null : viewBytes(input as ArrayBufferView);
      const from = Number(inOff);
      const count = Number(inLen);
      const to = Number(outOff);
      const room = Number(outLen);
      if (inBytes && !(from >= 0 && count >= 0 && from + count <= inBytes.length))
        throw new RangeError('zlib: input range outside its buffer');
      if (!(to >= 0 && room >= 0 && to + room <= viewBytes(out as ArrayBufferView).length))
        throw new RangeError('zlib: output range outside its buffer');
      m.input = inBytes && inBytes.slice(from, from + count);
      m.output = new Uint8Array(room);
      m.pending = { out: out as Uint8Array, at: to, length: room };
      return [flush, m.input, 0, count, m.output, 0, room];
    };
    wrapMethod(
      proto,
      'writeSync',
      (writeSync) =>
        function guardedWriteSync(this: unknown, ...args: unknown[]) {
          const done = apply(writeSync, this, prepare(this, args));
          const m = memory.get(this as object);
          if (m) finish(m);
          return done;
        },
    );
    wrapMethod(
      proto,
      'write',
      (write) =>
        function guardedWrite(this: unknown, ...args: unknown[]) {
          return apply(write, this, prepare(this, args));
        },
    );
  }
}
