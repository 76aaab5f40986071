/**
 * Keeps every buffer the module can reach attached. Node's native calls keep pointers into the
 * buffers they were given (a queued socket write, an `fs.read` on the thread pool, a socket's
 * `onread` buffer, a Buffer method whose offset's `valueOf` runs first), and a buffer detached
 * meanwhile is freed once its new owner is dropped: rerun 72j sent freed memory down a socket (the
 * real time to 4 ms, in a freed stat result) and had a file's bytes written into freed memory. The
 * ways JavaScript detaches a buffer here are a transfer list (`structuredClone`, `postMessage`) and
 * the byte streams of web streams (an enqueued chunk, a BYOB read, the pull buffers Node's own byte
 * streams fill): transfer lists are refused, an enqueued chunk is copied, and the rest is closed to
 * the module (BYOB reads, `autoAllocateChunkSize`; a file handle's web stream, in child.ts).
 */

type Refused = (what: string) => () => never;

const apply = Reflect.apply;
const builtin = (id: string) =>
  (process as unknown as { getBuiltinModule: (id: string) => Record<string, unknown> }).getBuiltinModule(id);

const typedArrayBytes = {
  buffer: Object.getOwnPropertyDescriptor(Object.getPrototypeOf(Uint8Array.prototype), 'buffer')!.get!,
  offset: Object.getOwnPropertyDescriptor(Object.getPrototypeOf(Uint8Array.prototype), 'byteOffset')!.get!,
  length: Object.getOwnPropertyDescriptor(Object.getPrototypeOf(Uint8Array.prototype), 'byteLength')!.get!,
};
const dataViewBytes = {
  buffer: Object.getOwnPropertyDescriptor(DataView.prototype, 'buffer')!.get!,
  offset: Object.getOwnPropertyDescriptor(DataView.prototype, 'byteOffset')!.get!,
  length: Object.getOwnPropertyDescriptor(DataView.prototype, 'byteLength')!.get!,
};
const slice = Uint8Array.prototype.slice;

/** A copy of a view's bytes, read by the intrinsic getters (a view's own `buffer` could lie). */
function copyOf(view: ArrayBufferView): Uint8Array {
  const g = view instanceof DataView ? dataViewBytes : typedArrayBytes;
  const bytes = new Uint8Array(
    apply(g.buffer, view, []) as ArrayBuffer,
    apply(g.offset, view, []) as number,
    apply(g.length, view, []) as number,
  );
  return apply(slice, bytes, []) as Uint8Array;
}

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

  // Web streams' byte streams detach the buffers they are handed.
  const web = builtin('stream/web') as Record<string, { prototype: Record<string, unknown> }>;
  const RealStream = web.ReadableStream as unknown as new (...a: unknown[]) => object;
  // A byte stream without BYOB reads or autoAllocateChunkSize never holds a pull buffer of its own,
  // so all it detaches is what is enqueued (copied below).
  const autoAllocated = refused('autoAllocateChunkSize in a byte stream');
  const Stream: typeof RealStream = new Proxy(RealStream, {
    construct(target, [source, strategy], newTarget): object {
      // The source read once, and Node given a copy of what it read: a getter could answer twice.
      if (source === undefined || source === null)
        return Reflect.construct(target, [source, strategy], newTarget === Stream ? target : newTarget);
      const s = source as Record<string, unknown>;
      const bytes = `${s.type}` === 'bytes';
      if (bytes && s.autoAllocateChunkSize !== undefined) autoAllocated();
      const bound = (k: string) => {
        const f = s[k];
        return typeof f === 'function' ? (...a: unknown[]) => apply(f, source, a) : f;
      };
      const read = {
        ...(bytes ? { type: 'bytes' } : {}),
        start: bound('start'),
        pull: bound('pull'),
        cancel: bound('cancel'),
      };
      return Reflect.construct(target, [read, strategy], newTarget === Stream ? target : newTarget);
    },
  });
  for (const [obj, key] of [
    [globalThis, 'ReadableStream'],
    [RealStream.prototype, 'constructor'],
    [web, 'ReadableStream'],
  ] as const)
    Object.defineProperty(obj, key, { value: Stream, writable: false, configurable: false, enumerable: false });
  const byob = refused('BYOB reads of a byte stream');
  Object.defineProperty(web.ReadableStreamBYOBReader.prototype, 'read', {
    value: byob,
    writable: false,
    configurable: false,
  });
  const controller = web.ReadableByteStreamController.prototype as Record<
    string,
    (this: unknown, ...a: unknown[]) => unknown
  >;
  const realEnqueue = controller.enqueue;
  Object.defineProperty(controller, 'enqueue', {
    value: function enqueue(this: unknown, chunk: unknown): unknown {
      return apply(realEnqueue, this, [ArrayBuffer.isView(chunk) ? copyOf(chunk) : chunk]);
    },
    writable: false,
    configurable: false,
  });
  (builtin('module') as { syncBuiltinESMExports: () => void }).syncBuiltinESMExports();
}
