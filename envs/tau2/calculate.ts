import { pyFloatRepr, pyRound2 } from './python-format.js';

/**
 * tau2's `calculate` tool: `str(round(float(eval(expression)), 2))` over the characters
 * `0-9 + - * / ( ) . space`. This evaluates the same Python expression subset (ints and floats,
 * unary +/-, + - * / // **, parentheses) with Python's precedence and error messages.
 */
export function calculate(expression: string): string {
  if (![...expression].every((c) => '0123456789+-*/(). '.includes(c)))
    throw new Error('Invalid characters in expression');
  return pyFloatRepr(pyRound2(evaluate(expression).v));
}

interface Num {
  v: number;
  float: boolean;
}

function evaluate(src: string): Num {
  const tokens = src.match(/\d+\.\d*|\.\d+|\d+|\*\*|\/\/|[-+*/()]|\S/g) ?? [];
  if (!tokens.length) throw new Error('invalid syntax (<string>, line 0)');
  let depth = 0;
  for (const t of tokens) {
    depth += t === '(' ? 1 : t === ')' ? -1 : 0;
    if (depth < 0) throw new Error("unmatched ')' (<string>, line 1)");
  }
  if (depth > 0) throw new Error("'(' was never closed (<string>, line 1)");
  let i = 0;
  const syntax = (): never => {
    throw new Error('invalid syntax (<string>, line 1)');
  };
  const peek = () => tokens[i];
  const expr = (): Num => {
    let a = term();
    while (peek() === '+' || peek() === '-') {
      const op = tokens[i++];
      const b = term();
      a = { v: op === '+' ? a.v + b.v : a.v - b.v, float: a.float || b.float };
    }
    return a;
  };
  const term = (): Num => {
    let a = unary();
    while (peek() === '*' || peek() === '/' || peek() === '//') {
      const op = tokens[i++];
      const b = unary();
      const float = a.float || b.float;
      if (op === '*') a = { v: a.v * b.v, float };
      else if (op === '/') {
        if (b.v === 0) throw new Error(float ? 'float division by zero' : 'division by zero');
        a = { v: a.v / b.v, float: true };
      } else {
        if (b.v === 0) throw new Error(float ? 'float floor division by zero' : 'integer division or modulo by zero');
        a = { v: Math.floor(a.v / b.v), float };
      }
    }
    return a;
  };
  const unary = (): Num => {
    if (peek() === '-' || peek() === '+') {
      const op = tokens[i++];
      const a = unary();
      return op === '-' ? { v: -a.v, float: a.float } : a;
    }
    return power();
  };
  const power = (): Num => {
    const base = atom();
    if (peek() !== '**') return base;
    i++;
    const exp = unary();
    if (base.v === 0 && exp.v < 0) throw new Error('0.0 cannot be raised to a negative power');
    return { v: base.v ** exp.v, float: base.float || exp.float || exp.v < 0 };
  };
  const atom = (): Num => {
    const t = tokens[i++];
    if (t === undefined) return syntax();
    if (t === '(') {
      const a = expr();
      if (tokens[i++] !== ')') syntax();
      return a;
    }
    if (/^[\d.]/.test(t)) {
      if (/^0\d/.test(t) && !t.includes('.') && !/^0+$/.test(t)) {
        throw new Error(
          'leading zeros in decimal integer literals are not permitted; use an 0o prefix for octal integers (<string>, line 1)',
        );
      }
      return { v: Number(t), float: t.includes('.') };
    }
    return syntax();
  };
  const out = expr();
  if (i !== tokens.length) syntax();
  return out;
}
