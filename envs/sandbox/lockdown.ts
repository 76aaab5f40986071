/**
 * Freezes JavaScript's own built-ins inside the sandbox once the runner has installed its
 * wrappers, so that module code can change none of them (red-team rerun 6). The runner's wrappers
 * and Node's own library call `Reflect.construct`, `Function.prototype.apply`, `Array.prototype.map`,
 * `instanceof`, a promise's `constructor` and a resolved value's `then`, … when they run: a module
 * that replaced one of them for a moment was handed the real `Date`, the real file times, the
 * host's CPU times, or bytes past the shared-memory scan. A getter for a missing Proxy trap or for
 * `then` on `Object.prototype` did the same. Frozen here: the ECMAScript intrinsics, `Intl` and
 * `WebAssembly`, everything reachable from them by properties and prototypes, and their bindings on
 * the global object (the global object itself stays open for the module's own names).
 *
 * Freezing makes a prototype's data properties read-only, and an assignment to a property of the
 * same name on an object that inherits it then fails (ES5's "override mistake": `err.name = 'X'`,
 * `Foo.prototype.constructor = Foo`). So the string-keyed data properties of the prototypes become
 * accessors first: the getter returns the value, and the setter defines an own property on the
 * object assigned to (the prototype itself stays read-only). This is the scheme of SES's lockdown
 * and of Node's `--frozen-intrinsics`, which runs too early for the runner's own changes.
 */

const ECMASCRIPT_GLOBALS = [
  'Object', 'Function', 'Array', 'Number', 'Boolean', 'String', 'Symbol', 'BigInt', 'Date',
  'Promise', 'RegExp', 'Proxy', 'Reflect', 'JSON', 'Math', 'Atomics', 'Intl', 'WebAssembly',
  'Error', 'AggregateError', 'EvalError', 'RangeError', 'ReferenceError', 'SyntaxError',
  'TypeError', 'URIError', 'ArrayBuffer', 'SharedArrayBuffer', 'DataView', 'Int8Array',
  'Uint8Array', 'Uint8ClampedArray', 'Int16Array', 'Uint16Array', 'Int32Array', 'Uint32Array',
  'Float32Array', 'Float64Array', 'BigInt64Array', 'BigUint64Array', 'Map', 'Set', 'WeakMap',
  'WeakSet', 'WeakRef', 'FinalizationRegistry', 'eval', 'isFinite', 'isNaN', 'parseFloat',
  'parseInt', 'decodeURI', 'decodeURIComponent', 'encodeURI', 'encodeURIComponent', 'escape',
  'unescape', 'globalThis',
] as const; // prettier-ignore

/** Intrinsics not reachable from a global by properties (iterator, generator and async prototypes). */
function hiddenIntrinsics(): object[] {
  const proto = Object.getPrototypeOf;
  const asyncGenerator = proto(async function* () {}) as object;
  return [
    proto([][Symbol.iterator]()) as object,
    proto(new Map()[Symbol.iterator]()) as object,
    proto(new Set()[Symbol.iterator]()) as object,
    proto(''[Symbol.iterator]()) as object,
    proto(/e/[Symbol.matchAll]('')) as object,
    proto(function* () {}) as object,
    asyncGenerator,
    proto(proto(proto((async function* () {})()))) as object, // %AsyncIteratorPrototype%
    proto(async function () {}) as object,
    proto(new Intl.Segmenter().segment('')) as object, // %SegmentsPrototype%
    proto(new Intl.Segmenter().segment('')[Symbol.iterator]()) as object, // %SegmentIteratorPrototype%
    proto(Int8Array) as object, // %TypedArray%
    Object.getOwnPropertyDescriptor(Function.prototype, 'caller')!.get!, // %ThrowTypeError%
  ];
}

const isObject = (v: unknown): v is object => (typeof v === 'object' && v !== null) || typeof v === 'function';

/** Turns a prototype's string-keyed data properties into accessors that let derived objects override them. */
function enableOverrides(proto: object): void {
  for (const key of Object.getOwnPropertyNames(proto)) {
    const desc = Object.getOwnPropertyDescriptor(proto, key)!;
    // `constructor` stays a data property: util.inspect names an object by its value (an accessor made
    // every array print as `Object(n)` and an uncaught error as `{}`).
    if (!('value' in desc) || !desc.configurable || key === 'constructor') continue;
    const value: unknown = desc.value;
    Object.defineProperty(proto, key, {
      get: () => value,
      set(this: object, v: unknown) {
        if (this === proto) throw new TypeError(`Cannot assign to read only property '${key}' of a frozen built-in`);
        Object.defineProperty(this, key, { value: v, writable: true, enumerable: true, configurable: true });
      },
      enumerable: desc.enumerable,
      configurable: false,
    });
  }
}

/** Every object reachable from `roots` by own properties (values, getters, setters) and prototypes. */
function reachable(roots: object[], stop: object): Set<object> {
  const seen = new Set<object>();
  const queue = [...roots];
  for (let i = 0; i < queue.length; i++) {
    const o = queue[i];
    if (seen.has(o) || o === stop) continue;
    seen.add(o);
    queue.push(...[Object.getPrototypeOf(o) as unknown].filter(isObject));
    for (const key of Reflect.ownKeys(o)) {
      const d = Object.getOwnPropertyDescriptor(o, key)!;
      for (const v of [d.value, d.get, d.set] as unknown[]) if (isObject(v) && !seen.has(v)) queue.push(v);
    }
  }
  return seen;
}

/** Freezes the intrinsics, everything reachable from them, and their global bindings. */
export function lockIntrinsics(): void {
  const g = globalThis as Record<string, unknown>;
  const roots = [...ECMASCRIPT_GLOBALS.map((k) => g[k]), ...hiddenIntrinsics()].filter(isObject);
  // Objects others inherit from: every reachable function's `prototype`, and the hidden prototypes.
  const inherited = new Set<object>(hiddenIntrinsics().filter((o) => typeof o === 'object'));
  const all = reachable(roots, g); // before the overrides hide the values behind getters
  for (const o of all) {
    const p = typeof o === 'function' ? Object.getOwnPropertyDescriptor(o, 'prototype')?.value : undefined;
    if (isObject(p)) inherited.add(p);
  }
  for (const p of inherited) enableOverrides(p);
  for (const o of reachable(roots, g)) all.add(o); // and the accessors the overrides added
  for (const o of all) Object.freeze(o);
  for (const k of ECMASCRIPT_GLOBALS)
    Object.defineProperty(globalThis, k, { value: g[k], writable: false, configurable: false, enumerable: false });
}
