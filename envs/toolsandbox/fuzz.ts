/**
 * The fuzzy string matching ToolSandbox's search tools use: rapidfuzz 3.9.3's `fuzz.WRatio` with
 * `utils.default_process`, picked by `process.extract` (tool_sandbox/common/utils.py
 * fuzzy_match_filter_dataframe), and `fuzz.partial_ratio` (utilities.search_holiday). Re-implemented
 * from rapidfuzz's documented algorithm (its pure-Python fallback, MIT licence, Max Bachmann) and
 * checked against the compiled rapidfuzz upstream runs (test/fixtures/toolsandbox/fuzzy-expected.json).
 * Strings are compared as sequences of code points, as Python's str is.
 */

const chars = (s: string): string[] => Array.from(s);

/** utils.default_process: every non-alphanumeric code point (underscore too) becomes a space, trimmed, lower-cased. */
export function defaultProcess(s: string): string {
  return s
    .replace(/[^\p{L}\p{N}]/gu, ' ')
    .trim()
    .toLowerCase();
}

/** Length of the longest common subsequence (the Indel distance is len1 + len2 - 2 LCS). */
function lcs(a: string[], b: string[]): number {
  if (!a.length || !b.length) return 0;
  let prev = new Array<number>(b.length + 1).fill(0);
  let cur = new Array<number>(b.length + 1).fill(0);
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++)
      cur[j] = a[i - 1] === b[j - 1] ? prev[j - 1] + 1 : Math.max(prev[j], cur[j - 1]);
    [prev, cur] = [cur, prev];
  }
  return prev[b.length];
}

/** Indel normalized similarity in [0, 1]: 1 - dist / (len1 + len2), computed in that order. */
function indelSimilarity(a: string[], b: string[]): number {
  const lensum = a.length + b.length;
  if (!lensum) return 1;
  const dist = lensum - 2 * lcs(a, b);
  return 1 - dist / lensum;
}

/** fuzz.ratio on already processed strings. */
export function ratio(s1: string, s2: string): number {
  return indelSimilarity(chars(s1), chars(s2)) * 100;
}

/** _norm_distance: 100 - 100 * dist / lensum (a different rounding from ratio's, kept as rapidfuzz has it). */
const normDistance = (dist: number, lensum: number): number => (lensum ? 100 - (100 * dist) / lensum : 100);

/** _partial_ratio_short_needle: the best window of `longer` against `shorter` (windows ending or starting in a shared character). */
function partialShortNeedle(s1: string[], s2: string[]): number {
  const set = new Set(s1);
  const len1 = s1.length;
  const len2 = s2.length;
  let best = 0;
  const consider = (window: string[]): boolean => {
    const r = indelSimilarity(s1, window);
    if (r > best) best = r;
    return best === 1;
  };
  for (let i = 1; i < len1; i++) {
    if (!set.has(s2[i - 1])) continue;
    if (consider(s2.slice(0, i))) return 100;
  }
  for (let i = 0; i < len2 - len1; i++) {
    if (!set.has(s2[i + len1 - 1])) continue;
    if (consider(s2.slice(i, i + len1))) return 100;
  }
  for (let i = Math.max(len2 - len1, 0); i < len2; i++) {
    if (!set.has(s2[i])) continue;
    if (consider(s2.slice(i))) return 100;
  }
  return best * 100;
}

/** fuzz.partial_ratio on already processed strings. */
export function partialRatio(a: string, b: string): number {
  const s1 = chars(a);
  const s2 = chars(b);
  if (!s1.length && !s2.length) return 100;
  const [shorter, longer] = s1.length <= s2.length ? [s1, s2] : [s2, s1];
  let score = partialShortNeedle(shorter, longer);
  if (score !== 100 && s1.length === s2.length) score = Math.max(score, partialShortNeedle(longer, shorter));
  return score;
}

/** str.split(): runs of whitespace separate, empty tokens dropped. */
const split = (s: string): string[] => s.split(/\s+/u).filter(Boolean);
/** sorted() of Python strings: by code point. */
const sortPy = (xs: Iterable<string>): string[] =>
  [...xs].sort((x, y) => {
    const a = chars(x);
    const b = chars(y);
    for (let i = 0; i < Math.min(a.length, b.length); i++)
      if (a[i] !== b[i]) return a[i].codePointAt(0)! - b[i].codePointAt(0)!;
    return a.length - b.length;
  });
const joinLen = (xs: Iterable<string>): number => chars([...xs].join(' ')).length;

function tokenSortRatio(s1: string, s2: string): number {
  return ratio(sortPy(split(s1)).join(' '), sortPy(split(s2)).join(' '));
}

function tokenSetRatio(s1: string, s2: string): number {
  const a = new Set(split(s1));
  const b = new Set(split(s2));
  if (!a.size || !b.size) return 0;
  const sect = [...a].filter((t) => b.has(t));
  const ab = sortPy([...a].filter((t) => !b.has(t)));
  const ba = sortPy([...b].filter((t) => !a.has(t)));
  if (sect.length && (!ab.length || !ba.length)) return 100;
  const abJoined = ab.join(' ');
  const baJoined = ba.join(' ');
  const abLen = chars(abJoined).length;
  const baLen = chars(baJoined).length;
  const sectLen = joinLen(sect);
  const sep = sectLen !== 0 ? 1 : 0;
  const sectAbLen = sectLen + sep + abLen;
  const sectBaLen = sectLen + sep + baLen;
  const dist = abLen + baLen - 2 * lcs(chars(abJoined), chars(baJoined));
  const result = normDistance(dist, sectAbLen + sectBaLen);
  if (!sectLen) return result;
  return Math.max(
    result,
    normDistance(sep + abLen, sectLen + sectAbLen),
    normDistance(sep + baLen, sectLen + sectBaLen),
  );
}

const tokenRatio = (s1: string, s2: string): number => Math.max(tokenSetRatio(s1, s2), tokenSortRatio(s1, s2));

function partialTokenRatio(s1: string, s2: string): number {
  const splitA = split(s1);
  const splitB = split(s2);
  const a = new Set(splitA);
  const b = new Set(splitB);
  if ([...a].some((t) => b.has(t))) return 100;
  const ab = [...a].filter((t) => !b.has(t));
  const ba = [...b].filter((t) => !a.has(t));
  const result = partialRatio(sortPy(splitA).join(' '), sortPy(splitB).join(' '));
  if (splitA.length === ab.length && splitB.length === ba.length) return result;
  return Math.max(result, partialRatio(sortPy(ab).join(' '), sortPy(ba).join(' ')));
}

/** fuzz.WRatio(a, b, processor=utils.default_process). */
export function wratio(a: string, b: string): number {
  const s1 = defaultProcess(a);
  const s2 = defaultProcess(b);
  if (!s1 || !s2) return 0;
  const UNBASE_SCALE = 0.95;
  const len1 = chars(s1).length;
  const len2 = chars(s2).length;
  const lenRatio = len1 > len2 ? len1 / len2 : len2 / len1;
  let end = ratio(s1, s2);
  if (lenRatio < 1.5) return Math.max(end, tokenRatio(s1, s2) * UNBASE_SCALE);
  const PARTIAL_SCALE = lenRatio < 8.0 ? 0.9 : 0.6;
  end = Math.max(end, partialRatio(s1, s2) * PARTIAL_SCALE);
  return Math.max(end, partialTokenRatio(s1, s2) * UNBASE_SCALE * PARTIAL_SCALE);
}

/**
 * process.extract(query, choices, processor=default_process, scorer=WRatio, score_cutoff) with its
 * default limit of 5: [score, index] of the choices scoring at least the cutoff (None choices are
 * skipped), best first, ties by index. Only five rows ever come back from a fuzzy search upstream.
 */
export function extract(
  query: string | null,
  choices: (string | null)[],
  cutoff: number,
  limit = 5,
): [number, number][] {
  if (query === null) return [];
  const out: [number, number][] = [];
  choices.forEach((c, i) => {
    if (c === null) return;
    const s = wratio(query, c);
    if (s >= cutoff) out.push([s, i]);
  });
  out.sort((x, y) => y[0] - x[0] || x[1] - y[1]);
  return out.slice(0, limit);
}
