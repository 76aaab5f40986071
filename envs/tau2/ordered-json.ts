/**
 * JSON parsing that keeps object key order. `JSON.parse` moves integer-like keys (retail product and
 * item ids such as "1008292230") to the front, which would change tau2's iteration and output order;
 * here every object becomes a Map in document order.
 */
export type JsonTree = null | boolean | number | string | JsonTree[] | Map<string, JsonTree>;

export function parseOrderedJson(text: string, source = 'json'): JsonTree {
  let i = 0;
  const fail = (what: string): never => {
    throw new Error(`${source}: invalid JSON at offset ${i}: ${what}`);
  };
  const ws = () => {
    for (;;) {
      const c = text.charCodeAt(i);
      if (c === 32 || c === 10 || c === 13 || c === 9) i++;
      else return;
    }
  };
  const str = (): string => {
    const start = ++i;
    for (;;) {
      const c = text.charCodeAt(i);
      if (c === 34) break;
      if (c === 92) return strSlow(start);
      if (Number.isNaN(c)) fail('unterminated string');
      i++;
    }
    return text.slice(start, i++);
  };
  const strSlow = (start: number): string => {
    while (i < text.length) {
      const c = text.charCodeAt(i);
      if (c === 92) i += 2;
      else if (c === 34) break;
      else i++;
    }
    if (i >= text.length) fail('unterminated string');
    const raw = text.slice(start - 1, ++i);
    return JSON.parse(raw) as string;
  };
  const value = (): JsonTree => {
    ws();
    const c = text[i];
    if (c === '{') {
      i++;
      const m = new Map<string, JsonTree>();
      ws();
      if (text[i] === '}') {
        i++;
        return m;
      }
      for (;;) {
        ws();
        if (text[i] !== '"') fail('expected key');
        const k = str();
        ws();
        if (text[i++] !== ':') fail("expected ':'");
        m.set(k, value());
        ws();
        const d = text[i++];
        if (d === '}') return m;
        if (d !== ',') fail("expected ',' or '}'");
      }
    }
    if (c === '[') {
      i++;
      const a: JsonTree[] = [];
      ws();
      if (text[i] === ']') {
        i++;
        return a;
      }
      for (;;) {
        a.push(value());
        ws();
        const d = text[i++];
        if (d === ']') return a;
        if (d !== ',') fail("expected ',' or ']'");
      }
    }
    if (c === '"') return str();
    if (text.startsWith('true', i)) return ((i += 4), true);
    if (text.startsWith('false', i)) return ((i += 5), false);
    if (text.startsWith('null', i)) return ((i += 4), null);
    const m = /-?\d+(\.\d+)?([eE][+-]?\d+)?/y;
    m.lastIndex = i;
    const hit = m.exec(text);
    if (!hit) fail('unexpected character');
    i += hit![0].length;
    return Number(hit![0]);
  };
  const out = value();
  ws();
  if (i !== text.length) fail('trailing characters');
  return out;
}
