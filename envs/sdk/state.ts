import { createHash } from 'node:crypto';

/**
 * Environment state is plain JSON (objects, arrays, strings, finite numbers, booleans, null) that
 * tools mutate in place. Its identity is the sha256 of its canonical JSON, so "DB after the gold
 * solution equals DB after the agent" is one string comparison.
 */
export type Json = string | number | boolean | null | Json[] | { [k: string]: Json };

/** JSON with object keys sorted at every level; rejects values JSON cannot round-trip. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(normalize(value, '$'));
}

export function stableHash(value: unknown): string {
  return createHash('sha256').update(canonicalJson(value)).digest('hex');
}

/** A deep copy through canonical JSON (so copies never share references with the original). */
export function cloneState<T>(value: T): T {
  return JSON.parse(canonicalJson(value)) as T;
}

function normalize(v: unknown, path: string): unknown {
  if (v === null || typeof v === 'string' || typeof v === 'boolean') return v;
  if (typeof v === 'number') {
    if (!Number.isFinite(v)) throw new TypeError(`state is not JSON: ${path} is ${v}`);
    return v;
  }
  if (Array.isArray(v)) return v.map((x, i) => normalize(x === undefined ? null : x, `${path}[${i}]`));
  if (typeof v === 'object') {
    const proto = Object.getPrototypeOf(v);
    if (proto !== Object.prototype && proto !== null)
      throw new TypeError(`state is not JSON: ${path} is a ${proto?.constructor?.name ?? 'non-plain object'}`);
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(v as object).sort()) {
      const x = (v as Record<string, unknown>)[k];
      if (x !== undefined) out[k] = normalize(x, `${path}.${k}`);
    }
    return out;
  }
  throw new TypeError(`state is not JSON: ${path} is a ${typeof v}`);
}
