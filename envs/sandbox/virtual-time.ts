import timers from 'node:timers';
import timersPromises from 'node:timers/promises';
import { promisify } from 'node:util';
import { refusal } from './refusal.js';

/**
 * Virtual timers for the sandbox's child runner (issue 13, "time inside one process"). With every
 * clock frozen, real time still reached a module through its timers: how often a `setInterval`
 * fired, or whether a `setTimeout` set in one request had fired by the next, measures how long the
 * process has lived, and the worker's idle gaps (a gradient step, a slow policy) are where training
 * differs from validation. Here a timer's time is a counter that moves only while a request is
 * being answered and the module is otherwise idle: then the earliest timer fires (deadline order,
 * ties in order of creation) and the counter jumps to its deadline. A `setTimeout(f, 1000)` that a
 * tool awaits fires as soon as the tool has nothing else to do; one that nothing awaits waits for
 * the next request that idles. So what a module sees of its timers is a function of the requests
 * it was sent, as validation sent them, never of the wall clock. (Between requests the worker
 * stops the process outright; see process.ts `freeze`.)
 */

const TIMEOUT_MAX = 2 ** 31 - 1;
/** Atomics.waitAsync waiters pending at once in a process; honest env code has next to none. */
const MAX_PENDING_WAITERS = 10_000;

interface Entry {
  id: number;
  at: number;
  seq: number;
  fn: (...args: unknown[]) => void;
  args: unknown[];
  /** Interval period, or undefined for a one-shot timer / immediate. */
  repeat?: number;
  delay: number;
  ref: boolean;
  live: boolean;
}

function invalidCallback(fn: unknown): TypeError {
  return Object.assign(new TypeError(`The "callback" argument must be of type function. Received ${typeof fn}`), {
    code: 'ERR_INVALID_ARG_TYPE',
  });
}

function abortError(signal: AbortSignal): Error {
  return Object.assign(new Error('The operation was aborted'), {
    name: 'AbortError',
    code: 'ABORT_ERR',
    cause: signal.reason,
  });
}

/** Node's coercion: anything outside [1, 2^31 − 1] (NaN included) becomes 1 ms. */
function coerceDelay(ms: unknown): number {
  const after = Number(ms);
  return after >= 1 && after <= TIMEOUT_MAX ? after : 1;
}

export interface VirtualClock {
  /** Milliseconds of virtual time since the process started. */
  readonly now: number;
  /** Timers waiting to fire. */
  readonly size: number;
  /** Fires the earliest timer (advancing the clock to its deadline); false when none is queued. */
  fireNext(): boolean;
  /** Fires the earliest timer if it is due within `withinMs` of now. */
  fireDue(withinMs: number): boolean;
  /** Called whenever a timer is queued, so the runner can start pumping. */
  onSchedule?: () => void;
}

export function installVirtualTimers(): VirtualClock {
  const queue: Entry[] = []; // sorted by (at, seq)
  const byId = new Map<number, Entry>();
  let now = 0;
  let seq = 0;
  let nextId = 1;

  const insert = (e: Entry) => {
    let lo = 0;
    let hi = queue.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      const q = queue[mid];
      if (q.at < e.at || (q.at === e.at && q.seq < e.seq)) lo = mid + 1;
      else hi = mid;
    }
    queue.splice(lo, 0, e);
    byId.set(e.id, e);
    clock.onSchedule?.();
  };
  const remove = (e: Entry) => {
    e.live = false;
    byId.delete(e.id);
    const i = queue.indexOf(e);
    if (i >= 0) queue.splice(i, 1);
  };
  const schedule = (e: Entry, delay: number) => {
    e.at = now + delay;
    e.seq = seq++;
    e.live = true;
    insert(e);
  };
  const fire = (): boolean => {
    const e = queue.shift();
    if (!e) return false;
    now = Math.max(now, e.at);
    if (e.repeat !== undefined) schedule(e, e.repeat);
    else {
      e.live = false;
      byId.delete(e.id);
    }
    e.fn(...e.args);
    return true;
  };

  // Shaped like Node's Immediate and Timeout (ref/unref/hasRef/refresh/close, a numeric id that
  // clearTimeout accepts), without `_idleStart` and the other fields that carried the real loop
  // time. The entry is looked up in `handles`, so the module cannot reach or edit it.
  const handles = new WeakMap<object, Entry>();
  const entry = (h: object) => handles.get(h)!;
  class Immediate {
    ref() {
      entry(this).ref = true;
      return this;
    }
    unref() {
      entry(this).ref = false;
      return this;
    }
    hasRef() {
      return entry(this).ref;
    }
    [Symbol.dispose]() {
      remove(entry(this));
    }
  }
  class Timeout extends Immediate {
    refresh() {
      const e = entry(this);
      if (e.live) {
        remove(e);
        schedule(e, e.delay);
      }
      return this;
    }
    close() {
      remove(entry(this));
      return this;
    }
    [Symbol.toPrimitive]() {
      return entry(this).id;
    }
  }
  const make = (fn: unknown, args: unknown[], delay: number, repeat: boolean, immediate = false) => {
    if (typeof fn !== 'function') throw invalidCallback(fn);
    const e: Entry = {
      id: nextId++,
      at: 0,
      seq: 0,
      fn: fn as Entry['fn'],
      args,
      delay,
      repeat: repeat ? delay : undefined,
      ref: true,
      live: true,
    };
    schedule(e, delay);
    const h = immediate ? new Immediate() : new Timeout();
    handles.set(h, e);
    return h;
  };
  const clear = (h: unknown) => {
    if (h === null || h === undefined) return;
    const e = typeof h === 'object' ? handles.get(h) : byId.get(Number(h));
    if (e) remove(e);
  };

  const setTimeout = (fn: unknown, ms?: unknown, ...args: unknown[]) => make(fn, args, coerceDelay(ms), false);
  const setInterval = (fn: unknown, ms?: unknown, ...args: unknown[]) => make(fn, args, coerceDelay(ms), true);
  const setImmediate = (fn: unknown, ...args: unknown[]) => make(fn, args, 0, false, true);

  // node:timers/promises, over the same queue.
  const sleep = <T>(delay: number, value: T, opts: { signal?: AbortSignal } = {}, immediate = false) =>
    new Promise<T>((resolve, reject) => {
      const signal = opts?.signal;
      if (signal?.aborted) return reject(abortError(signal));
      const h = make(
        () => {
          signal?.removeEventListener('abort', onAbort);
          resolve(value);
        },
        [],
        delay,
        false,
        immediate,
      );
      const onAbort = () => {
        clear(h);
        reject(abortError(signal!));
      };
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  const pTimeout = <T>(ms?: number, value?: T, opts?: { signal?: AbortSignal }) =>
    sleep(coerceDelay(ms), value as T, opts);
  const pImmediate = <T>(value?: T, opts?: { signal?: AbortSignal }) => sleep(0, value as T, opts, true);
  async function* pInterval<T>(ms?: number, value?: T, opts: { signal?: AbortSignal } = {}) {
    const signal = opts?.signal;
    if (signal?.aborted) throw abortError(signal);
    let ticks = 0;
    let wake: (() => void) | undefined;
    const h = setInterval(() => {
      ticks++;
      wake?.();
    }, ms);
    const onAbort = () => wake?.();
    signal?.addEventListener('abort', onAbort);
    try {
      for (;;) {
        if (!ticks) await new Promise<void>((r) => (wake = r));
        wake = undefined;
        if (signal?.aborted) throw abortError(signal);
        for (; ticks > 0; ticks--) yield value as T;
      }
    } finally {
      clear(h);
      signal?.removeEventListener('abort', onAbort);
    }
  }
  const scheduler = {
    wait: (ms: number, opts?: { signal?: AbortSignal }) => pTimeout(ms, undefined, opts),
    yield: () => pImmediate(),
  };
  Object.defineProperty(setTimeout, promisify.custom, { value: pTimeout });
  Object.defineProperty(setImmediate, promisify.custom, { value: pImmediate });

  const g = globalThis as Record<string, unknown>;
  const t = timers as unknown as Record<string, unknown>;
  for (const [k, v] of Object.entries({
    setTimeout,
    setInterval,
    setImmediate,
    clearTimeout: clear,
    clearInterval: clear,
    clearImmediate: clear,
  })) {
    g[k] = v;
    t[k] = v;
  }
  Object.assign(timersPromises, { setTimeout: pTimeout, setImmediate: pImmediate, setInterval: pInterval, scheduler });

  // AbortSignal.timeout's timer is Node-internal (real time); this one is virtual.
  Object.defineProperty(AbortSignal, 'timeout', {
    value: (ms: number) => {
      if (typeof ms !== 'number' || !(ms >= 0) || ms > 2 ** 32 - 1 || !Number.isInteger(ms))
        throw Object.assign(new RangeError(`The value of "delay" is out of range. Received ${String(ms)}`), {
          code: 'ERR_OUT_OF_RANGE',
        });
      const ac = new AbortController();
      setTimeout(() => ac.abort(new DOMException('The operation was aborted due to timeout', 'TimeoutError')), ms);
      return ac.signal;
    },
  });

  // Atomics.wait/waitAsync with a timeout sleep in real time. No other agent can notify (threads
  // are refused), so a timed wait always times out: it does so at once, on virtual time.
  const realWait = Atomics.wait;
  const realWaitAsync = (Atomics as unknown as { waitAsync: (...a: unknown[]) => { async: boolean; value: unknown } })
    .waitAsync;
  const timeoutOf = (t: unknown) => {
    const q = t === undefined ? Infinity : Number(t);
    return Number.isNaN(q) ? Infinity : Math.max(q, 0);
  };
  Object.defineProperty(Atomics, 'wait', {
    value: (ta: Int32Array, i: number, v: number, t?: number) => {
      const ms = timeoutOf(t);
      const r = realWait(ta, i, v, 0); // validates the arguments; never blocks
      if (r === 'not-equal' || ms === Infinity) return ms === Infinity ? realWait(ta, i, v) : r;
      now += ms;
      return 'timed-out';
    },
    writable: true,
    configurable: true,
  });
  // Each waiter left pending is native memory outside V8's heap that no limit counts (3 M of them
  // crashed node by SIGSEGV: rerun 66b); only the module's own Atomics.notify settles one.
  let pendingWaiters = 0;
  const settle = () => void pendingWaiters--;
  const then = Promise.prototype.then;
  Object.defineProperty(Atomics, 'waitAsync', {
    value: (ta: Int32Array, i: number, v: number, t?: number) => {
      const ms = timeoutOf(t);
      const r = realWaitAsync(ta, i, v, 0);
      if (r.value === 'not-equal' || ms === 0) return r;
      if (pendingWaiters >= MAX_PENDING_WAITERS)
        throw refusal('Atomics.waitAsync', `more than ${MAX_PENDING_WAITERS} pending waiters in one process`);
      const notified = realWaitAsync(ta, i, v) as { value: Promise<string> };
      pendingWaiters++;
      Reflect.apply(then, notified.value, [settle]);
      return {
        async: true,
        value: ms === Infinity ? notified.value : Promise.race([notified.value, pTimeout(ms, 'timed-out')]),
      };
    },
    writable: true,
    configurable: true,
  });

  const clock: VirtualClock = {
    get now() {
      return now;
    },
    get size() {
      return queue.length;
    },
    fireNext: fire,
    fireDue: (withinMs) => (queue.length > 0 && queue[0].at <= now + withinMs ? fire() : false),
  };
  return clock;
}
