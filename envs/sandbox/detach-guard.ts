/**
 * Keeps every buffer the module can reach attached. Node's native calls keep pointers into the
 * buffers they were given (a queued socket write, an `fs.read` on the thread pool, a socket's
 * `onread` buffer, a Buffer method whose offset's `valueOf` runs first), and a buffer detached
 * meanwhile is freed once its new owner is dropped: rerun 72j sent freed memory down a socket (the
 * real time to 4 ms, in a freed stat result) and had a file's bytes written into freed memory. The
 * ways JavaScript detaches a buffer here are a transfer list (`structuredClone`, `postMessage`) and
 * web streams' byte streams: transfer lists are refused, and no byte stream is the module's to reach
 * (a file handle's web stream is refused in child.ts).
 */

type Refused = (what: string) => () => never;

const apply = Reflect.apply;
const builtin = (id: string) =>
  (process as unknown as { getBuiltinModule: (id: string) => Record<string, unknown> }).getBuiltinModule(id);

export function keepBuffersAttached(refused: Refused): void {
  const transfer = refused('transferring buffers (a transfer list)');
  const hasTransfer = (list: unknown) =>
    list !== undefined && list !== null && !(Array.isArray(list) && list.length === 0);
  const clone = globalThis.structuredClone;
  Object.defineProperty(globalThis, 'structuredClone', {
    value: function structuredClone(value: unknown, options?: { transfer?: unknown }) {
      if (options !== undefined && options !== null && hasTransfer(options.transfer)) transfer();
      return clone(value);
    },
    writable: false,
    configurable: false,
  });
  const { port1, port2 } = new MessageChannel();
  const portProto = Object.getPrototypeOf(port1) as { postMessage: (this: unknown, ...a: unknown[]) => void };
  port1.close();
  port2.close();
  const post = portProto.postMessage;
  Object.defineProperty(portProto, 'postMessage', {
    value: function postMessage(this: unknown, value: unknown, options?: unknown) {
      const list =
        options !== null && typeof options === 'object' && !Array.isArray(options)
          ? (options as { transfer?: unknown }).transfer
          : options;
      if (hasTransfer(list)) transfer();
      return apply(post, this, [value]);
    },
    writable: false,
    configurable: false,
  });

  // Web streams' byte streams detach the buffers they are handed, and their controller's state is a
  // plain object under a symbol the module reaches: a pull buffer swapped in there was detached by
  // Node's own enqueue or respond (rerun 72k: any buffer, Blob.stream()'s controller too). So no byte
  // stream is the module's to reach: none of its own, and not Node's (a Blob's stream; the Fetch
  // API's bodies, whose streams are byte streams, and which have no network to serve here anyway).
  const web = builtin('stream/web') as Record<string, { prototype: Record<string, unknown> }>;
  const RealStream = web.ReadableStream as unknown as new (...a: unknown[]) => object;
  const byteStream = refused('byte streams (ReadableStream of type "bytes")');
  const Stream: typeof RealStream = new Proxy(RealStream, {
    construct(target, [source, strategy], newTarget): object {
      // The source read once, and Node given a copy of what it read: a getter could answer twice.
      if (source === undefined || source === null)
        return Reflect.construct(target, [source, strategy], newTarget === Stream ? target : newTarget);
      const s = source as Record<string, unknown>;
      if (`${s.type}` === 'bytes') byteStream();
      const bound = (k: string) => {
        const f = s[k];
        return typeof f === 'function' ? (...a: unknown[]) => apply(f, source, a) : f;
      };
      const read = { start: bound('start'), pull: bound('pull'), cancel: bound('cancel') };
      return Reflect.construct(target, [read, strategy], newTarget === Stream ? target : newTarget);
    },
  });
  for (const [obj, key] of [
    [globalThis, 'ReadableStream'],
    [RealStream.prototype, 'constructor'],
    [web, 'ReadableStream'],
  ] as const)
    Object.defineProperty(obj, key, { value: Stream, writable: false, configurable: false, enumerable: false });
  Object.defineProperty(Blob.prototype, 'stream', {
    value: refused('Blob.stream (a byte stream)'),
    writable: false,
    configurable: false,
  });
  for (const name of ['fetch', 'Request', 'Response'])
    Object.defineProperty(globalThis, name, {
      value: refused(`${name} (the Fetch API's bodies are byte streams)`),
      writable: false,
      configurable: false,
    });
  (builtin('module') as { syncBuiltinESMExports: () => void }).syncBuiltinESMExports();
}
