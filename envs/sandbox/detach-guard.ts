/**
 * Keeps every buffer the module can reach attached. Native calls keep pointers into the buffers
 * they were given (a Buffer method whose offset's `valueOf` runs first, a StringDecoder's state),
 * and a buffer detached meanwhile is freed once its new owner is dropped: rerun 72j sent freed
 * memory down a socket (the real time to 4 ms) and had a file's bytes written into freed memory.
 * The ways JavaScript detaches a buffer are a transfer list (`structuredClone`, here) and what
 * surface.ts refuses whole: message ports, web streams (their byte streams detach what they are
 * given: reruns 72k, 72o, 72q) and the Fetch API.
 */
import type { Refused } from './refusal.js';

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
}
