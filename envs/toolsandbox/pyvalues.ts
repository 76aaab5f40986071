/**
 * The few Python value semantics ToolSandbox's evaluator depends on: `==` (True == 1, deep
 * dict/list equality), str() of extracted values, f-string fixed-point formatting (round half to
 * even on the exact binary value) and `str.format(**kwargs)` with named fields.
 */
import { pyFloatRepr } from '../tau2/python-format.js';

/** tool_sandbox.common.utils.NOT_GIVEN: an argument the call did not pass. */
export const NOT_GIVEN: unique symbol = Symbol('NOT_GIVEN');

/** A float-typed value (Python `float`), so str()/repr() print `1.0`, not `1`. */
export class PyFloat {
  constructor(readonly value: number) {}
}

const num = (v: unknown): number | undefined =>
  typeof v === 'number' ? v : typeof v === 'boolean' ? Number(v) : v instanceof PyFloat ? v.value : undefined;

export function pyEquals(a: unknown, b: unknown): boolean {
  if (a === NOT_GIVEN || b === NOT_GIVEN) return a === b;
  const na = num(a);
  const nb = num(b);
  if (na !== undefined || nb !== undefined) return na !== undefined && nb !== undefined && na === nb;
  if (a === null || b === null || a === undefined || b === undefined) return (a ?? null) === (b ?? null);
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((x, i) => pyEquals(x, b[i]));
  }
  if (typeof a === 'object' && typeof b === 'object') {
    const ka = Object.keys(a as object);
    const kb = Object.keys(b as object);
    return (
      ka.length === kb.length &&
      ka.every(
        (k) => k in (b as object) && pyEquals((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]),
      )
    );
  }
  return a === b;
}

/** tool_sandbox.common.utils.is_close: |value - reference| <= atol for numbers (bools count), else ==. */
export function isClose(value: unknown, reference: unknown, atol?: number): boolean {
  const v = num(value);
  const r = num(reference);
  if (atol !== undefined && v !== undefined && r !== undefined) return Math.abs(v - r) <= atol;
  return pyEquals(value, reference);
}

export function pyStr(v: unknown): string {
  if (v instanceof PyFloat) return pyFloatRepr(v.value);
  if (typeof v === 'boolean') return v ? 'True' : 'False';
  if (v === null || v === undefined) return 'None';
  return String(v);
}

/** f"{x:.{digits}f}": like toFixed, except that exact binary ties round half to even. */
export function pyFixed(x: number, digits: number): string {
  if (!Number.isFinite(x)) return pyFloatRepr(x);
  const neg = x < 0 || Object.is(x, -0);
  const a = Math.abs(x);
  // x is a tie at this precision iff x * 2^(digits+1) is an odd integer (exact: power-of-two scaling).
  const scaled2 = a * 2 ** (digits + 1);
  let out: string;
  if (Number.isInteger(scaled2) && scaled2 % 2 === 1 && scaled2 < 2 ** 53) {
    // The two candidates are floor(a * 10^digits) and the next unit; Python picks the even one.
    const lo = Math.floor(a * 10 ** digits);
    out = ((lo % 2 === 0 ? lo : lo + 1) / 10 ** digits).toFixed(digits);
  } else out = a.toFixed(digits);
  return neg ? `-${out}` : out;
}

/** `template.format(**values)` for named fields ({name}, {{ and }}); a missing name throws KeyError-like. */
export function pyFormat(template: string, values: Record<string, unknown>): string {
  return template.replace(/\{\{|\}\}|\{([^{}]*)\}/g, (m, field: string | undefined) => {
    if (m === '{{') return '{';
    if (m === '}}') return '}';
    const [name, spec] = (field ?? '').split(':', 2);
    if (!(name in values)) throw new PyKeyError(name);
    const v = values[name];
    if (spec === undefined) return pyStr(v);
    const fixed = /^\.(\d+)f$/.exec(spec);
    if (fixed) return pyFixed(num(v) ?? NaN, Number(fixed[1]));
    throw new Error(`format spec '${spec}' is not supported`);
  });
}

export class PyKeyError extends Error {}
