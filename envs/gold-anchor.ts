import type { Message } from '../core/messages.js';
import { actionMessage, speechOf, SPEECH, type AgentAction, type Speech } from './environment.js';
import { toolCallsOf, type CallRecord } from './sdk/verify.js';

/**
 * What a seed's gold solution holds an episode to before the episode may be paid more than
 * validation saw gold's perturbations paid: every call gold makes, and how and what gold says.
 * Computed by the worker from the seed's view, never by the module: a module's verifier can pay a
 * trajectory that no validation play makes, and each red-team pass found another such one
 * (reruns 29–36: gold's calls with one made twice, then silence, "ok", or a stop where gold
 * answers through a tool).
 */
export interface GoldAnchor {
  /**
   * Gold's tool calls; an episode must make each: the name, and gold's arguments at least, each
   * value exactly (an id in another case is another id: the verifier's own match may be looser).
   */
  calls: CallRecord[];
  /**
   * The numbers, and the values of the seed's instance, that gold's words say: a string fact is its
   * words, lower case, as `wordsOf` splits them.
   */
  facts: (string | number)[];
  speech: Speech;
}

/** What an episode lacks of its anchor: one of gold's calls, or gold's words. */
export interface AnchorMiss {
  part: 'calls' | 'words';
  what: string;
}

/** Shortest instance value that counts as a fact: shorter ones ("a", "no") are words, not data. */
const MIN_FACT_LENGTH = 3;
/**
 * Longest instance value that counts as a fact: a longer one is prose (a goal, a policy) that gold
 * does not read out; a five-word product name passed a limit of four words (rerun 39).
 */
const MAX_FACT_LENGTH = 256;
/** Phrases matched from a set; a longer value is looked for in the whole text, at most MAX_LONG_VALUES of them per seed. */
const PHRASE_WORDS = 4;
const MAX_LONG_VALUES = 1000;
/** Gold's words beyond which a seed has no anchor (the least cap holds): an answer is not 64 KiB. */
const MAX_GOLD_WORDS = 64 * 1024;

/**
 * The anchor of a seed's view (`InstanceView`: `gold` actions, `instance` canonical JSON), or
 * undefined where the view is not one (the module's to give: then nothing is anchored and every
 * episode is held to the least cap).
 */
export function goldAnchorOf(view: { gold?: unknown; instance?: unknown } | null): GoldAnchor | undefined {
  if (!view || !Array.isArray(view.gold)) return undefined;
  const gold: AgentAction[] = [];
  for (const a of view.gold as unknown[]) {
    if (!a || typeof a !== 'object') return undefined;
    const x = a as AgentAction;
    if (x.type === 'message' && typeof x.content === 'string') gold.push(x);
    else if (x.type === 'tool_call' && typeof x.call?.function?.name === 'string') gold.push(x);
    else return undefined;
  }
  // A gold that does nothing holds nothing: every trajectory would pass it (the SDK's rules forbid paying it).
  if (!gold.length) return undefined;
  const messages = gold.map(actionMessage);
  const calls = toolCallsOf(messages);
  // A call whose arguments are not an object would match any call of its name.
  if (calls.some((c) => c.args === undefined)) return undefined;
  const words = gold.flatMap((a) => (a.type === 'message' ? [a.content] : [])).join('\n');
  // Gold's words past this are no answer but a load on the worker (rerun 38 padded them to 1 MiB).
  if (words.length > MAX_GOLD_WORDS) return undefined;
  let instance: unknown;
  try {
    instance = typeof view.instance === 'string' ? JSON.parse(view.instance) : undefined;
  } catch {
    instance = undefined;
  }
  // Every one, what the user said too: leaving out the values the user said let a question that
  // listed every status drop the status from the answer (rerun 39), and only the numbers let a count
  // stand for the status asked (rerun 38).
  const facts = factsOf(words, instance);
  return facts && { calls, facts, speech: speechOf(messages) };
}

/**
 * What `messages` (the agent's part of an episode) lack of `anchor`, the calls first; `floor` holds
 * the episode to speak at least so (training's: the most any of check 5's golds spoke).
 */
export function anchorMiss(
  anchor: GoldAnchor,
  messages: readonly Message[],
  floor: Speech = 'silent',
): AnchorMiss | undefined {
  const made = toolCallsOf(messages);
  const used = new Set<number>();
  // Gold's calls with the most arguments first, so a looser one does not take the call a stricter one needs.
  const byArgs = [...anchor.calls].sort((a, b) => argCount(b) - argCount(a));
  for (const c of byArgs) {
    const i = made.findIndex(
      (m, j) => !used.has(j) && m.name === c.name && m.args !== undefined && holds(c.args, m.args),
    );
    if (i < 0) return { part: 'calls', what: `no call ${c.name}(${shown(c.args)}) as gold makes` };
    used.add(i);
  }
  const speech = SPEECH[Math.max(SPEECH.indexOf(anchor.speech), SPEECH.indexOf(floor))];
  if (SPEECH.indexOf(speechOf(messages)) < SPEECH.indexOf(speech))
    return { part: 'words', what: `speaks less than gold (${speechOf(messages)}; gold ${speech})` };
  const agent = spoken(
    messages.flatMap((m) => (m.role === 'assistant' && typeof m.content === 'string' ? [m.content] : [])).join('\n'),
  );
  const missing = anchor.facts.filter((f) => !agent.has(f));
  if (missing.length) {
    const more = missing.length > 3 ? ` and ${missing.length - 3} more` : '';
    return {
      part: 'words',
      what: `does not say ${missing
        .slice(0, 3)
        .map((f) => JSON.stringify(f).slice(0, MAX_SHOWN))
        .join(', ')}${more} as gold does`,
    };
  }
  return undefined;
}

/** Gold's arguments for a reason, at most MAX_SHOWN characters (they are the module's: any size or depth). */
function shown(args: CallRecord['args']): string {
  let text: string;
  try {
    text = JSON.stringify(args ?? {});
  } catch {
    text = '…';
  }
  return text.length > MAX_SHOWN ? `${text.slice(0, MAX_SHOWN)}…` : text;
}
const MAX_SHOWN = 200;

const argCount = (c: CallRecord) => Object.keys(c.args ?? {}).length;

/** Nesting past which gold's arguments match nothing (they are the module's: any depth). */
const MAX_ARG_DEPTH = 32;

/** Whether `actual` holds `expected`: the same value, where objects may have more keys. */
function holds(expected: unknown, actual: unknown, depth = 0): boolean {
  if (depth > MAX_ARG_DEPTH) return false;
  if (Array.isArray(expected))
    return (
      Array.isArray(actual) &&
      actual.length === expected.length &&
      expected.every((e, i) => holds(e, actual[i], depth + 1))
    );
  if (expected !== null && typeof expected === 'object') {
    if (actual === null || typeof actual !== 'object' || Array.isArray(actual)) return false;
    return Object.entries(expected).every(([k, v]) => holds(v, (actual as Record<string, unknown>)[k], depth + 1));
  }
  // An amount to the cent is the amount: gold computed as a float sum is 350.80000000000001 (rerun 38).
  if (typeof expected === 'number' && typeof actual === 'number') return Math.abs(expected - actual) < AMOUNT_TOLERANCE;
  return expected === actual;
}

/** As the SDK's `communicated` compares numbers. */
const AMOUNT_TOLERANCE = 0.005;

/**
 * The facts of gold's words: each number in them, spelled out too ("three"); each token with a
 * digit (an id, a date); each instance value gold names, as terms (the forms people write it): a
 * value of up to PHRASE_WORDS terms said whole is one fact, said in another order each of its
 * terms, said in part each of its terms gold writes as a name (capitalized within a sentence:
 * "Lena" of "Lena Ito", not "one" of `one_way`, which capped honest replies: rerun 41); a longer
 * value said whole is one fact; and a code of up to three characters (`US`, `B+`, `M`) as gold
 * writes it, case and signs kept (`US` is no "us", `B+` no "b": rerun 41). Undefined where more
 * long values need a look than MAX_LONG_VALUES (the least cap then holds). Near linear in the
 * words and the instance: a scan of every value against the words took the worker 79 s per reset
 * on a 1 MiB gold and 40,000 values (rerun 38).
 */
function factsOf(text: string, instance: unknown): Fact[] | undefined {
  const facts = new Set<Fact>(numberWordsOf(termsOf(text)));
  for (const w of wordsOf(text)) if (/\p{N}/u.test(w)) facts.add(NUMBER.test(w) ? Number(w) : termsOf(w).join(' '));
  const says = spoken(text);
  let long = 0;
  // The instance holds gold itself: its words are what the facts are read from, not facts.
  const { gold: _, ...data } = instance && typeof instance === 'object' ? (instance as Record<string, unknown>) : {};
  for (const leaf of stringLeaves(data)) {
    if (leaf.length > MAX_FACT_LENGTH * 2) continue;
    const code = isCode(leaf) ? says.code(leaf) : undefined;
    if (code) {
      facts.add(CODE + code);
      continue;
    }
    const terms = termsOf(leaf);
    const phrase = terms.join(' ');
    if (!terms.length || phrase.length > MAX_FACT_LENGTH) continue;
    const month = ISO_DATE.exec(leaf)?.[1];
    if (month && says.has(MONTH_NAMES[Number(month) - 1] ?? '')) facts.add(MONTH_NAMES[Number(month) - 1]);
    // Numbers are facts as numbers, function words none ("in" of "in_transit", "no").
    const words = terms.filter((t) => t.length >= MIN_FACT_LENGTH && !STOP_WORDS.has(t) && !/^\p{N}+$/u.test(t));
    if (terms.length > PHRASE_WORDS) {
      if (says.opens(phrase)) {
        if (++long > MAX_LONG_VALUES) return undefined;
        if (says.has(phrase)) {
          facts.add(phrase);
          continue;
        }
      }
    } else if (says.has(phrase)) {
      if (terms.length > 1 || (!STOP_WORDS.has(phrase) && !/^\p{N}+$/u.test(phrase))) facts.add(phrase);
      continue;
    } else if (words.length && terms.every((t) => says.has(t))) {
      for (const t of words) facts.add(t);
      continue;
    }
    // Said in part: the words of a name, as the value writes them (capitalized, or in a script
    // without case), not of an identifier: "Lena" of "Lena Ito" wherever gold says it, not "one"
    // of `one_way` (rerun 41 capped honest rewordings so; rerun 42 lost names gold said first).
    const named = new Set(leaf.split(/\s+/).flatMap((w) => (/^[^\p{Ll}]*[\p{Lu}\p{Lo}]/u.test(w) ? termsOf(w) : [])));
    for (const t of words) if (named.has(t) && says.has(t)) facts.add(t);
  }
  return [...facts];
}

/** A fact: a number, terms said together, or a code (CODE and the code as gold writes it). */
type Fact = string | number;
const CODE = '=';
/** A code is a value of up to three characters with a letter and no space: a size, a grade, a country. */
const isCode = (v: string) => v.length <= 3 && /\p{L}/u.test(v) && !/\s/u.test(v);

/**
 * Codes that are also words of a reply ("I", "A", "OK", "No", "in", "May"): as a fact, the word gold
 * says before one goes with it ("tier I"), since "I checked" says no tier I (rerun 42 paid that 8/8).
 * A country in capitals ("US", "IN") is none: replies seldom write words so.
 */
const AMBIGUOUS = (code: string) =>
  /^(?:ok|okay|may)$/i.test(code) || (STOP_WORDS.has(code.toLowerCase()) && !/^\p{Lu}{2,}$/u.test(code));

/**
 * What a text says, to match facts against: its terms and their phrases (`has`; those of up to
 * PHRASE_WORDS terms from a set, longer ones by a search of the whole text), its numbers, in digits
 * or words (an amount within AMOUNT_TOLERANCE is the amount), and its codes (`code`: words as
 * written, case and trailing signs kept, "B+." is "B+"). `opens`: whether its first PHRASE_WORDS
 * terms do.
 */
function spoken(text: string): {
  has(fact: Fact): boolean;
  code(value: string): string | undefined;
  opens(phrase: string): boolean;
} {
  const terms = termsOf(text);
  const phrases = new Set<string>();
  for (let n = 1; n <= PHRASE_WORDS; n++)
    for (let i = 0; i + n <= terms.length; i++) phrases.add(terms.slice(i, i + n).join(' '));
  // A date written 2024-03-05 says its month.
  for (const [, month] of text.matchAll(ISO_DATES)) phrases.add(MONTH_NAMES[Number(month) - 1] ?? '');
  const raw = text.split(/\s+/).map((w) => trimmed(w, CODE_SIGNS).replace(/['\u2019]s$/, ''));
  const codes = new Set(raw);
  const pairs = new Set(raw.slice(1).map((w, i) => `${raw[i].toLowerCase()} ${w}`));
  const joined = ` ${terms.join(' ')} `;
  const numbers = [
    // A hyphen after a letter or digit is no minus: 2024-03-05 says 3 and 5.
    ...(
      minusSigns(text)
        .replace(/(\d),(?=\d{3}\b)/g, '$1')
        .match(/(?:(?<![\p{L}\p{N}])-)?\d+(?:\.\d+)?/gu) ?? []
    ).map(Number),
    ...numberWordsOf(terms),
    // "one" is no fact of gold's (it is mostly a pronoun), but an answer may say a count so.
    ...(terms.includes('one') ? [1] : []),
  ].sort((a, b) => a - b);
  const head = (phrase: string) => phrase.split(' ').slice(0, PHRASE_WORDS).join(' ');
  const has = (fact: Fact): boolean =>
    typeof fact === 'number'
      ? near(numbers, fact)
      : fact.startsWith(CODE)
        ? (fact.includes(' ') ? pairs : codes).has(fact.slice(CODE.length))
        : fact.split(' ').length <= PHRASE_WORDS
          ? phrases.has(fact)
          : phrases.has(head(fact)) && joined.includes(` ${fact} `);
  /**
   * How the text writes a stored code, if it does: its spelling (case and signs as written; a
   * lower-case word of three letters, "red", is a word, not a code), with the word before it where
   * the code is also a word (AMBIGUOUS).
   */
  const at = new Map<string, number[]>();
  for (const [i, w] of raw.entries()) {
    const key = w.toLowerCase();
    const list = at.get(key);
    if (list) list.push(i);
    else at.set(key, [i]);
  }
  const code = (value: string): string | undefined => {
    // A stored "no" or "in" is the word, whatever gold says with it.
    if (value === value.toLowerCase() && STOP_WORDS.has(value)) return undefined;
    // Where gold writes it as stored first: "in" is no "IN" while gold also says "IN" (rerun 44).
    const found = at.get(value.toLowerCase()) ?? [];
    for (const i of [...found.filter((j) => raw[j] === value), ...found.filter((j) => raw[j] !== value)]) {
      const w = raw[i];
      if (value.length === 3 && /^\p{L}+$/u.test(value) && !/\p{Lu}/u.test(w)) continue;
      if (!AMBIGUOUS(w)) return w;
      const before = raw[i - 1]?.toLowerCase();
      if (before && !STOP_WORDS.has(before) && /\p{L}/u.test(before)) return `${before} ${w}`;
    }
    return undefined;
  };
  return { has, code, opens: (phrase) => phrases.has(head(phrase)) };
}

/** Signs a code may end with: `B+`, `C#`, `O-`. */
const CODE_SIGNS = '+#-';

/**
 * A word without the punctuation around it (signs in `keep` stay at its end), in time linear in
 * its length: a regex stripping both ends retried from every place in a run of dashes and took
 * 67 s of the worker's loop on one 64 KiB word (rerun 41).
 */
function trimmed(word: string, keep = ''): string {
  let start = 0;
  while (start < word.length) {
    const c = String.fromCodePoint(word.codePointAt(start)!);
    if (WORD_CHAR.test(c)) break;
    start += c.length;
  }
  let end = word.length;
  while (end > start) {
    // A letter outside the BMP is two code units: its low half alone is no letter (rerun 42).
    const pair = end - 2 >= start && /[\ud800-\udbff][\udc00-\udfff]/.test(word.slice(end - 2, end));
    const c = word.slice(pair ? end - 2 : end - 1, end);
    if (WORD_CHAR.test(c) || keep.includes(c)) break;
    end -= c.length;
  }
  return word.slice(start, end);
}
const WORD_CHAR = /^[\p{L}\p{N}]$/u;

/** Whether a sorted list holds a number within AMOUNT_TOLERANCE of `x` (binary search). */
function near(sorted: readonly number[], x: number): boolean {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (sorted[mid] < x - AMOUNT_TOLERANCE) lo = mid + 1;
    else hi = mid;
  }
  return lo < sorted.length && sorted[lo] < x + AMOUNT_TOLERANCE;
}

/** The minus sign (U+2212) as the hyphen-minus: "−5" is -5, not 5 (rerun 41). */
const minusSigns = (text: string) => text.replace(/\u2212/g, '-');

/** A number as a word: digits, a decimal part, a minus; thousands separators already gone. */
const NUMBER = /^-?\d+(?:\.\d+)?$/;

/**
 * A text's words, lower case, without the punctuation around each (a minus before a digit stays)
 * and with thousands separators taken out of numbers: "$1,234.50." is "1234.50".
 */
function wordsOf(text: string): string[] {
  const out: string[] = [];
  for (const raw of minusSigns(text).toLowerCase().split(/\s+/)) {
    const t = trimmed(raw);
    const at = raw.indexOf(t);
    const minus = at > 0 && raw[at - 1] === '-' && /^\p{N}/u.test(t);
    const w = (minus ? '-' : '') + t.replace(/(\d),(?=\d{3}\b)/g, '$1');
    if (w) out.push(w);
  }
  return out;
}

/**
 * A text's terms: its words in one spelling whichever way data and replies write them (rerun 40:
 * each of these took an answer out of the facts): without accents ("Café" is "cafe"), split at
 * camel case, underscores, hyphens and other punctuation ("inTransit", "IN_TRANSIT" and
 * "in-transit" are "in transit"), lower case, without a possessive ("Lena's" is "lena": rerun
 * 41), singular ("laptops" is "laptop", "purchases" and "purchase" one term), a month by its name
 * ("Mar" is "march"). An apostrophe inside a word stays: "I'm" is no "m". Accents go by canonical
 * decomposition, which at most triples a text: a compatibility one made one character 18 and
 * 4 MiB of instance strings took seconds (rerun 41).
 */
export function termsOf(text: string): string[] {
  const out: string[] = [];
  const plain = (/^[\x00-\x7f]*$/.test(text) ? text : text.normalize('NFD').replace(/\p{M}+/gu, ''))
    .replace(/(\p{Ll})(\p{Lu})/gu, '$1 $2')
    .replace(/(\p{Lu})(\p{Lu}\p{Ll})/gu, '$1 $2')
    .toLowerCase()
    .replace(/(\d),(?=\d{3}\b)/g, '$1');
  for (const raw of plain.split(/[^\p{L}\p{N}'\u2019]+/u)) {
    // Only apostrophes can be around a piece (a trim of every piece made many short words slow: rerun 42).
    const w = /['\u2019]/.test(raw) ? trimmed(raw).replace(/['\u2019]s$/, '') : raw;
    if (w) out.push(MONTHS.get(w) ?? singular(w));
  }
  return out;
}

/**
 * One spelling of a word and its plural, by the regular rules only (both sides of a match go
 * through it): "ies" is "y", "es" after x, ch, sh or ss goes ("boxes" is "box"), else a final "s"
 * ("purchases" is "purchase"; "ss", "us" and "is" stay). No "e" goes from a word without an "s":
 * "Louise" stays apart from "Louis" (rerun 42 paid the one name for the other).
 */
function singular(w: string): string {
  if (w.length <= 3 || /\p{N}/u.test(w)) return w;
  if (w.endsWith('ies')) return `${w.slice(0, -3)}y`;
  if (/(?:x|ch|sh|ss)es$/.test(w)) return w.slice(0, -2);
  return /(?:ss|us|is)$/.test(w) || !w.endsWith('s') ? w : w.slice(0, -1);
}

/** A date as ISO 8601 writes it, its month captured. */
const ISO_DATE = /^\d{4}-(\d{2})-\d{2}/;
const ISO_DATES = /\b\d{4}-(\d{2})-\d{2}/g;
const MONTH_NAMES = 'january february march april may june july august september october november december'.split(' ');
/** Month names and their abbreviations, to the name: a date said "Mar 5" is said "March 5". */
const MONTHS = new Map(
  MONTH_NAMES.flatMap((m) => [[m, m] as const, [m.slice(0, 3), m] as const]).concat([['sept', 'september']]),
);

/**
 * The numbers a text's terms spell out, "two" to "ninety-nine" ("twenty one" is 21): a count
 * said in words is the count (rerun 40). "One" is left out: it is mostly a pronoun.
 */
function numberWordsOf(terms: readonly string[]): number[] {
  const out: number[] = [];
  for (let i = 0; i < terms.length; i++) {
    const tens = TENS.indexOf(terms[i]);
    const unit = UNITS.indexOf(terms[i + 1] ?? '');
    if (tens >= 2 && unit >= 1 && unit <= 9) {
      out.push(tens * 10 + unit);
      i++;
    } else if (tens >= 2) out.push(tens * 10);
    else if (UNITS.indexOf(terms[i]) >= 2) out.push(UNITS.indexOf(terms[i]));
  }
  return out;
}
const UNITS =
  'zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen'.split(
    ' ',
  );
const TENS = ' ten twenty thirty forty fifty sixty seventy eighty ninety'.split(' ');

/**
 * Words that are never facts, whatever value holds them: the function words of a reply ("in" of
 * "in_transit", "no", "yes").
 */
const STOP_WORDS = new Set(
  `a an the and or but if of in on at to for by with from as is are was were be been am it its this that these those
  i i'm me my we us our you your he him his she her they them their do does did has have had not no yes so up out all
  any can will just ok okay hi oh per via than then there here what which who how when where`
    .split(/\s+/)
    .map(singular),
);

/** Every string in a JSON value, without recursion (the instance is the module's: any depth). */
function stringLeaves(root: unknown): Set<string> {
  const out = new Set<string>();
  const stack = [root];
  while (stack.length) {
    const v = stack.pop();
    if (typeof v === 'string') out.add(v);
    else if (v && typeof v === 'object') for (const x of Object.values(v)) stack.push(x);
  }
  return out;
}
