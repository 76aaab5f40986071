/**
 * Refuses resizable `ArrayBuffer`s and growable `SharedArrayBuffer`s inside the sandbox. V8
 * reserves each one's `maxByteLength` as a mapping of its own, which no memory limit counts: about
 * 32 000 of them ran out the kernel's map count and V8 died by SIGSEGV, a memory-safety failure
 * module code could reach (rerun 61b). No env needs them; fixed-length buffers are untouched.
 */
import { types } from 'node:util';
import type { Refused } from './refusal.js';

export function refuseResizableBuffers(refused: Refused): void {
  const construct = Reflect.construct;
  const guard = <T extends ArrayBufferConstructor | SharedArrayBufferConstructor>(B: T, name: string): T => {
    const deny = refused(`${name} with maxByteLength`);
    const proxy: T = new Proxy(B, {
      construct(target, args: unknown[], newTarget): object {
        // The option read once, and V8 gets none: a getter could answer the check and V8 apart.
        const opts = args[1];
        if (
          opts !== null &&
          typeof opts === 'object' &&
          (opts as { maxByteLength?: unknown }).maxByteLength !== undefined
        )
          deny();
        return construct(target, [args[0]], newTarget === proxy ? target : newTarget);
      },
    });
    // Instances lead back to the constructor through their prototype.
    for (const [obj, key] of [
      [globalThis, name],
      [B.prototype, 'constructor'],
    ] as const)
      Object.defineProperty(obj, key, { value: proxy, writable: false, configurable: false, enumerable: false });
    return proxy;
  };
  guard(ArrayBuffer, 'ArrayBuffer');
  guard(SharedArrayBuffer, 'SharedArrayBuffer');
}

/**
 * `Buffer.prototype.compare` checks `targetEnd` against `target.length`, a property the module can
 * shadow on its own Uint8Array, and the native compare bounds only the source: memcmp read the heap
 * past the target, a byte at a time through the result's sign (rerun 72u). A getter there ran after
 * any check of ours, too, and could detach the target first (its wasm memory grown: memcmp of a NULL
 * view, rerun 72y). Node is given fresh views over the same bytes instead, made with the typed-array
 * getters an instance cannot shadow: it checks the ends against their real lengths, and no code of
 * the module's runs in between.
 */
export function compareWithinRealLengths(): void {
  const nodeCompare = Buffer.prototype.compare;
  const View = Uint8Array;
  const getter = (name: string) => Object.getOwnPropertyDescriptor(Object.getPrototypeOf(View.prototype), name)!.get!;
  const [bufferOf, offsetOf, lengthOf] = ['buffer', 'byteOffset', 'length'].map(getter);
  const fresh = (view: Uint8Array) =>
    new View(Reflect.apply(bufferOf, view, []), Reflect.apply(offsetOf, view, []), Reflect.apply(lengthOf, view, []));
  const { isUint8Array } = types;
  Object.defineProperty(Buffer.prototype, 'compare', {
    value: function compare(this: unknown, ...args: unknown[]): unknown {
      const target = args[0];
      // One argument compares whole views natively; a target Node refuses itself.
      if (args.length < 2 || !isUint8Array(target)) return Reflect.apply(nodeCompare, this, args);
      // Node takes any view as the source, and bounds its end by the same claimable length (rerun 72w).
      if (!isUint8Array(this))
        throw Object.assign(new TypeError('Value of "this" must be of type Buffer or Uint8Array'), {
          code: 'ERR_INVALID_THIS',
        });
      args[0] = fresh(target);
      return Reflect.apply(nodeCompare, fresh(this), args);
    },
  });
}
