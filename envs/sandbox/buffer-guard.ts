/**
 * Refuses resizable `ArrayBuffer`s and growable `SharedArrayBuffer`s inside the sandbox. V8
 * reserves each one's `maxByteLength` as a mapping of its own, which no memory limit counts: about
 * 32 000 of them ran out the kernel's map count and V8 died by SIGSEGV, a memory-safety failure
 * module code could reach (rerun 61b). No env needs them; fixed-length buffers are untouched.
 */
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
