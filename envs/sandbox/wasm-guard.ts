/**
 * Refuses shared WebAssembly memories inside the sandbox. A shared memory is the one way to a wasm
 * `memory.atomic.wait32/64`, which blocks for real time (red-team rerun 4: a 300 ms timeout took
 * 300 ms), a ruler of machine speed that the virtual timers cannot reach. No env needs threads.
 * Refused: `new WebAssembly.Memory({ shared: true })`, and binaries that declare or import a
 * shared memory, at every entry that compiles bytes (`Module`, `compile`, `instantiate`,
 * `validate`; the streaming forms are refused outright). The bytes are copied once, scanned and
 * the copy compiled, so nothing can change them between the scan and V8. Modules and instances
 * are counted too, at most MAX_WASM_OBJECTS a process: each takes a mapping of its own.
 */

import { types } from 'node:util';
import { refusal, type Refused } from './refusal.js';

const WASM_MAGIC = [0x00, 0x61, 0x73, 0x6d];
const SECTION_IMPORT = 2;
const SECTION_MEMORY = 5;
// Limits flags: bit 0 = has maximum, bit 1 = shared (threads proposal), bit 2 = 64-bit indices.
const LIMITS_HAS_MAX = 0x01;
const LIMITS_SHARED = 0x02;

class Malformed extends Error {}

/** WebAssembly modules and instances a sandbox process makes, at most; no env needs many. */
const MAX_WASM_OBJECTS = 1000;

/** Why a wasm binary is refused (a shared memory, or a section that cannot be read), else undefined. */
export function sharedMemoryIn(bytes: Uint8Array): string | undefined {
  // Not a wasm binary at all: V8 rejects it with its own CompileError.
  if (bytes.length < 8 || WASM_MAGIC.some((b, i) => bytes[i] !== b)) return undefined;
  let pos = 8;
  const byte = () => {
    if (pos >= bytes.length) throw new Malformed('unexpected end');
    return bytes[pos++];
  };
  const leb = () => {
    let n = 0;
    for (let shift = 0; shift < 70; shift += 7) {
      const b = byte();
      if (shift < 49) n += (b & 0x7f) * 2 ** shift;
      if (!(b & 0x80)) return n;
    }
    throw new Malformed('LEB128 too long');
  };
  const skip = (n: number) => {
    if (n > bytes.length - pos) throw new Malformed('unexpected end');
    pos += n;
  };
  /** Reads limits; true when they are shared. */
  const sharedLimits = () => {
    const flags = leb();
    leb();
    if (flags & LIMITS_HAS_MAX) leb();
    return (flags & LIMITS_SHARED) !== 0;
  };
  const valueType = () => {
    const t = byte();
    // (ref null ht) / (ref ht): a heap type (s33) follows.
    if (t === 0x63 || t === 0x64) leb();
  };
  try {
    while (pos < bytes.length) {
      const id = byte();
      const size = leb();
      if (size > bytes.length - pos) throw new Malformed(`section ${id} runs past the end`);
      const end = pos + size;
      if (id === SECTION_IMPORT) {
        for (let n = leb(); n > 0; n--) {
          skip(leb()); // module name
          skip(leb()); // field name
          const kind = byte();
          if (kind === 0x00) leb();
          else if (kind === 0x01) {
            valueType();
            sharedLimits();
          } else if (kind === 0x02) {
            if (sharedLimits()) return 'the module imports a shared memory';
          } else if (kind === 0x03) {
            valueType();
            byte();
          } else if (kind === 0x04) {
            byte();
            leb();
          } else throw new Malformed(`import kind ${kind}`);
        }
      } else if (id === SECTION_MEMORY) {
        for (let n = leb(); n > 0; n--) if (sharedLimits()) return 'the module declares a shared memory';
      }
      pos = end;
    }
  } catch (e) {
    if (e instanceof Malformed) return `the module's sections cannot be read (${e.message})`;
    throw e;
  }
  return undefined;
}

/** Installs the refusals on the global WebAssembly (the runner calls it before the module loads). */
export function refuseSharedWasmMemory(refused: Refused): void {
  const W = WebAssembly;
  const { Memory, Module, Instance, validate } = W;
  // Intrinsic getters and constructors, taken before any module code can replace them.
  const TypedArray = Object.getPrototypeOf(Uint8Array) as object;
  const viewBuffer = Object.getOwnPropertyDescriptor((TypedArray as { prototype: object }).prototype, 'buffer')!.get!;
  const viewOffset = Object.getOwnPropertyDescriptor(
    (TypedArray as { prototype: object }).prototype,
    'byteOffset',
  )!.get!;
  const viewLength = Object.getOwnPropertyDescriptor(
    (TypedArray as { prototype: object }).prototype,
    'byteLength',
  )!.get!;
  const dvBuffer = Object.getOwnPropertyDescriptor(DataView.prototype, 'buffer')!.get!;
  const dvOffset = Object.getOwnPropertyDescriptor(DataView.prototype, 'byteOffset')!.get!;
  const dvLength = Object.getOwnPropertyDescriptor(DataView.prototype, 'byteLength')!.get!;
  const { isAnyArrayBuffer, isArrayBufferView, isDataView } = types;
  const U8 = Uint8Array;
  const u8Slice = Uint8Array.prototype.slice;
  const apply = Reflect.apply;
  const construct = Reflect.construct;
  // Brand checks, not `instanceof`: a module's `Symbol.hasInstance` answered those (rerun 6).
  const moduleExports = Module.exports;
  const isModule = (x: unknown) => {
    try {
      moduleExports(x as WebAssembly.Module);
      return true;
    } catch {
      return false;
    }
  };

  const deny = (what: string, why: string) =>
    refusal(what, `${why}; shared WebAssembly memories are disabled in the sandbox`);
  // Each module or instance takes a mapping of its own: ~65 000 tiny modules ran out the kernel's
  // map count and V8 died by SIGSEGV (rerun 63b).
  let made = 0;
  const count = (what: string) => {
    if (++made > MAX_WASM_OBJECTS)
      throw refusal(what, `more than ${MAX_WASM_OBJECTS} WebAssembly modules and instances in one process`);
  };
  /** A private copy of the bytes (V8 compiles the copy), or the input itself when it is no buffer. */
  const checked = (what: string, source: unknown): unknown => {
    let copy: Uint8Array;
    if (isArrayBufferView(source)) {
      const dv = isDataView(source);
      const buf = apply(dv ? dvBuffer : viewBuffer, source, []) as ArrayBufferLike;
      const off = apply(dv ? dvOffset : viewOffset, source, []) as number;
      const len = apply(dv ? dvLength : viewLength, source, []) as number;
      copy = apply(u8Slice, new U8(buf, off, len), []) as Uint8Array;
    } else if (isAnyArrayBuffer(source)) {
      copy = apply(u8Slice, new U8(source), []) as Uint8Array;
    } else return source; // V8 throws its own TypeError
    const why = sharedMemoryIn(copy);
    if (why) throw deny(what, why);
    return copy;
  };

  const MemoryGuard: typeof Memory = new Proxy(Memory, {
    construct(target, args: unknown[], newTarget): object {
      // Each field read once, and V8 gets the copy: a getter answered the check `false` and V8 `true` (rerun 6).
      const desc = args[0] as { initial?: unknown; maximum?: unknown; shared?: unknown } | undefined;
      const copy =
        desc && typeof desc === 'object' ? { initial: desc.initial, maximum: desc.maximum, shared: desc.shared } : desc;
      if (copy && typeof copy === 'object' && copy.shared) throw deny('WebAssembly.Memory', 'shared: true');
      return construct(target, [copy], newTarget === MemoryGuard ? target : newTarget);
    },
  });
  const ModuleGuard: typeof Module = new Proxy(Module, {
    construct(target, args: unknown[], newTarget): object {
      count('WebAssembly.Module');
      return construct(
        target,
        [checked('WebAssembly.Module', args[0]), ...args.slice(1)],
        newTarget === ModuleGuard ? target : newTarget,
      );
    },
  });
  const InstanceGuard: typeof Instance = new Proxy(Instance, {
    construct(target, args: unknown[], newTarget): object {
      count('WebAssembly.Instance');
      return construct(target, args, newTarget === InstanceGuard ? target : newTarget);
    },
  });
  const lock = (obj: object, key: string, value: unknown) =>
    Object.defineProperty(obj, key, { value, writable: false, configurable: false, enumerable: false });
  lock(W, 'Memory', MemoryGuard);
  lock(W, 'Module', ModuleGuard);
  lock(W, 'Instance', InstanceGuard);
  // Instances lead back to the constructors through their prototypes.
  lock(Memory.prototype, 'constructor', MemoryGuard);
  lock(Module.prototype, 'constructor', ModuleGuard);
  lock(Instance.prototype, 'constructor', InstanceGuard);
  // The promise forms compile on a background thread and settle when it is done: at this request
  // or a later one by machine speed and by how long the worker paused (red-team rerun 10). They
  // compile here, synchronously, and settle at once.
  lock(W, 'compile', function compileGuard(source: unknown) {
    try {
      count('WebAssembly.compile');
      return Promise.resolve(construct(Module, [checked('WebAssembly.compile', source)]));
    } catch (e) {
      return Promise.reject(e);
    }
  });
  lock(W, 'validate', function validateGuard(source: unknown, ...rest: unknown[]) {
    return apply(validate, W, [checked('WebAssembly.validate', source), ...rest]);
  });
  lock(W, 'instantiate', function instantiateGuard(source: unknown, imports?: unknown) {
    try {
      // A Module was checked when it was compiled; bytes are checked here.
      if (isModule(source)) return Promise.resolve(construct(InstanceGuard, [source, imports]));
      count('WebAssembly.instantiate');
      const module = construct(Module, [checked('WebAssembly.instantiate', source)]) as WebAssembly.Module;
      return Promise.resolve({ module, instance: construct(InstanceGuard, [module, imports]) });
    } catch (e) {
      return Promise.reject(e);
    }
  });
  for (const k of ['compileStreaming', 'instantiateStreaming']) if (k in W) lock(W, k, refused(`WebAssembly.${k}`));
}
