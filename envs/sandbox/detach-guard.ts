/**
 * Keeps every buffer the module can reach attached. Native calls keep pointers into the buffers
 * they were given (a Buffer method whose offset's `valueOf` runs first, a StringDecoder's state),
 * and a buffer detached meanwhile is freed once its new owner is dropped: rerun 72j sent freed
 * memory down a socket (the real time to 4 ms) and had a file's bytes written into freed memory.
 * The ways JavaScript detaches a buffer here are a transfer list (`structuredClone`; message ports
 * are refused in surface.ts) and web streams' byte streams: transfer lists are refused, and no byte
 * stream is the module's to reach.
 */

import { builtin, type Refused } from './refusal.js';

const apply = Reflect.apply;

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

  // Web streams' byte streams detach the buffers they are handed, and their controller's state is a
  // plain object under a symbol the module reaches: a pull buffer swapped in there was detached by
  // Node's own enqueue or respond (rerun 72k: any buffer, Blob.stream()'s controller too). So no byte
  // stream is the module's to reach: none of its own, and not Node's (Blobs are refused in
  // surface.ts; the Fetch API's bodies are byte streams, and there is no network to serve them).
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
  // The Proxy forwards everything but construction to the real class, and util.inspect reads the
  // real one's properties with itself as `this`: a getter defined through the Proxy caught it, and
  // with it byte streams again, which freed a buffer under a Buffer method 5/5 (rerun 72o).
  Object.freeze(RealStream);
  for (const name of ['fetch', 'Request', 'Response'])
    Object.defineProperty(globalThis, name, {
      value: refused(`${name} (the Fetch API's bodies are byte streams)`),
      writable: false,
      configurable: false,
    });
  (builtin('module') as { syncBuiltinESMExports: () => void }).syncBuiltinESMExports();
}
