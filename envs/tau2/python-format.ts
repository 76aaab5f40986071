/**
 * Python's text formatting, reproduced so tool outputs and DB hashes match tau2-bench byte for byte:
 * float repr (`171.0`, `1e+16`), `round(x, 2)` (ties to even on the exact binary value), `str()` and
 * `repr()` of plain values, and `json.dumps` with its default separators and ensure_ascii escaping.
 */

/** Python `repr(float)`: shortest round-trip digits, fixed notation for 1e-4 <= |x| < 1e16. */
export function pyFloatRepr(x: number): string {
  if (Number.isNaN(x)) return 'nan';
  if (!Number.isFinite(x)) return x > 0 ? 'inf' : '-inf';
  if (x === 0) return Object.is(x, -0) ? '-0.0' : '0.0';
  const [mantissa, expText] = x.toExponential().split('e');
  const exp = Number(expText);
  if (exp < -4 || exp >= 16) {
    const sign = exp < 0 ? '-' : '+';
    return `${mantissa}e${sign}${String(Math.abs(exp)).padStart(2, '0')}`;
  }
  const neg = x < 0;
  const digits = mantissa.replace('-', '').replace('.', '');
  let text: string;
  if (exp >= 0) {
    const intPart = digits.slice(0, exp + 1).padEnd(exp + 1, '0');
    const frac = digits.slice(exp + 1);
    text = `${intPart}.${frac || '0'}`;
  } else {
    text = `0.${'0'.repeat(-exp - 1)}${digits}`;
  }
  return neg ? `-${text}` : text;
}

/** Python `round(x, 2)` for floats: correctly rounded, exact ties to even. */
export function pyRound2(x: number): number {
  if (!Number.isFinite(x) || Math.abs(x) >= 1e15) return x;
  const eighths = x * 8; // exact; ties at 2 decimals exist only for odd multiples of 1/8
  if (Number.isInteger(eighths) && eighths % 2 !== 0) {
    let n = Math.floor(x * 100);
    if (n % 2 !== 0) n += 1;
    return n / 100;
  }
  return Number.parseFloat(x.toFixed(2));
}

/** A number as Python prints it, given whether the value is a Python float. */
export function pyNumber(x: number, isFloat: boolean): string {
  return isFloat || !Number.isInteger(x) ? pyFloatRepr(x) : String(x);
}

/** Python `repr(str)`: single quotes unless the text contains ' and no ". */
export function pyStrRepr(s: string): string {
  const quote = s.includes("'") && !s.includes('"') ? '"' : "'";
  let out = '';
  for (const ch of s) {
    const c = ch.codePointAt(0)!;
    if (ch === '\\') out += '\\\\';
    else if (ch === quote) out += `\\${ch}`;
    else if (ch === '\n') out += '\\n';
    else if (ch === '\r') out += '\\r';
    else if (ch === '\t') out += '\\t';
    else if (c < 0x20 || c === 0x7f) out += `\\x${c.toString(16).padStart(2, '0')}`;
    else out += ch;
  }
  return quote + out + quote;
}

/** Python `repr()` of a JSON-like value (numbers from JSON are ints unless fractional). */
export function pyRepr(v: unknown): string {
  if (v === null || v === undefined) return 'None';
  if (typeof v === 'string') return pyStrRepr(v);
  if (typeof v === 'boolean') return v ? 'True' : 'False';
  if (typeof v === 'number') return pyNumber(v, false);
  if (Array.isArray(v)) return `[${v.map(pyRepr).join(', ')}]`;
  const entries = v instanceof Map ? [...v.entries()] : Object.entries(v as object);
  return `{${entries.map(([k, x]) => `${pyStrRepr(String(k))}: ${pyRepr(x)}`).join(', ')}}`;
}

/** Python `str()` as used in f-strings. */
export function pyStr(v: unknown): string {
  return typeof v === 'string' ? v : pyRepr(v);
}

const NEEDS_ESCAPE = /[^\x20\x21\x23-\x5b\x5d-\x7e]/;

/** A JSON string literal with Python's ensure_ascii escaping. */
export function pyJsonString(s: string): string {
  if (!NEEDS_ESCAPE.test(s)) return `"${s}"`;
  return JSON.stringify(s).replace(/[^\x20-\x7e]/g, (ch) => `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/**
 * A Python int held where the model declares a float (pydantic does not re-validate assignments),
 * e.g. retail's `exchange_price_difference = round(0, 2)` for an empty exchange; it dumps as `0`.
 */
export interface PyIntMarker {
  pyInt: number;
}
export const isPyInt = (v: unknown): v is PyIntMarker =>
  typeof v === 'object' && v !== null && 'pyInt' in v && Object.keys(v).length === 1;

/** `json.dumps(v)` for untyped JSON-like values (Maps and objects keep insertion order). */
export function pyJsonDumps(v: unknown, sortKeys = false): string {
  if (v === null || v === undefined) return 'null';
  if (typeof v === 'string') return pyJsonString(v);
  if (typeof v === 'boolean') return v ? 'true' : 'false';
  if (typeof v === 'number')
    return Number.isFinite(v) ? pyNumber(v, false) : v > 0 ? 'Infinity' : Number.isNaN(v) ? 'NaN' : '-Infinity';
  if (Array.isArray(v)) return `[${v.map((x) => pyJsonDumps(x, sortKeys)).join(', ')}]`;
  if (isPyInt(v)) return String(v.pyInt);
  let entries = v instanceof Map ? [...v.entries()] : Object.entries(v as object);
  if (sortKeys) entries = entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, x]) => `${pyJsonString(String(k))}: ${pyJsonDumps(x, sortKeys)}`).join(', ')}}`;
}
