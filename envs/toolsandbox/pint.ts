/**
 * The part of pint 0.23 (BSD licence, data/toolsandbox/derived/PINT-LICENSE) that ToolSandbox's
 * `unit_conversion` runs: `pint.Quantity(amount, from_unit).to(to_unit).magnitude` on the application
 * registry (default_en.txt, case-sensitive, default_as_delta, no context active).
 * Re-implemented from pint's semantics: the "%" preprocessor and string_preprocessor's rewrites
 * ("per", "squared", "cubic", "sq", spaces and number-letter as products, "^", superscripts), Python
 * 3.11's tokenizer as far as unit strings reach it, pint_eval's evaluation tree over ParserHelper
 * (scale + exponents), get_name's lookup (names, symbols, aliases; every prefix x {"", "s"} suffix,
 * first candidate, prefixed before unprefixed), `delta_` units in compound expressions, root-unit
 * factors accumulated in pint's recursion order with Python's int / float arithmetic (an all-int
 * chain stays an int: 5 h in s is 18000), offset conversions (to_reference / from_reference),
 * the caches keyed by unit *sets* (so, as upstream, a later call can reuse a factor computed in
 * another order), and pint's exception messages.
 * The unit definitions themselves are data generated from pint's loaded registry
 * (data/toolsandbox/derived/pint-units.json). Logarithmic units (decibel, neper, octave, decade,
 * dBm, dBu) are not ported: a conversion reaching one raises NotImplementedError naming it.
 */
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { pyFloatRepr, pyStrRepr } from '../tau2/python-format.js';

/** A Python number: bigint = int, number = float. */
export type PyNum = bigint | number;

/** A Python exception raised inside pint (or Python itself): the qualified class name and str(). */
export class PintException extends Error {
  constructor(
    readonly pyType: string,
    message: string,
  ) {
    super(message);
  }
}
const undefinedUnit = (name: string) =>
  new PintException('pint.errors.UndefinedUnitError', `'${name}' is not defined in the unit registry`);
const syntaxError = (msg: string) => new PintException('pint.errors.DefinitionSyntaxError', msg);
const notPorted = (what: string) => new PintException('NotImplementedError', `unit_conversion: ${what} is not ported`);

// ---- Python number semantics.

const isInt = (x: PyNum): x is bigint => typeof x === 'bigint';
const toFloat = (x: PyNum): number => (isInt(x) ? Number(x) : x);
const typeName = (x: PyNum | ParserHelper): string =>
  x instanceof ParserHelper ? 'ParserHelper' : isInt(x) ? 'int' : 'float';
const isZero = (x: PyNum): boolean => (isInt(x) ? x === 0n : x === 0);
const numEq = (a: PyNum, b: PyNum): boolean => (isInt(a) && isInt(b) ? a === b : toFloat(a) === toFloat(b));

const mul = (a: PyNum, b: PyNum): PyNum => (isInt(a) && isInt(b) ? a * b : toFloat(a) * toFloat(b));
const add = (a: PyNum, b: PyNum): PyNum => (isInt(a) && isInt(b) ? a + b : toFloat(a) + toFloat(b));
const sub = (a: PyNum, b: PyNum): PyNum => (isInt(a) && isInt(b) ? a - b : toFloat(a) - toFloat(b));

function bitLength(n: bigint): number {
  return n === 0n ? 0 : n.toString(2).length;
}

/** num / den * 2^e2 (num, den > 0), correctly rounded to a double (ties to even), as CPython rounds. */
function roundRational(num: bigint, den: bigint, e2: number): number {
  const s = 55 - (bitLength(num) - bitLength(den));
  const n = s >= 0 ? num << BigInt(s) : num;
  const d = s >= 0 ? den : den << BigInt(-s);
  let q = n / d;
  const sticky = n % d !== 0n;
  let exp = e2 - s;
  const qb = bitLength(q);
  let drop = qb - 53;
  if (exp + qb - 1 < -1022) drop = -1074 - exp;
  if (drop > 0) {
    const half = 1n << BigInt(drop - 1);
    const rem = q & ((1n << BigInt(drop)) - 1n);
    q >>= BigInt(drop);
    exp += drop;
    if (rem > half || (rem === half && (sticky || (q & 1n) === 1n))) q += 1n;
  }
  // Two power-of-two steps so that neither factor under- or overflows on its own.
  const half1 = Math.trunc(exp / 2);
  return Number(q) * 2 ** half1 * 2 ** (exp - half1);
}

/** A finite nonzero double as odd-or-any mantissa and exponent: |x| = m * 2^e exactly. */
function decompose(x: number): [bigint, number] {
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, Math.abs(x));
  const bits = view.getBigUint64(0);
  const expBits = Number((bits >> 52n) & 0x7ffn);
  const mant = bits & ((1n << 52n) - 1n);
  return expBits === 0 ? [mant, -1074] : [mant | (1n << 52n), expBits - 1075];
}

function truediv(a: PyNum, b: PyNum): number {
  if (isZero(b))
    throw new PintException('ZeroDivisionError', isInt(a) && isInt(b) ? 'division by zero' : 'float division by zero');
  if (isInt(a) && isInt(b)) {
    // int / int is correctly rounded in CPython, also past 2^53.
    if (a === 0n) return 0;
    const neg = a < 0n !== b < 0n;
    const r = roundRational(a < 0n ? -a : a, b < 0n ? -b : b, 0);
    return neg ? -r : r;
  }
  return toFloat(a) / toFloat(b);
}

/**
 * Python's `**`: int ** non-negative int is exact; otherwise C pow on floats. glibc's pow is
 * correctly rounded in practice; the port rounds integer powers exactly (and x ** 0.5 is sqrt);
 * other fractional exponents use Math.pow, which may differ from glibc in the last bit.
 */
function pyPow(a: PyNum, b: PyNum): PyNum {
  if (isInt(a) && isInt(b) && b >= 0n) {
    if (b > 4096n) throw notPorted(`an integer power above 4096 (${b})`);
    return a ** b;
  }
  const x = toFloat(a);
  const y = toFloat(b);
  if (x === 0 && y < 0) throw new PintException('ZeroDivisionError', '0.0 cannot be raised to a negative power');
  if (y === 0) return 1;
  if (!Number.isFinite(x) || !Number.isFinite(y) || x === 0) return Math.pow(x, y);
  if (Number.isInteger(y) && Math.abs(y) <= 4096) {
    const [m, e] = decompose(x);
    const n = Math.abs(y);
    const mn = m ** BigInt(n);
    const r = y > 0 ? roundRational(mn, 1n, e * n) : roundRational(1n, mn, -e * n);
    if (!Number.isFinite(r)) throw new PintException('OverflowError', "(34, 'Numerical result out of range')");
    return x < 0 && n % 2 === 1 ? -r : r;
  }
  if (x < 0) throw notPorted('a negative number to a fractional power (complex in Python)');
  const den = [2, 3, 4, 6, 8].find((d) => Number.isInteger(d * y));
  if (den !== undefined && Math.abs(y) <= 64) return rationalPow(x, Math.round(den * y), den);
  return Math.pow(x, y);
}

/** sign(a * 2^ea - b * 2^eb) for non-negative a, b. */
function compareScaled(a: bigint, ea: number, b: bigint, eb: number): number {
  const e = Math.min(ea, eb);
  const l = a << BigInt(ea - e);
  const r = b << BigInt(eb - e);
  return l < r ? -1 : l > r ? 1 : 0;
}

/** The exact midpoint of two adjacent positive doubles, as M * 2^E. */
function midpoint(a: number, b: number): [bigint, number] {
  const [ma, ea] = decompose(a);
  const [mb, eb] = decompose(b);
  const e = Math.min(ea, eb);
  return [(ma << BigInt(ea - e)) + (mb << BigInt(eb - e)), e - 1];
}

/**
 * x ** (k / d) for x > 0, correctly rounded (as glibc's pow rounds x ** 0.5, x ** -0.25 …):
 * Math.pow's answer moved to the neighbour whose half-ulp interval holds the exact value, decided
 * by comparing d-th powers exactly (x^k against mid^d).
 */
function rationalPow(x: number, k: number, d: number): number {
  const [mx, ex] = decompose(x);
  const n = Math.abs(k);
  const xk = mx ** BigInt(n);
  const bd = BigInt(d);
  /** sign(x^(k/d) - mid) for mid = M * 2^E. */
  const cmp = ([m, e]: [bigint, number]): number =>
    k > 0 ? compareScaled(xk, ex * n, m ** bd, d * e) : compareScaled(1n, 0, m ** bd * xk, d * e + ex * n);
  let c = Math.pow(x, k / d);
  for (let i = 0; i < 4; i++) {
    const up = nextUp(c);
    const down = nextDown(c);
    if (cmp(midpoint(c, up)) > 0) c = up;
    else if (cmp(midpoint(down, c)) < 0) c = down;
    else break;
  }
  return c;
}

function nextUp(x: number): number {
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, x);
  view.setBigUint64(0, view.getBigUint64(0) + 1n);
  return view.getFloat64(0);
}
function nextDown(x: number): number {
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, x);
  view.setBigUint64(0, view.getBigUint64(0) - 1n);
  return view.getFloat64(0);
}

/** Python's ZeroDivisionError for // and %, whose wording depends on the operand types. */
function checkDivisor(a: PyNum, b: PyNum, intWording: string, floatWording: string): void {
  if (isZero(b)) throw new PintException('ZeroDivisionError', isInt(a) && isInt(b) ? intWording : floatWording);
}

function floordiv(a: PyNum, b: PyNum): PyNum {
  checkDivisor(a, b, 'integer division or modulo by zero', 'float floor division by zero');
  if (isInt(a) && isInt(b)) {
    const q = a / b;
    return a % b !== 0n && a < 0n !== b < 0n ? q - 1n : q;
  }
  return Math.floor(toFloat(a) / toFloat(b));
}

function mod(a: PyNum, b: PyNum): PyNum {
  checkDivisor(a, b, 'integer modulo by zero', 'float modulo');
  if (isInt(a) && isInt(b)) {
    const r = a % b;
    return r !== 0n && r < 0n !== b < 0n ? r + b : r;
  }
  const x = toFloat(a);
  const y = toFloat(b);
  const r = x % y;
  return r !== 0 && r < 0 !== y < 0 ? r + y : r;
}

// ---- UnitsContainer / ParserHelper (a Map keeps Python dict order: a deleted key re-inserted goes last).

type Units = Map<string, PyNum>;

/** UnitsContainer.add: the sum kept where the key was, dropped at zero. */
function ucAdd(u: Units, key: string, value: PyNum): Units {
  const out = new Map(u);
  const v = add(u.get(key) ?? 0n, value);
  if (isZero(v)) out.delete(key);
  else out.set(key, v);
  return out;
}

/** UnitsContainer / UnitsContainer. */
function ucDiv(a: Units, b: Units): Units {
  const out = new Map(a);
  for (const [k, v] of b) {
    const r = sub(out.get(k) ?? 0n, v);
    if (isZero(r)) out.delete(k);
    else out.set(k, r);
  }
  return out;
}

function ucEq(a: Units, b: Units): boolean {
  if (a.size !== b.size) return false;
  for (const [k, v] of a) if (!b.has(k) || !numEq(v, b.get(k)!)) return false;
  return true;
}

/** A dict key with UnitsContainer's hash / eq semantics: the set of (name, exponent), 1 == 1.0. */
const ucKey = (u: Units): string =>
  [...u]
    .map(([k, v]) => `${k}\u0000${toFloat(v)}`)
    .sort()
    .join('\u0001');

/** format(exponent, "n") for the exponents pint prints: ints plainly, floats as %g. */
function formatExponent(x: PyNum): string {
  if (isInt(x)) return String(x);
  if (Number.isInteger(x) && Math.abs(x) < 1e6) return String(x);
  const exp = Math.floor(Math.log10(Math.abs(x)));
  if (exp < -4 || exp >= 6) {
    const [m, e] = x.toExponential(5).split('e');
    const mant = m.includes('.') ? m.replace(/0+$/, '').replace(/\.$/, '') : m;
    const en = Number(e);
    return `${mant}e${en < 0 ? '-' : '+'}${String(Math.abs(en)).padStart(2, '0')}`;
  }
  const t = x.toPrecision(6);
  return t.includes('.') ? t.replace(/0+$/, '').replace(/\.$/, '') : t;
}

/** str(UnitsContainer): pint's default "D" format, sorted by name, as a ratio. */
export function formatUnits(u: Units): string {
  if (u.size === 0) return 'dimensionless';
  const pos: string[] = [];
  const neg: string[] = [];
  const items = [...u].sort(([a, x], [b, y]) => (a < b ? -1 : a > b ? 1 : toFloat(x) - toFloat(y)));
  for (const [k, v] of items) {
    const f = toFloat(v);
    const abs = isInt(v) ? (v < 0n ? -v : v) : Math.abs(v);
    if (f === 1) pos.push(k);
    else if (f > 0) pos.push(`${k} ** ${formatExponent(abs)}`);
    else if (f === -1) neg.push(k);
    else neg.push(`${k} ** ${formatExponent(abs)}`);
  }
  const p = pos.join(' * ') || '1';
  return neg.length ? [p, neg.join(' / ')].join(' / ') : p;
}

class ParserHelper {
  constructor(
    readonly scale: PyNum,
    readonly d: Units,
  ) {}
  static word(name: string): ParserHelper {
    return new ParserHelper(1n, new Map([[name, 1n]]));
  }
  /** ParserHelper.operate: every item combined in place, then zeros removed. */
  operate(other: Units, op: (a: PyNum, b: PyNum) => PyNum, scale: PyNum): ParserHelper {
    const d = new Map(this.d);
    for (const [k, v] of other) d.set(k, op(d.get(k) ?? 0n, v));
    for (const [k, v] of [...d]) if (isZero(v)) d.delete(k);
    return new ParserHelper(scale, d);
  }
  pow(e: PyNum): ParserHelper {
    const d = new Map([...this.d].map(([k, v]) => [k, mul(v, e)] as const));
    return new ParserHelper(pyPow(this.scale, e), d);
  }
}
type Value = PyNum | ParserHelper;

const unsupported = (op: string, a: Value, b: Value) =>
  new PintException('TypeError', `unsupported operand type(s) for ${op}: '${typeName(a)}' and '${typeName(b)}'`);

/** Python's operators on two numbers, by pint_eval's operator text ('' is the implicit product). */
const NUMBER_OPS: Record<string, (x: PyNum, y: PyNum) => PyNum> = {
  '**': pyPow,
  '*': mul,
  '': mul,
  '/': truediv,
  '+': add,
  '-': sub,
  '%': mod,
  '//': floordiv,
};

/** pint_eval's binary operators on ParserHelper / numbers, with Python's dispatch (__r*__ included). */
function binary(op: string, a: Value, b: Value): Value {
  const pa = a instanceof ParserHelper;
  const pb = b instanceof ParserHelper;
  if (!pa && !pb) {
    return NUMBER_OPS[op](a as PyNum, b as PyNum);
  }
  switch (op) {
    case '**':
      if (pa && !pb) return (a as ParserHelper).pow(b as PyNum);
      // int ** ParserHelper (also the scale of a ParserHelper raised to one) has no implementation.
      throw unsupported('** or pow()', pa ? (a as ParserHelper).scale : a, b);
    case '*':
    case '':
      if (pa && pb) return a.operate(b.d, add, mul(a.scale, b.scale));
      if (pa) return new ParserHelper(mul(a.scale, b as PyNum), a.d);
      return new ParserHelper(mul((b as ParserHelper).scale, a as PyNum), (b as ParserHelper).d);
    case '/':
    case '//':
      if (pa && pb) return a.operate(b.d, sub, truediv(a.scale, b.scale));
      if (pa) return new ParserHelper(truediv(a.scale, b as PyNum), a.d);
      if (op === '//') throw unsupported('//', a, b);
      {
        const inv = (b as ParserHelper).pow(-1n);
        return new ParserHelper(mul(inv.scale, a as PyNum), inv.d);
      }
    default:
      throw unsupported(op, a, b);
  }
}

// ---- Python 3.11's tokenize, for the one-line strings pint hands it.

type TokType =
  'NAME' | 'NUMBER' | 'OP' | 'STRING' | 'COMMENT' | 'ERRORTOKEN' | 'NEWLINE' | 'NL' | 'INDENT' | 'DEDENT' | 'ENDMARKER';
interface Token {
  type: TokType;
  text: string;
  start: number;
  end: number;
}
const TOKEN_NUMBERS: Record<TokType, number> = {
  ENDMARKER: 0,
  NAME: 1,
  NUMBER: 2,
  STRING: 3,
  NEWLINE: 4,
  INDENT: 5,
  DEDENT: 6,
  OP: 54,
  COMMENT: 61,
  NL: 62,
  ERRORTOKEN: 59,
};
const DIGITS = '[0-9](?:_?[0-9])*';
const EXPONENT = `[eE][-+]?${DIGITS}`;
const POINTFLOAT = `(?:${DIGITS}\\.(?:${DIGITS})?|\\.${DIGITS})(?:${EXPONENT})?`;
const FLOATNUMBER = `(?:${POINTFLOAT}|${DIGITS}${EXPONENT})`;
const INTNUMBER = '(?:0[xX](?:_?[0-9a-fA-F])+|0[bB](?:_?[01])+|0[oO](?:_?[0-7])+|(?:0(?:_?0)*|[1-9](?:_?[0-9])*))';
const NUMBER_RE = new RegExp(`^(?:${DIGITS}[jJ]|${FLOATNUMBER}[jJ]|${FLOATNUMBER}|${INTNUMBER})`);
// token.EXACT_TOKEN_TYPES, longest alternatives first as tokenize's reverse-sorted group tries them.
const SPECIALS = [
  '!=',
  '%',
  '%=',
  '&',
  '&=',
  '(',
  ')',
  '*',
  '**',
  '**=',
  '*=',
  '+',
  '+=',
  ',',
  '-',
  '-=',
  '->',
  '.',
  '...',
  '/',
  '//',
  '//=',
  '/=',
  ':',
  ':=',
  ';',
  '<',
  '<<',
  '<<=',
  '<=',
  '=',
  '==',
  '>',
  '>=',
  '>>',
  '>>=',
  '@',
  '@=',
  '[',
  ']',
  '^',
  '^=',
  '{',
  '|',
  '|=',
  '}',
  '~',
]
  .sort()
  .reverse();
const STRING_RE =
  /^(?:[bB][rR]?|[rR][bBfF]?|[uU]|[fF][rR]?)?(?:'[^\n'\\]*(?:\\.[^\n'\\]*)*'|"[^\n"\\]*(?:\\.[^\n"\\]*)*")/;
const TRIPLE_RE = /^(?:[bB][rR]?|[rR][bBfF]?|[uU]|[fF][rR]?)?(?:'''|""")/;
const WORD_RE = /^[\p{L}\p{N}_]+/u;
const ID_START_RE = /^[\p{XID_Start}_]/u;

function tokenize(line: string): Token[] {
  if (/[\r\n\\]/.test(line)) throw notPorted('a unit expression with a line break or backslash');
  const out: Token[] = [];
  let pos = 0;
  let parens = 0;
  const lead = /^[ \f\t]*/.exec(line)![0].length;
  const commentLine = line[lead] === '#';
  if (lead > 0 && !commentLine) out.push({ type: 'INDENT', text: line.slice(0, lead), start: 0, end: lead });
  pos = lead;
  while (pos < line.length) {
    const ws = /^[ \f\t]*/.exec(line.slice(pos))![0].length;
    const start = pos + ws;
    if (start >= line.length) break;
    const rest = line.slice(start);
    const push = (type: TokType, text: string) => {
      out.push({ type, text, start, end: start + text.length });
      pos = start + text.length;
    };
    let m: RegExpExecArray | null;
    if (rest[0] === '#') push('COMMENT', rest);
    else if (TRIPLE_RE.test(rest)) throw notPorted('a triple-quoted string in a unit expression');
    else if ((m = NUMBER_RE.exec(rest))) push('NUMBER', m[0]);
    else if (SPECIALS.some((s) => rest.startsWith(s))) {
      const op = SPECIALS.find((s) => rest.startsWith(s))!;
      if ('([{'.includes(op)) parens++;
      else if (')]}'.includes(op)) parens--;
      push('OP', op);
    } else if ((m = STRING_RE.exec(rest))) push('STRING', m[0]);
    else if ((m = WORD_RE.exec(rest))) {
      // \w+ that does not start an identifier (a non-ASCII digit) comes out as OP.
      push(ID_START_RE.test(m[0]) ? 'NAME' : 'OP', m[0]);
    } else {
      out.push({ type: 'ERRORTOKEN', text: line[pos], start: pos, end: pos + 1 });
      pos += 1;
    }
  }
  if (parens !== 0) throw new PintException('tokenize.TokenError', "('EOF in multi-line statement', (2, 0))");
  if (commentLine) out.push({ type: 'NL', text: '', start: line.length, end: line.length + 1 });
  else out.push({ type: 'NEWLINE', text: '', start: line.length, end: line.length + 1 });
  if (lead > 0 && !commentLine) out.push({ type: 'DEDENT', text: '', start: 0, end: 0 });
  out.push({ type: 'ENDMARKER', text: '', start: 0, end: 0 });
  return out;
}

const tokenRepr = (t: Token, line: string) =>
  `TokenInfo(type=${TOKEN_NUMBERS[t.type]} (${t.type}), string=${pyStrRepr(t.text)}, start=(1, ${t.start}), end=(1, ${t.end}), line=${pyStrRepr(line)})`;

// ---- pint_eval: the evaluation tree.

interface Node {
  left: Node | Token;
  op?: Token;
  right?: Node;
}
const OP_PRIORITY: Record<string, number> = {
  '+/-': 4,
  '**': 3,
  '^': 3,
  unary: 2,
  '*': 1,
  '': 1,
  '//': 1,
  '/': 1,
  '%': 1,
  '+': 0,
  '-': 0,
};

/** pint_eval._build_eval_tree, step for step (so the same inputs fail the same way). */
function buildTree(tokens: Token[], line: string, index = 0, depth = 0, prevOp = '<none>'): [Node, number] {
  let result: Node | undefined;
  for (;;) {
    const tok = tokens[index];
    if (tok.type === 'OP') {
      if (tok.text === ')') {
        if (prevOp === '<none>') throw syntaxError(`unopened parentheses in tokens: ${tokenRepr(tok, line)}`);
        if (result === undefined) throw new PintException('AssertionError', '');
        return prevOp === '(' ? [result, index] : [result, index - 1];
      } else if (tok.text === '(') {
        const [right, i] = buildTree(tokens, line, index + 1, 0, '(');
        index = i;
        if (tokens[index].text !== ')') throw syntaxError('weird exit from parentheses');
        result = result ? { left: result, right } : right;
      } else if (tok.text in OP_PRIORITY) {
        if (result) {
          if (OP_PRIORITY[tok.text] <= (OP_PRIORITY[prevOp] ?? -1) && tok.text !== '**' && tok.text !== '^')
            return [result, index - 1];
          const [right, i] = buildTree(tokens, line, index + 1, depth + 1, tok.text);
          index = i;
          result = { left: result, op: tok, right };
        } else {
          const [right, i] = buildTree(tokens, line, index + 1, depth + 1, 'unary');
          index = i;
          result = { left: right, op: tok };
        }
      }
    } else if (tok.type === 'NUMBER' || tok.type === 'NAME') {
      if (result) {
        if (OP_PRIORITY[''] <= (OP_PRIORITY[prevOp] ?? -1)) return [result, index - 1];
        const [right, i] = buildTree(tokens, line, index, depth + 1, '');
        index = i;
        result = { left: result, right };
      } else result = { left: tok };
    }
    if (tokens[index].type === 'ENDMARKER') {
      if (prevOp === '(') throw syntaxError('unclosed parentheses in tokens');
      if (result === undefined) throw new PintException('AssertionError', '');
      return depth > 0 || prevOp ? [result, index] : [result, -1];
    }
    if (index + 1 >= tokens.length) throw syntaxError('unexpected end to tokens');
    index += 1;
  }
}

/** ParserHelper.eval_token: int() where it parses, else float(). */
function evalToken(t: Token): Value {
  if (t.type === 'NAME') return ParserHelper.word(t.text);
  const plain = t.text.replace(/_/g, '');
  if (/^[0-9]+$/.test(plain)) return BigInt(plain);
  if (/^([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$/.test(plain)) return Number(plain);
  throw new PintException('ValueError', `could not convert string to float: ${pyStrRepr(t.text)}`);
}

function evaluate(n: Node): Value {
  if (n.right) {
    const op = n.op ? n.op.text : '';
    return binary(op, evaluate(n.left as Node), evaluate(n.right));
  }
  if (n.op) {
    if (n.op.text !== '+' && n.op.text !== '-') throw syntaxError(`missing unary operator '${n.op.text}'`);
    const v = evaluate(n.left as Node);
    return n.op.text === '+' ? v : binary('*', v, -1n);
  }
  return evalToken(n.left as Token);
}

// ---- string_preprocessor (pint/util.py), with Python's Unicode \w and \s.

const W = '\\p{L}\\p{N}_';
const S = '\\t\\n\\v\\f\\r\\x1c-\\x1f \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000';
const ID = '[_a-zA-Z][_a-zA-Z0-9]*';
const SUBS: [RegExp, string][] = [
  [/°/gu, 'degree'],
  [new RegExp(`([${W}\\.\\-\\+\\*\\\\\\^])[${S}]+`, 'gu'), '$1 '],
  [new RegExp(`(${ID}) squared`, 'g'), '$1**2'],
  [new RegExp(`(${ID}) cubed`, 'g'), '$1**3'],
  [new RegExp(`cubic (${ID})`, 'g'), '$1**3'],
  [new RegExp(`square (${ID})`, 'g'), '$1**2'],
  [new RegExp(`sq (${ID})`, 'g'), '$1**2'],
  [new RegExp(`(?<![${W}])([0-9]+\\.?[0-9]*)(?=[e|E][a-zA-Z]|[a-df-zA-DF-Z])`, 'gu'), '$1*'],
  [new RegExp(`([${W}\\.\\)])[${S}]+(?=[${W}\\(])`, 'gu'), '$1*'],
];
const SUPERSCRIPTS = '⁰¹²³⁴⁵⁶⁷⁸⁹·⁻';
const PLAIN = '0123456789*-';

function stringPreprocessor(s: string): string {
  s = s.replaceAll(',', '').replaceAll(' per ', '/');
  for (const [re, to] of SUBS) s = s.replace(re, to);
  s = s.replace(/(⁻?[⁰¹²³⁴⁵⁶⁷⁸⁹]+(?:\.[⁰¹²³⁴⁵⁶⁷⁸⁹]*)?)/gu, '**($1)');
  s = [...s].map((c) => (SUPERSCRIPTS.includes(c) ? PLAIN[SUPERSCRIPTS.indexOf(c)] : c)).join('');
  return s.replaceAll('^', '**');
}

const PY_SPACE = new RegExp(`^[${S}]+|[${S}]+$`, 'gu');

/** ParserHelper.from_string: the expression as a scale and exponents, in pint's dict order. */
function fromString(input: string): ParserHelper {
  if (!input) return new ParserHelper(1n, new Map());
  let s = stringPreprocessor(input);
  const reps = s.includes('[');
  if (reps) s = s.replaceAll('[', '__obra__').replaceAll(']', '__cbra__');
  const tokens = tokenize(s);
  const ret = evaluate(buildTree(tokens, s)[0]);
  let ph = ret instanceof ParserHelper ? ret : new ParserHelper(ret, new Map());
  if (reps)
    ph = new ParserHelper(
      ph.scale,
      new Map([...ph.d].map(([k, v]) => [k.replaceAll('__obra__', '[').replaceAll('__cbra__', ']'), v] as const)),
    );
  for (const k of [...ph.d.keys()])
    if (k.toLowerCase() === 'nan') {
      const d = new Map(ph.d);
      d.delete(k);
      ph = new ParserHelper(NaN, d);
    }
  return ph;
}

// ---- The registry.

const NumText = z.string().regex(/^-?(\d+|\d+\.\d+(e[-+]\d+)?|\d+e[-+]\d+|\d\.\d+e[-+]\d+)$/);
const Pairs = z.array(z.tuple([z.string(), NumText]));
const TableSchema = z.object({
  pint_version: z.literal('0.23'),
  suffixes: z.array(z.string()),
  prefixes: z.array(z.tuple([z.string(), z.string(), NumText])),
  units: z.record(z.string(), z.string()),
  defs: z.record(
    z.string(),
    z.object({
      scale: NumText,
      offset: NumText.nullable(),
      kind: z.enum(['scale', 'offset', 'log']),
      ref: Pairs.nullable(),
      base: z.boolean(),
    }),
  ),
  derived_dimensions: z.record(z.string(), Pairs),
});
export const PINT_TABLE_FILE = new URL('../../data/toolsandbox/derived/pint-units.json', import.meta.url);

/** A Python number literal as pint stored it (repr): an int, or a float. */
const pyNum = (t: string): PyNum => (/^-?\d+$/.test(t) ? BigInt(t) : Number(t));
const units = (pairs: [string, string][]): Units => new Map(pairs.map(([k, v]) => [k, pyNum(v)]));

interface UnitDef {
  name: string;
  scale: PyNum;
  offset: PyNum | null;
  kind: 'scale' | 'offset' | 'log';
  ref: Units | null;
  base: boolean;
}
const isDim = (k: string) => k.startsWith('[') && k.endsWith(']');

class DimensionalityError extends PintException {
  constructor(src: Units, dst: Units, dims?: [Units, Units], extra = '') {
    const d = dims ? [` (${formatUnits(dims[0])})`, ` (${formatUnits(dims[1])})`] : ['', ''];
    super(
      'pint.errors.DimensionalityError',
      `Cannot convert from '${formatUnits(src)}'${d[0]} to '${formatUnits(dst)}'${d[1]}${extra}`,
    );
  }
}

let table: z.infer<typeof TableSchema> | undefined;

/**
 * One pint application registry: the unit table plus the caches (and the prefixed units get_name
 * defines on first use). Upstream has one per Python process; a fresh one mirrors a fresh process.
 */
export class PintRegistry {
  private readonly units = new Map<string, UnitDef>();
  private readonly prefixes = new Map<string, { name: string; scale: PyNum }>();
  private readonly suffixes: string[];
  private readonly derived = new Map<string, Units>();
  private readonly rootCache = new Map<string, PyNum>();
  private readonly dimCache = new Map<string, Units>();
  private readonly factorCache = new Map<string, PyNum>();

  constructor() {
    table ??= TableSchema.parse(JSON.parse(readFileSync(PINT_TABLE_FILE, 'utf8')));
    const defs = new Map<string, UnitDef>();
    for (const [name, d] of Object.entries(table.defs))
      defs.set(name, {
        name,
        scale: pyNum(d.scale),
        offset: d.offset === null ? null : pyNum(d.offset),
        kind: d.kind,
        ref: d.ref && units(d.ref),
        base: d.base,
      });
    for (const [key, name] of Object.entries(table.units)) this.units.set(key, defs.get(name)!);
    for (const [key, name, scale] of table.prefixes) this.prefixes.set(key, { name, scale: pyNum(scale) });
    this.suffixes = table.suffixes;
    for (const [k, v] of Object.entries(table.derived_dimensions)) this.derived.set(k, units(v));
  }

  /** parse_unit_name: (prefix, unit) candidates over suffixes x prefixes, prefixed ones preferred. */
  private parseUnitName(unit: string): [string, string][] {
    const found = new Map<string, [string, string]>();
    for (const suffix of this.suffixes)
      for (const [pkey, p] of this.prefixes) {
        if (!unit.startsWith(pkey) || !unit.endsWith(suffix)) continue;
        let name = unit.slice(pkey.length);
        if (suffix) {
          name = name.slice(0, name.length - suffix.length);
          if ([...name].length === 1) continue;
        }
        const d = this.units.get(name);
        if (d) found.set(`${p.name}\u0000${d.name}`, [p.name, d.name]);
      }
    for (const [p, u] of [...found.values()]) if (p) found.delete(`\u0000${p}${u}`);
    return [...found.values()];
  }

  /** get_name: the canonical name (prefix + unit), defining the prefixed unit as pint does. */
  private getName(name: string): string {
    if (name === 'dimensionless') return '';
    const known = this.units.get(name);
    if (known) return known.name;
    const candidates = this.parseUnitName(name);
    if (!candidates.length) throw undefinedUnit(name);
    const [prefix, unit] = candidates[0];
    if (!prefix) return unit;
    const full = prefix + unit;
    this.units.set(full, {
      name: full,
      scale: this.prefixes.get(prefix)!.scale,
      offset: null,
      kind: 'scale',
      ref: new Map([[unit, 1n]]),
      base: false,
    });
    return full;
  }

  private def(name: string): UnitDef {
    const d = this.units.get(name)!;
    if (d.kind === 'log') throw notPorted(`pint's logarithmic unit '${d.name}'`);
    return d;
  }

  /** parse_units_as_container(as_delta=True) after the registry's "%" preprocessor. */
  parseUnits(input: string): Units {
    input = input.replaceAll('%', ' percent ');
    if (!input) return new Map();
    const ph = fromString(input.replace(PY_SPACE, ''));
    if (!numEq(ph.scale, 1n)) throw new PintException('ValueError', 'Unit expression cannot have a scaling factor.');
    let ret: Units = new Map();
    const many = ph.d.size > 1;
    for (const [name, value] of ph.d) {
      let cname = this.getName(name);
      if (!cname) continue;
      // A compound expression reads an offset unit as its delta (degC/s is delta_degree_Celsius/s).
      const kind = this.units.get(cname)!.kind;
      // pint would look for a delta_ logarithmic unit, which does not exist.
      if ((many || !numEq(value, 1n)) && kind === 'log') this.def(cname);
      if ((many || !numEq(value, 1n)) && kind === 'offset') cname = `delta_${cname}`;
      ret = ucAdd(ret, cname, value);
    }
    return ret;
  }

  private dimensionality(u: Units): Units {
    if (u.size === 0) return new Map();
    const key = ucKey(u);
    const hit = this.dimCache.get(key);
    if (hit) return hit;
    const acc = new Map<string, PyNum>();
    const walk = (ref: Units, exp: PyNum) => {
      for (const [k, v] of ref) {
        const e = mul(exp, v);
        if (isDim(k)) {
          const derived = this.derived.get(k);
          if (derived) walk(derived, e);
          else acc.set(k, add(acc.get(k) ?? 0n, e));
        } else {
          const d = this.units.get(this.getName(k))!;
          if (d.ref) walk(d.ref, e);
        }
      }
    };
    walk(u, 1n);
    acc.delete('[]');
    const dims = new Map([...acc].filter(([, v]) => !isZero(v)));
    this.dimCache.set(key, dims);
    return dims;
  }

  /** _get_root_units' factor: each non-base unit's scale ** exponent, multiplied in recursion order. */
  private rootFactor(u: Units): PyNum {
    if (u.size === 0) return 1n;
    const key = ucKey(u);
    const hit = this.rootCache.get(key);
    if (hit !== undefined) return hit;
    let factor: PyNum = 1n;
    const walk = (ref: Units, exp: PyNum) => {
      for (const [k, v] of ref) {
        const e = mul(exp, v);
        const d = this.def(this.getName(k));
        if (d.base) continue;
        factor = mul(factor, pyPow(d.scale, e));
        if (d.ref) walk(d.ref, e);
      }
    };
    walk(u, 1n);
    this.rootCache.set(key, factor);
    return factor;
  }

  /** PlainRegistry._convert: value * the cached (src, dst) factor, after the dimensionality check. */
  private convertPlain(value: PyNum, src: Units, dst: Units): PyNum {
    const key = `${ucKey(src)}\u0002${ucKey(dst)}`;
    let factor = this.factorCache.get(key);
    if (factor === undefined) {
      const ds = this.dimensionality(src);
      const dd = this.dimensionality(dst);
      if (!ucEq(ds, dd)) throw new DimensionalityError(src, dst, [ds, dd]);
      factor = this.rootFactor(ucDiv(src, dst));
      this.factorCache.set(key, factor);
    }
    return mul(value, factor);
  }

  /** NonMultiplicativeRegistry._validate_and_extract: the single offset unit, if any. */
  private offsetUnit(u: Units, side: string, src: Units, dst: Units): string | undefined {
    // Logarithmic units are non-multiplicative too: validated here like offset units.
    const offsets = [...u].filter(([k]) => this.units.get(k)!.kind !== 'scale');
    const fail = (msg: string) => new DimensionalityError(src, dst, undefined, ` - In ${side} units, ${msg}`);
    if (offsets.length > 1) throw fail('more than one offset unit.');
    if (offsets.length === 0) return undefined;
    const [name, exp] = offsets[0];
    if (!numEq(exp, 1n)) throw fail('offset units in higher order.');
    if (u.size > 1) throw fail('offset unit used in multiplicative context.');
    return name;
  }

  /** registry.convert: equal units return the value itself; offset units go through their reference. */
  convert(value: PyNum, src: Units, dst: Units): PyNum {
    if (ucEq(src, dst)) return value;
    const so = this.offsetUnit(src, 'source', src, dst);
    const dOff = this.offsetUnit(dst, 'destination', src, dst);
    if (!so && !dOff) return this.convertPlain(value, src, dst);
    const ds = this.dimensionality(src);
    const dd = this.dimensionality(dst);
    if (!ucEq(ds, dd)) throw new DimensionalityError(src, dst, [ds, dd]);
    // Up to here a logarithmic unit fails as upstream does; its log / exp conversion is not ported.
    if (so) this.def(so);
    if (dOff) this.def(dOff);
    const withRef = (u: Units, off: string) => {
      const rest = new Map(u);
      rest.delete(off);
      const ref = [...this.def(off).ref!];
      return ref.length ? ucAdd(rest, ...ref[ref.length - 1]) : rest;
    };
    if (so) {
      const d = this.def(so);
      value = add(mul(value, d.scale), d.offset!);
      src = withRef(src, so);
    }
    if (dOff) dst = withRef(dst, dOff);
    value = this.convertPlain(value, src, dst);
    if (dOff) {
      const d = this.def(dOff);
      value = truediv(sub(value, d.offset!), d.scale);
    }
    return value;
  }
}

let appRegistry: PintRegistry | undefined;
/** The process-wide registry the tool uses (pint's application registry). */
export const defaultRegistry = (): PintRegistry => (appRegistry ??= new PintRegistry());

/**
 * tools/utilities.py unit_conversion: `Quantity(amount, from_unit).to(to_unit).magnitude`, retried
 * with both unit strings lower-cased after an UndefinedUnitError (the retry's error is the one seen).
 */
export function unitConversion(amount: PyNum | boolean, from: string, to: string, reg = defaultRegistry()): PyNum {
  const run = (f: string, t: string): PyNum => {
    const src = reg.parseUnits(f);
    // Quantity(True, ...) parses its units, then _to_magnitude refuses a bool.
    if (typeof amount === 'boolean')
      throw new PintException('TypeError', `Invalid magnitude for Quantity: ${amount ? 'True' : 'False'}`);
    const dst = reg.parseUnits(t.replaceAll('%', ' percent '));
    if (ucEq(src, dst)) return amount;
    return reg.convert(amount, src, dst);
  };
  try {
    return run(from, to);
  } catch (e) {
    if (e instanceof PintException && e.pyType === 'pint.errors.UndefinedUnitError')
      return run(from.toLowerCase(), to.toLowerCase());
    throw e;
  }
}

/** repr() of the magnitude. */
export const magnitudeRepr = (v: PyNum): string => (isInt(v) ? String(v) : pyFloatRepr(v));
