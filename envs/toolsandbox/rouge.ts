/**
 * ROUGE-L F-measure as ToolSandbox computes it: `rouge_score.rouge_scorer.RougeScorer(["rougeL"],
 * use_stemmer=True)` (rouge-score 0.1.2), whose tokenizer lowercases, splits on anything not
 * [a-z0-9] and Porter-stems tokens longer than 3 characters with NLTK's PorterStemmer in its
 * default NLTK_EXTENSIONS mode (nltk/stem/porter.py). Both are re-implemented here from their
 * published behaviour; test/toolsandbox-evaluator.test.ts checks them against the Python packages.
 */

const VOWELS = new Set(['a', 'e', 'i', 'o', 'u']);

/** NLTK_EXTENSIONS irregular forms (PorterStemmer.__init__), looked up before any rule. */
const POOL: Record<string, string> = {
  sky: 'sky',
  skies: 'sky',
  dying: 'die',
  lying: 'lie',
  tying: 'tie',
  news: 'news',
  innings: 'inning',
  inning: 'inning',
  outings: 'outing',
  outing: 'outing',
  cannings: 'canning',
  canning: 'canning',
  howe: 'howe',
  proceed: 'proceed',
  exceed: 'exceed',
  succeed: 'succeed',
};

function isConsonant(w: string, i: number): boolean {
  if (VOWELS.has(w[i])) return false;
  if (w[i] === 'y') return i === 0 ? true : !isConsonant(w, i - 1);
  return true;
}

function measure(stem: string): number {
  let cv = '';
  for (let i = 0; i < stem.length; i++) cv += isConsonant(stem, i) ? 'c' : 'v';
  return cv.split('vc').length - 1;
}

const positive = (s: string): boolean => measure(s) > 0;
const gt1 = (s: string): boolean => measure(s) > 1;

function containsVowel(stem: string): boolean {
  for (let i = 0; i < stem.length; i++) if (!isConsonant(stem, i)) return true;
  return false;
}

function endsDoubleConsonant(w: string): boolean {
  return w.length >= 2 && w[w.length - 1] === w[w.length - 2] && isConsonant(w, w.length - 1);
}

function endsCvc(w: string): boolean {
  const n = w.length;
  return (
    (n >= 3 && isConsonant(w, n - 3) && !isConsonant(w, n - 2) && isConsonant(w, n - 1) && !'wxy'.includes(w[n - 1])) ||
    (n === 2 && !isConsonant(w, 0) && isConsonant(w, 1))
  );
}

type Rule = [suffix: string, replacement: string, condition: ((stem: string) => boolean) | null];

/** The first rule whose suffix matches decides: applied if its condition holds, else the word stays. */
function applyRules(word: string, rules: Rule[]): string {
  for (const [suffix, replacement, cond] of rules) {
    if (suffix === '*d' && endsDoubleConsonant(word)) {
      const stem = word.slice(0, -2);
      return !cond || cond(stem) ? stem + replacement : word;
    }
    if (word.endsWith(suffix)) {
      const stem = suffix ? word.slice(0, -suffix.length) : word;
      return !cond || cond(stem) ? stem + replacement : word;
    }
  }
  return word;
}

function step1a(w: string): string {
  if (w.endsWith('ies') && w.length === 4) return w.slice(0, -3) + 'ie';
  return applyRules(w, [
    ['sses', 'ss', null],
    ['ies', 'i', null],
    ['ss', 'ss', null],
    ['s', '', null],
  ]);
}

function step1b(w: string): string {
  if (w.endsWith('ied')) return w.slice(0, -3) + (w.length === 4 ? 'ie' : 'i');
  if (w.endsWith('eed')) {
    const stem = w.slice(0, -3);
    return measure(stem) > 0 ? stem + 'ee' : w;
  }
  let inter: string | undefined;
  for (const suffix of ['ed', 'ing']) {
    if (w.endsWith(suffix) && containsVowel(w.slice(0, -suffix.length))) {
      inter = w.slice(0, -suffix.length);
      break;
    }
  }
  if (inter === undefined) return w;
  const last = inter[inter.length - 1];
  return applyRules(inter, [
    ['at', 'ate', null],
    ['bl', 'ble', null],
    ['iz', 'ize', null],
    ['*d', last, () => !'lsz'.includes(last)],
    ['', 'e', (s) => measure(s) === 1 && endsCvc(s)],
  ]);
}

function step1c(w: string): string {
  return applyRules(w, [['y', 'i', (s) => s.length > 1 && isConsonant(s, s.length - 1)]]);
}

function step2(w: string): string {
  if (w.endsWith('alli') && positive(w.slice(0, -4))) return step2(w.slice(0, -4) + 'al');
  return applyRules(w, [
    ['ational', 'ate', positive],
    ['tional', 'tion', positive],
    ['enci', 'ence', positive],
    ['anci', 'ance', positive],
    ['izer', 'ize', positive],
    ['bli', 'ble', positive],
    ['alli', 'al', positive],
    ['entli', 'ent', positive],
    ['eli', 'e', positive],
    ['ousli', 'ous', positive],
    ['ization', 'ize', positive],
    ['ation', 'ate', positive],
    ['ator', 'ate', positive],
    ['alism', 'al', positive],
    ['iveness', 'ive', positive],
    ['fulness', 'ful', positive],
    ['ousness', 'ous', positive],
    ['aliti', 'al', positive],
    ['iviti', 'ive', positive],
    ['biliti', 'ble', positive],
    ['fulli', 'ful', positive],
    // NLTK keeps the 'l' of 'logi' with the stem for the measure, so 'geo'/'theo' behave like 'archaeo'.
    ['logi', 'log', () => positive(w.slice(0, -3))],
  ]);
}

function step3(w: string): string {
  return applyRules(w, [
    ['icate', 'ic', positive],
    ['ative', '', positive],
    ['alize', 'al', positive],
    ['iciti', 'ic', positive],
    ['ical', 'ic', positive],
    ['ful', '', positive],
    ['ness', '', positive],
  ]);
}

function step4(w: string): string {
  return applyRules(w, [
    ['al', '', gt1],
    ['ance', '', gt1],
    ['ence', '', gt1],
    ['er', '', gt1],
    ['ic', '', gt1],
    ['able', '', gt1],
    ['ible', '', gt1],
    ['ant', '', gt1],
    ['ement', '', gt1],
    ['ment', '', gt1],
    ['ent', '', gt1],
    ['ion', '', (s) => measure(s) > 1 && (s.endsWith('s') || s.endsWith('t'))],
    ['ou', '', gt1],
    ['ism', '', gt1],
    ['ate', '', gt1],
    ['iti', '', gt1],
    ['ous', '', gt1],
    ['ive', '', gt1],
    ['ize', '', gt1],
  ]);
}

function step5a(w: string): string {
  if (w.endsWith('e')) {
    const stem = w.slice(0, -1);
    if (measure(stem) > 1) return stem;
    if (measure(stem) === 1 && !endsCvc(stem)) return stem;
  }
  return w;
}

function step5b(w: string): string {
  return applyRules(w, [['ll', 'l', () => measure(w.slice(0, -1)) > 1]]);
}

/** nltk PorterStemmer(mode=NLTK_EXTENSIONS).stem(word). */
export function porterStem(word: string): string {
  const lower = word.toLowerCase();
  if (word in POOL) return POOL[lower];
  if (word.length <= 2) return lower;
  return step5b(step5a(step4(step3(step2(step1c(step1b(step1a(lower))))))));
}

/** rouge_score.tokenize.tokenize(text, stemmer) with the Porter stemmer. */
export function rougeTokens(text: string): string[] {
  return text
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, ' ')
    .split(/\s+/)
    .map((t) => (t.length > 3 ? porterStem(t) : t))
    .filter((t) => /^[a-z0-9]+$/.test(t));
}

/** Length of the longest common subsequence (the rouge_score `_lcs_table` recurrence). */
export function lcsLength(a: readonly string[], b: readonly string[]): number {
  let prev = new Array<number>(b.length + 1).fill(0);
  for (let i = 1; i <= a.length; i++) {
    const cur = new Array<number>(b.length + 1).fill(0);
    for (let j = 1; j <= b.length; j++)
      cur[j] = a[i - 1] === b[j - 1] ? prev[j - 1] + 1 : Math.max(prev[j], cur[j - 1]);
    prev = cur;
  }
  return prev[b.length];
}

/** `scorer.score(target, prediction)["rougeL"].fmeasure`: 0 when either side has no tokens. */
export function rougeLFmeasure(target: string, prediction: string): number {
  const t = rougeTokens(target);
  const p = rougeTokens(prediction);
  if (!t.length || !p.length) return 0;
  const lcs = lcsLength(t, p);
  const precision = lcs / p.length;
  const recall = lcs / t.length;
  return precision + recall > 0 ? (2 * precision * recall) / (precision + recall) : 0;
}
