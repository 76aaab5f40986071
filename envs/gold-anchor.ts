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
   * Each call's arguments as canonical text (`canonical`), and how many values they hold, made
   * once for the seed: made at every evaluate, 1.3 M empty objects in gold's arguments took
   * 250-520 ms each (rerun 86a).
   */
  canon: (string | undefined)[];
  values: number[];
  /** The calls' indexes, the most arguments first, so a looser one does not take the call a stricter one needs. */
  order: number[];
  /** The numbers, and the values of the seed's instance, that gold's words say (`Fact`). */
  facts: Fact[];
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
  // Gold's arguments past the values an episode is compared on are no anchor but a load.
  const budget = { left: MAX_COMPARED_VALUES };
  const values: number[] = [];
  const canon = calls.map((c) => {
    const before = budget.left;
    const text = canonical(c.args, budget);
    values.push(before - budget.left);
    return text;
  });
  if (budget.left < 0) return undefined;
  const order = calls.map((_, k) => k).sort((a, b) => argCount(calls[b]) - argCount(calls[a]));
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
  return facts && { calls, canon, values, order, facts, speech: speechOf(messages) };
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
  const budget = { left: MAX_COMPARED_VALUES };
  // A call made with gold's own arguments is taken first, compared whole once: an honest episode
  // making 60 calls of 30 line items in another order than gold spent the budget (rerun 62).
  const canon = made.map((m) => (m.args === undefined ? undefined : canonical(m.args, { left: Infinity })));
  for (const k of anchor.order) {
    const c = anchor.calls[k];
    const own = anchor.canon[k];
    let i = own === undefined ? -1 : made.findIndex((m, j) => !used.has(j) && m.name === c.name && canon[j] === own);
    // Each comparison spends gold's whole size first: one that stops at a key the call lacks still
    // walked gold's keys (rerun 87a: 200 000 of them, 8 calls of gold's tool, 1.5 s an evaluate).
    if (i < 0)
      i = made.findIndex(
        (m, j) =>
          !used.has(j) &&
          m.name === c.name &&
          m.args !== undefined &&
          (budget.left -= anchor.values[k]) >= 0 &&
          holds(c.args, m.args, budget),
      );
    // Gold's calls are the module's: 60 of arrays of 20 000 values, each unlike the next in its
    // last, took 1 s an episode and 8 s of the worker's loop a seed of check 5 (rerun 64b).
    if (budget.left < 0)
      return { part: 'calls', what: `gold's calls take more than ${MAX_COMPARED_VALUES} values to compare` };
    // Gold's name is the module's too: 3 MB of it passed into every capped reward's details (rerun 50b).
    if (i < 0) return { part: 'calls', what: `no call ${c.name.slice(0, MAX_SHOWN)}(${shown(own)}) as gold makes` };
    used.add(i);
  }
  const speech = SPEECH[Math.max(SPEECH.indexOf(anchor.speech), SPEECH.indexOf(floor))];
  if (SPEECH.indexOf(speechOf(messages)) < SPEECH.indexOf(speech))
    return { part: 'words', what: `speaks less than gold (${speechOf(messages)}; gold ${speech})` };
  const agent = spoken(
    messages.flatMap((m) => (m.role === 'assistant' && typeof m.content === 'string' ? [m.content] : [])).join('\n'),
    new Set(anchor.facts.flatMap((f) => (typeof f === 'string' && f.startsWith(HAN) ? [f.slice(HAN.length)] : []))),
  );
  const missing = anchor.facts.filter((f) => !agent.has(f));
  if (missing.length) {
    const more = missing.length > 3 ? ` and ${missing.length - 3} more` : '';
    return {
      part: 'words',
      what: `does not say ${missing
        .slice(0, 3)
        .map((f) =>
          JSON.stringify(typeof f === 'string' && TAGS.includes(f[0]) ? f.slice(1).split(WEAK)[0] : f).slice(
            0,
            MAX_SHOWN,
          ),
        )
        .join(', ')}${more} as gold does`,
    };
  }
  return undefined;
}

/**
 * Gold's arguments for a reason (their canonical text, made once a seed: rerun 87a stringified
 * 200 000 keys at every miss), at most MAX_SHOWN characters: they are the module's, any size or depth.
 */
function shown(canon: string | undefined): string {
  const text = canon ?? '…';
  return text.length > MAX_SHOWN ? `${text.slice(0, MAX_SHOWN)}…` : text;
}
const MAX_SHOWN = 200;

const argCount = (c: CallRecord) => Object.keys(c.args ?? {}).length;

/**
 * A JSON value's text with its keys in order, or undefined past MAX_ARG_DEPTH (then compared by
 * `holds`); each value spends `budget`.
 */
function canonical(value: unknown, budget: { left: number }, depth = 0): string | undefined {
  if (depth > MAX_ARG_DEPTH || --budget.left < 0) return undefined;
  if (Array.isArray(value)) {
    const items = value.map((v) => canonical(v, budget, depth + 1));
    return items.includes(undefined) ? undefined : `[${items.join(',')}]`;
  }
  if (value !== null && typeof value === 'object') {
    const entries = Object.keys(value)
      .sort()
      .map((k) => {
        const v = canonical((value as Record<string, unknown>)[k], budget, depth + 1);
        return v === undefined ? undefined : `${JSON.stringify(k)}:${v}`;
      });
    return entries.includes(undefined) ? undefined : `{${entries.join(',')}}`;
  }
  return JSON.stringify(value);
}

/** Nesting past which gold's arguments match nothing (they are the module's: any depth). */
const MAX_ARG_DEPTH = 32;

/**
 * Values compared between gold's calls and an episode's, at most: an honest gold's few calls of a
 * few values take thousands.
 */
const MAX_COMPARED_VALUES = 250_000;

/** Whether `actual` holds `expected`: the same value, where objects may have more keys; each value compared spends `budget`. */
function holds(expected: unknown, actual: unknown, budget: { left: number }, depth = 0): boolean {
  if (depth > MAX_ARG_DEPTH || --budget.left < 0) return false;
  if (Array.isArray(expected))
    return (
      Array.isArray(actual) &&
      actual.length === expected.length &&
      expected.every((e, i) => holds(e, actual[i], budget, depth + 1))
    );
  if (expected !== null && typeof expected === 'object') {
    if (actual === null || typeof actual !== 'object' || Array.isArray(actual)) return false;
    return Object.entries(expected).every(([k, v]) =>
      holds(v, (actual as Record<string, unknown>)[k], budget, depth + 1),
    );
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
 * value said whole is one fact; a name's terms keep a final "s"; a date's month where gold names
 * it; and a code of up to three characters (`US`, `B+`, `M`) as gold writes it, case and signs
 * kept (`US` is no "us", `B+` no "b": rerun 41). Undefined where more
 * long values need a look than MAX_LONG_VALUES (the least cap then holds). Near linear in the
 * words and the instance: a scan of every value against the words took the worker 79 s per reset
 * on a 1 MiB gold and 40,000 values (rerun 38).
 */
function factsOf(text: string, instance: unknown): Fact[] | undefined {
  const facts = new Set<Fact>(numberWordsOf(termsOf(text)));
  for (const w of wordsOf(text)) {
    if (!/\p{N}/u.test(w)) continue;
    // A number with its ordinal glued on is the number ("5th": a reply may write "5": rerun 56);
    // with a unit, the number and the word as written ("2.5kg" is 2.5 and "2 5kg": "Parcel 2 —
    // 5kg" had paid it: rerun 58).
    if (NUMBER.test(w)) facts.add(Number(w));
    else if (ORDINAL.test(w)) facts.add(Number(ORDINAL.exec(w)![1]));
    else {
      const unit = /^(-?\d+(?:\.\d+)?)\p{L}+$/u.exec(w);
      if (unit) facts.add(Number(unit[1]));
      facts.add(termsOf(w).join(' '));
    }
  }
  const says = spoken(text);
  // Built once: a gold of 6 500 weak "May"s over 40 000 May dates took 14.9 s (rerun 62).
  let weakMayFact: string | undefined;
  let long = 0;
  // The instance holds gold itself: its words are what the facts are read from, not facts.
  const { gold: _, ...data } = instance && typeof instance === 'object' ? (instance as Record<string, unknown>) : {};
  const leaves = [...stringLeaves(data)].filter((leaf) => leaf.length <= MAX_FACT_LENGTH * 2);
  const unfolded = leaves.map((leaf) => termsOf(leaf, false));
  const folded = unfolded.map((terms) => terms.map(singular));
  // Words the singular would merge with another word of the instance ("Lucas" and "Luca",
  // "Frances" and "France": rerun 44 paid the one for the other) are held as written.
  const firstForm = new Map<string, string>();
  const merged = new Set<string>();
  for (let n = 0; n < unfolded.length; n++)
    for (let k = 0; k < unfolded[n].length; k++) {
      const t = unfolded[n][k];
      const one = folded[n][k];
      const form = firstForm.get(one);
      if (form === undefined) firstForm.set(one, t);
      else if (form !== t) merged.add(one);
    }
  for (let n = 0; n < leaves.length; n++) {
    const leaf = leaves[n];
    const code = isCode(leaf) ? says.code(leaf) : undefined;
    if (code) {
      facts.add(CODE + code);
      continue;
    }
    // A name in Han characters, written without spaces ("王小明"), whole or its given name (rerun
    // 47), and of four, either half ("山田太郎", "欧阳娜娜": rerun 48). Nothing else reads more of
    // such a value: gold's words hold it only within a run of Han.
    // Characters, not UTF-16 units: "𠮷田太郎" is four (rerun 50).
    if (leaf.length <= 8 && leaf.charCodeAt(0) >= 0x2e80 && /^\p{Script=Han}{2,4}$/u.test(leaf)) {
      const chars = /[\ud800-\udfff]/.test(leaf) ? [...leaf] : undefined;
      const n = chars?.length ?? leaf.length;
      const part = (from: number, to?: number) => (chars ? chars.slice(from, to).join('') : leaf.slice(from, to));
      const han = [leaf, ...(n > 2 ? [part(1)] : []), ...(n === 4 ? [part(2), part(0, 2)] : [])].find((h) =>
        says.has(HAN + h),
      );
      if (han) facts.add(HAN + han);
      continue;
    }
    const month = ISO_DATE.exec(leaf)?.[1];
    const monthName = month && MONTH_NAMES[Number(month) - 1];
    if (monthName && says.has(MONTH + monthName)) facts.add(MONTH + monthName);
    else if (monthName === 'may' && says.weakMay.size)
      facts.add((weakMayFact ??= [MONTH + monthName, ...says.weakMay].join(WEAK)));
    const tag = folded[n].some((t) => merged.has(t)) ? WRITTEN : '';
    const terms = tag ? unfolded[n] : folded[n];
    const phrase = terms.join(' ');
    if (!terms.length || phrase.length > MAX_FACT_LENGTH) continue;
    const said = (p: string) => says.has(tag + p);
    // Numbers are facts as numbers, function words none ("in" of "in_transit", "no"); two Chinese
    // characters are a given name (rerun 44).
    const words = terms.filter(
      (t) =>
        (t.length >= MIN_FACT_LENGTH || /^\p{Script=Han}{2}$/u.test(t)) &&
        !STOP_WORDS.has(tag ? singular(t) : t) &&
        !/^\p{N}+$/u.test(t),
    );
    if (terms.length > PHRASE_WORDS) {
      if (says.opens(phrase)) {
        if (++long > MAX_LONG_VALUES) return undefined;
        if (said(phrase)) {
          facts.add(tag + phrase);
          continue;
        }
      }
    } else if (said(phrase)) {
      if (terms.length > 1 || (!STOP_WORDS.has(tag ? singular(phrase) : phrase) && !/^\p{N}+$/u.test(phrase)))
        facts.add(tag + phrase);
      continue;
    } else if (words.length && terms.every(said)) {
      for (const t of words) facts.add(tag + t);
      continue;
    }
    // Said in part: the words of a name, as the value writes them (capitalized, or in a script
    // without case), not of an identifier: "Lena" of "Lena Ito" wherever gold says it, not "one"
    // of `one_way` (rerun 41 capped honest rewordings so; rerun 42 lost names gold said first).
    const named = new Set(
      leaf.split(/\s+/).flatMap((w) => (/^[^\p{Ll}]*[\p{Lu}\p{Lo}]/u.test(w) ? termsOf(w, !tag) : [])),
    );
    for (const t of words) if (named.has(t) && said(t)) facts.add(tag + t);
  }
  return [...facts];
}

/**
 * A fact: a number, terms said together (WRITTEN before them where they are held as written, not
 * singular), a month (MONTH and its name), Han characters said within a text (HAN), or a code (CODE, then the code as gold writes it, in
 * brackets beside the word of meaning gold says with it where it is also a word: "=ships [OK]").
 */
type Fact = string | number;
const CODE = '=';
const WRITTEN = '^';
const MONTH = '@';
/** Between a month's name and the words gold said it weakly before ("@may|again"). */
const WEAK = '|';
const HAN = '~';
const TAGS = [CODE, WRITTEN, MONTH, HAN];
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
function spoken(
  text: string,
  /** The Han facts looked for, where known (a reply's): only those of its runs are kept. */
  wanted?: ReadonlySet<string>,
): {
  has(fact: Fact): boolean;
  code(value: string): string | undefined;
  opens(phrase: string): boolean;
  /** The words after each "May" said weakly (`weakMay`). */
  weakMay: ReadonlySet<string>;
} {
  const terms = termsOf(text);
  const phrases = phrasesOf(terms);
  let written: ReturnType<typeof phrasesOf> | undefined;
  let han: Set<string> | undefined;
  // Its words as written, for codes: case and trailing signs kept, a possessive dropped; a word
  // that is a sign alone ("—", "->") is left out (rerun 47: it hid "grade" from "grade — A").
  // `ends`: the word ends a clause (punctuation after it, or the text ends); `breaks`: a comma or
  // a sentence's end after it, past which a code's words of meaning are not looked for.
  const raw: string[] = [];
  const ends: boolean[] = [];
  const breaks: boolean[] = [];
  // `possessive`: the word was written with "'s" ("May's"); `closes`: a sign that closes a clause
  // after it, not a comma or emphasis ("May.", "May:", "May —", "May ($120)", a line break; not
  // "May,", "*May*": rerun 62).
  const possessive: boolean[] = [];
  const closes: boolean[] = [];
  // A line break is a break too ("- Tier: 2\nI can": rerun 49).
  // An emoji's presentation selector is no part of the sign ("✔️" is "✔": rerun 52).
  // A hyphen is a hyphen however it is encoded ("mid‑March" with U+2011: rerun 56).
  // An em dash between words is a sign of its own, an ellipsis ends its word's clause ("May—on the
  // 14th", "May… it hit": reruns 57, 58).
  for (const [k, token] of text
    .replace(/[\ufe0e\ufe0f]/g, '')
    .replace(/[\u2010\u2011]/g, '-')
    .replace(/\u2014/g, ' $& ')
    .replace(/\u2026/g, '$& ')
    .split(/(\s+)/)
    .entries()) {
    if (k % 2) {
      if (raw.length && token.includes('\n'))
        ends[raw.length - 1] = breaks[raw.length - 1] = closes[raw.length - 1] = true;
      continue;
    }
    // A sign alone says something, as a word does (✅, ?, ×, …: reruns 50, 51), but a dash, an
    // arrow, a colon, an equals sign or a bar only joins words ("grade — A": rerun 47).
    const w = trimmed(token, CODE_SIGNS) || (JOINERS.test(token) ? '' : token);
    if (!w) {
      if (raw.length) {
        ends[raw.length - 1] = true;
        if (!/^[*_~`]+$/.test(token)) closes[raw.length - 1] = true;
      }
      continue;
    }
    raw.push(w.replace(/['\u2019]s$/, ''));
    ends.push(!token.endsWith(w));
    possessive.push(raw[raw.length - 1] !== w);
    closes.push(/[.!?;:)\]\u2026]/u.test(token.slice(token.indexOf(w) + w.length)));
    // A word before one that opens with a sign ("A (4 orders)") ends a clause too.
    if (raw.length > 1 && !token.startsWith(w)) {
      ends[raw.length - 2] = true;
      if (/^[([]/.test(token)) closes[raw.length - 2] = true;
    }
    breaks.push(/[.!?;,]["'\u2019\u201d)\]]*$/u.test(token) && !token.endsWith(w));
  }
  if (raw.length) ends[raw.length - 1] = true;
  // A month said by name or abbreviation, capitalized ("Mar 5"; "may apply" is no May: rerun 50),
  // or in a date written 2024-03-05; not a term, so that "Jan" the name is no January (rerun 44).
  // A capitalized month is one wherever it stands ("March was…", "- March", "Tuesday, March the
  // 5th", "mid-March": reruns 52, 55). "May" also asks, wishes or permits ("May I help", "May
  // peace be with you", "Refunds May be delayed", "- May expire": reruns 51, 53–62), so it says
  // the month only with a date's words beside it (`saysMay`). Each rule that read the month from
  // less (a clause's opening, a comma or a colon after the next word, an adverb) paid a modal
  // "May" for it in the next pass (reruns 57–61). Elsewhere gold's "May" is the month said weakly
  // (`weakMay`).
  const month = (m: number) => /^\p{Lu}/u.test(raw[m] ?? '') && MONTHS.has(raw[m].toLowerCase());
  const beforeOf = (j: number) => (j > 0 && !ends[j - 1] ? raw[j - 1].toLowerCase() : undefined);
  // Beside another month, capitalized: "April and May", "May vs June" ("May or may not" is none).
  const joined = (k: number, m: number) =>
    !(m < k && ends[m]) && /^(?:and|or|to|through|thru|vs|versus|v|&|\+)$/i.test(raw[k] ?? '') && month(m);
  const saysMay = (j: number): boolean => {
    const next = raw[j + 1] ?? '';
    const lower = next.toLowerCase();
    const after = raw[j + 2] ?? '';
    const before = beforeOf(j);
    if (possessive[j]) return true;
    // "Yes, you may." and "Come what May," ask (rerun 62).
    if (closes[j]) return !(before && ASKERS.has(before));
    if (/^\d/.test(next) || (/^(?:the|of)$/.test(lower) && /^\d/.test(after))) return true;
    if (lower === 'of' && /^(?:this|last|next|that)$/i.test(after)) return true;
    // "May not June" (rerun 60); "They May not. June…" and "May Not March Here" ask (rerun 62).
    if (next === 'not' && !ends[j + 1] && month(j + 2)) return true;
    // "Refunds May be delayed", "your card May expire", "June v May be different" ask, as "May"
    // before a capitalized word does: "Orders Over $50 May Qualify" (rerun 62).
    if (MODAL_VERBS.has(lower) || (/^\p{Lu}/u.test(next) && !month(j + 1))) return false;
    if (before && (/^\d/.test(before) || MAY_BEFORE.has(before))) return true;
    if ((before && joined(j - 1, j - 2)) || joined(j + 1, j + 2)) return true;
    // A verb no modal takes after it: one in the past or with its "-s" ("May saw…", "May tops…").
    return FINITE_VERBS.has(lower) || /^[a-z]+(?<!e)ed$/.test(lower);
  };
  // "May" said weakly, by the word after it ("May again", "May spending: $120", "since May have
  // totaled"): gold's month where its words say no more, which a reply says with a date's words
  // or as "May" and the same word. Gold's is read so unless it asks with no date's word beside it:
  // reading more of gold only caps honest replies (rerun 62: "since May have totaled" had no May).
  const weakMay = new Set<string>();
  const isMonth = (w: string, j: number): boolean => {
    if (w.toLowerCase() !== 'may' || saysMay(j)) return true;
    const next = (raw[j + 1] ?? '').toLowerCase();
    const before = beforeOf(j);
    const dated =
      (before && (/^\d/.test(before) || MAY_BEFORE.has(before) || WEAK_BEFORE.has(before))) ||
      (before && joined(j - 1, j - 2)) ||
      joined(j + 1, j + 2);
    const asks = SUBJECTS.has(next) || /^\p{Lu}/u.test(raw[j + 1] ?? '') || MODAL_VERBS.has(next);
    if (dated || !asks) weakMay.add(next);
    return false;
  };
  const months = new Set(
    raw.flatMap((w, j) =>
      // A month written into a hyphenated or slashed word by its name ("mid-March", "May-June").
      /[-/\u2013]/.test(w)
        ? monthsJoined(w.split(/[-/\u2013]/))
        : /^\p{Lu}/u.test(w) && isMonth(w, j)
          ? (MONTHS.get(w.toLowerCase()) ?? [])
          : [],
    ),
  );
  for (const [, month] of text.matchAll(ISO_DATES)) months.add(MONTH_NAMES[Number(month) - 1] ?? '');
  const numbers = [
    // A hyphen after a letter or digit is no minus: 2024-03-05 says 3 and 5.
    ...(
      minusSigns(text)
        .replace(/(\d),(?=\d{3}\b)/g, '$1')
        .match(/(?:(?<![\p{L}\p{N}])-\p{Sc}?)?\d+(?:\.\d+)?/gu) ?? []
    ).flatMap((n) =>
      // "-$5.00" is -5 and, as a discount or refund line writes an amount, 5 (rerun 57).
      /\p{Sc}/u.test(n) ? [Number(n.replace(/\p{Sc}/u, '')), Number(n.replace(/-\p{Sc}/u, ''))] : [Number(n)],
    ),
    ...numberWordsOf(terms),
    // "one" is no fact of gold's (it is mostly a pronoun), but an answer may say a count so.
    ...(terms.includes('one') ? [1] : []),
  ].sort((a, b) => a - b);
  const at = new Map<string, number[]>();
  for (const [i, w] of raw.entries()) {
    const key = w.toLowerCase();
    const list = at.get(key);
    if (list) list.push(i);
    else at.set(key, [i]);
  }
  /**
   * The nearest word (lower case, singular; a sign alone too, unless `signs` is false) on `i`'s
   * `dir` side (-1 before, 1 after) within
   * CODE_CONTEXT words that is no function word (a number or "no" is a word: "Level 2 so I can"
   * has "2" nearest, not "level": rerun 49), up to a comma, a sentence's end or a line break.
   */
  const beside = (i: number, dir: -1 | 1, signs = true): string | undefined => {
    for (let j = i + dir; Math.abs(j - i) <= CODE_CONTEXT && j >= 0 && j < raw.length; j += dir) {
      if (breaks[dir < 0 ? j : j - 1]) return undefined;
      if (!signs && !/[\p{L}\p{N}]/u.test(raw[j])) continue;
      const w = singular(labelWord(raw[j].toLowerCase()));
      // A function word capitalized within a sentence is a value ("status is Out (In …": rerun
      // 50), but not within a label, right after a capitalized word ("Ship To: OK", "Ship To —
      // OK": rerun 51); a label's colon or a sign ends it ("Status: Out (In …": rerun 52).
      const capital = raw[j] !== raw[j].toLowerCase() && j > 0 && !breaks[j - 1];
      if (!STOP_WORDS.has(w) || ANSWERS.has(w) || (capital && (raw[j - 1] === raw[j - 1].toLowerCase() || ends[j - 1])))
        return w;
    }
    return undefined;
  };
  /** Whether the text writes a code fact's code as it is, with its word of meaning on the same side. */
  const saysCode = (fact: string): boolean => {
    const words = fact.slice(CODE.length).split(' ');
    if (words.length === 1) return (at.get(words[0].toLowerCase()) ?? []).some((i) => raw[i] === words[0]);
    const p = words.findIndex((w) => w.startsWith('['));
    const code = words[p].slice(1, -1);
    // Gold's word, then the signs gold wrote between it and the code ("wrap ❌ [No]"), said with
    // those signs or without any.
    const dir = p ? -1 : 1;
    const word = p ? words[0] : words[words.length - 1];
    const signs = p ? words.slice(1, p) : words.slice(1, -1);
    const near = dir < 0 ? [...signs].reverse() : signs;
    return (at.get(code.toLowerCase()) ?? []).some(
      (i) =>
        raw[i] === code &&
        (beside(i, dir) === word ||
          (near.length > 0 &&
            near.every((sign, k) => raw[i + dir * (k + 1)] === sign && !breaks[dir < 0 ? i - k - 1 : i + k]) &&
            beside(i + dir * near.length, dir) === word)),
    );
  };
  // A month by name, or "May" and a word gold said it weakly with ("@may|again": WEAK between).
  const monthSaid = (spec: string) => {
    const [name, ...weak] = spec.split(WEAK);
    return months.has(name) || weak.some((next) => weakMay.has(next));
  };
  const has = (fact: Fact): boolean =>
    typeof fact === 'number'
      ? near(numbers, fact)
      : fact.startsWith(CODE)
        ? saysCode(fact)
        : fact.startsWith(MONTH)
          ? monthSaid(fact.slice(MONTH.length))
          : fact.startsWith(HAN)
            ? (han ??= hanRunsOf(text, wanted)).has(fact.slice(HAN.length))
            : fact.startsWith(WRITTEN)
              ? (written ??= phrasesOf(termsOf(text, false))).has(fact.slice(WRITTEN.length))
              : phrases.has(fact);
  /**
   * A code that is also a word (AMBIGUOUS) with the word of meaning gold says nearest it, the
   * code in brackets: before it ("your order ships to OK" is "ship [OK]"), else after it ("[A]
   * grade"), in its clause; a reply must say the code with the same word nearest it. Rerun 44
   * paid any answer where gold said "ships to OK"; rerun 48, with any of gold's words near it,
   * "Tier II plan, and I can", and with the clause end asked, capped "Tier I applies to you".
   */
  const context = (i: number): string | undefined => {
    // Gold's word is a word, past signs gold puts beside the code ("Gift wrap: ❌ No": rerun 51).
    const signsBy = (dir: -1 | 1) => {
      const out: string[] = [];
      for (
        let j = i + dir;
        raw[j] !== undefined && !/[\p{L}\p{N}]/u.test(raw[j]) && !breaks[dir < 0 ? j : j - 1];
        j += dir
      )
        out.push(raw[j]);
      return out;
    };
    const before = beside(i, -1, false);
    if (before) return [before, ...signsBy(-1).reverse(), `[${raw[i]}]`].join(' ');
    const after = beside(i, 1, false);
    return after && [`[${raw[i]}]`, ...signsBy(1), after].join(' ');
  };
  /**
   * How the text writes a stored code, if it does: its spelling (case and signs as written; a
   * lower-case word of three letters, "red", is a word, not a code), with its word of meaning
   * where the code is also a word (AMBIGUOUS).
   */
  const code = (value: string): string | undefined => {
    // A stored "no" or "in" is the word, whatever gold says with it.
    if (value === value.toLowerCase() && STOP_WORDS.has(value)) return undefined;
    // Where gold writes it as stored first: "in" is no "IN" while gold also says "IN" (rerun 44).
    const found = at.get(value.toLowerCase()) ?? [];
    for (const group of [found.filter((j) => raw[j] === value), found.filter((j) => raw[j] !== value)]) {
      let best: { rank: number; fact: string } | undefined;
      for (const i of group) {
        const w = raw[i];
        if (value.length === 3 && /^\p{L}+$/u.test(value) && !/\p{Lu}/u.test(w)) continue;
        if (!AMBIGUOUS(w)) return w;
        // The answer, not the word: "tier I." ends a clause with its word before it, where "I
        // checked" and "A quick" open one (rerun 47 paid a wrong tier when the first was taken).
        const fact = context(i);
        const rank = !fact ? 3 : fact.startsWith('[') ? 2 : ends[i] ? 0 : 1;
        if (fact && (!best || rank < best.rank)) best = { rank, fact };
      }
      if (best) return best.fact;
    }
    return undefined;
  };
  return { has, code, opens: phrases.opens, weakMay };
}

/**
 * Every 2 to 4 Han characters in a row of a text (Chinese writes no spaces between words), or
 * those of them `wanted`: a reply's text is scanned once for an anchor's Han facts (a search of
 * the whole reply per fact took 9 s on 1 MiB: reruns 49, 50).
 */
function hanRunsOf(text: string, wanted?: ReadonlySet<string>): Set<string> {
  const out = new Set<string>();
  for (const [run] of text.matchAll(/\p{Script=Han}{2,}/gu)) {
    const chars = [...run];
    for (let n = 2; n <= 4; n++)
      for (let i = 0; i + n <= chars.length; i++) {
        const gram = chars.slice(i, i + n).join('');
        if (!wanted || wanted.has(gram)) out.add(gram);
      }
  }
  return out;
}

/** Words a code that is also a word may stand from its word of meaning: "tier is set to I". */
const CODE_CONTEXT = 5;
/** Function words that are answers, not glue: nearest a code, they are its word. */
const ANSWERS = new Set(['yes', 'no', 'not', 'ok', 'okay']);

/**
 * The phrases of a text's terms: those of up to PHRASE_WORDS terms from a set, longer ones by a
 * search of the whole text; `opens`: whether its first PHRASE_WORDS terms are said.
 */
function phrasesOf(terms: readonly string[]): { has(phrase: string): boolean; opens(phrase: string): boolean } {
  const phrases = new Set<string>();
  for (let n = 1; n <= PHRASE_WORDS; n++)
    for (let i = 0; i + n <= terms.length; i++) phrases.add(terms.slice(i, i + n).join(' '));
  const joined = ` ${terms.join(' ')} `;
  const head = (phrase: string) => phrase.split(' ').slice(0, PHRASE_WORDS).join(' ');
  // More than PHRASE_WORDS terms, counted without splitting (a lookup per value: rerun 47's shapes).
  const longer = (phrase: string) => {
    for (let at = -1, spaces = 0; (at = phrase.indexOf(' ', at + 1)) >= 0;) if (++spaces >= PHRASE_WORDS) return true;
    return false;
  };
  return {
    has: (phrase) =>
      phrases.has(phrase) || (longer(phrase) && phrases.has(head(phrase)) && joined.includes(` ${phrase} `)),
    opens: (phrase) => phrases.has(head(phrase)),
  };
}

/** Signs alone that join words rather than say something: dashes, arrows, colons, equals, bars. */
const JOINERS = /^[\p{Pd}:|=>~\u2190-\u21ff\u2794\u2798-\u27af\u27b1-\u27be\u27f5-\u27ff\u2b05-\u2b07\u2b95-]+$/u;
/**
 * The months a hyphenated or slashed word names ("mid-March", "Mar-Apr", "5-March-2024",
 * "end-of-May": reruns 56, 57): by name or abbreviation, capitalized; the other parts months,
 * numbers or words of a date's span ("pre-March", "March-Madness" name none).
 */
function monthsJoined(parts: string[]): string[] {
  const months = parts.map((p) => (/^\p{Lu}(?:\p{Ll}+|\p{Lu}+)$/u.test(p) ? MONTHS.get(p.toLowerCase()) : undefined));
  const fits = parts.every(
    (p, k) => months[k] || /^\d+$/.test(p) || /^(?:mid|early|late|end|start|of|to|thru|through|and)$/i.test(p),
  );
  return fits ? months.filter((m): m is string => !!m) : [];
}

/** The words of a space-separated list. */
const wordSet = (list: string) => new Set(list.split(' '));

/** Words before "May" that ask with it, where a clause's end follows: "Yes, you may.", "Come what May." */
const ASKERS = wordSet('i you we they he she it who what which one');
/** Words before gold's "May" that make it the month said weakly even before a bare verb ("like May need"). */
const WEAK_BEFORE = wordSet('like as than including especially');
/** Words after which "May" is the month before its subject too ("in May you spent", "your May bill"). */
const MAY_BEFORE = wordSet(
  'in on of since until till by from during through thru throughout around over across into starting effective circa early late mid last next past every each before after for to between the your my our their his her its was is were',
);
/** Verbs no modal takes after it: after them "May" is the month ("May saw…", "May tops the list"). */
const FINITE_VERBS = wordSet(
  'was is were has had does did shows brings looks remains stays tops leads accounts wins ranks comes stands totals sees saw came brought ran went got took made led rose fell grew',
);
/** Bare verbs after which "May" asks or permits: "May be delayed", "May have posted". */
const MODAL_VERBS = wordSet(
  'be have not need take want require apply vary change include reflect seem differ help appear show expire arrive post update occur incur cost hit set run get contain increase decrease',
);
/** Words that open a clause as its subject after "May" that asks or wishes ("May I help", "May all go well"). */
const SUBJECTS = wordSet(
  'i we you he she they it this that these those the a an all every each both any some no none nothing everything everyone everybody someone somebody anyone anybody nobody one either neither many few several there your our my his her its their thy thou ye u ur god',
);

/**
 * A hyphenated label by its word of meaning where its second word only points: "ship-to" is
 * "ship" (rerun 54). Any other is itself: its first word may turn the meaning ("ship-from",
 * "drop-ship", "non-smoking", "post-paid" are not "ship", "smoking", "paid": rerun 55).
 */
const labelWord = (word: string): string => (/^[^-]+-to$/.test(word) ? word.slice(0, -3) : word);

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
 * A number with an ordinal written onto it. A unit stays a text fact too, to be said glued:
 * read as the number alone, "3pm" was paid by "3am", "12D" by "12A" (rerun 57).
 */
const ORDINAL = /^(-?\d+)(?:st|nd|rd|th)$/;

/**
 * A text's words, lower case, without the punctuation around each (a minus before a digit stays)
 * and with thousands separators taken out of numbers: "$1,234.50." is "1234.50".
 */
function wordsOf(text: string): string[] {
  const out: string[] = [];
  for (const raw of minusSigns(text).toLowerCase().split(/\s+/)) {
    const t = trimmed(raw);
    const at = raw.indexOf(t);
    // A minus before a currency sign too ("-$20.00": rerun 56).
    const minus = /-\p{Sc}?$/u.test(raw.slice(0, at)) && /^\p{N}/u.test(t);
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
 * 41), singular ("laptops" is "laptop", "purchases" and "purchase" one term) unless `fold` is
 * false. An apostrophe inside a
 * word stays: "I'm" is no "m". Accents go by canonical
 * decomposition, which at most triples a text: a compatibility one made one character 18 and
 * 4 MiB of instance strings took seconds (rerun 41).
 */
export function termsOf(text: string, fold = true): string[] {
  const out: string[] = [];
  const plain = (/^[\x00-\x7f]*$/.test(text) ? text : text.normalize('NFD').replace(/\p{M}+/gu, ''))
    .replace(/(\p{Ll})(\p{Lu})/gu, '$1 $2')
    .replace(/(\p{Lu})(\p{Lu}\p{Ll})/gu, '$1 $2')
    .replace(/(\d),(?=\d{3}\b)/g, '$1');
  for (const raw of plain.toLowerCase().split(/[^\p{L}\p{N}'\u2019]+/u)) {
    // Only apostrophes can be around a piece (a trim of every piece made many short words slow: rerun 42).
    const w = /['\u2019]/.test(raw) ? trimmed(raw).replace(/['\u2019]s$/, '') : raw;
    if (w) out.push(fold ? singular(w) : w);
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

/** A date or a month as ISO 8601 writes it ("2024-03-05", "2024-03"), its month captured. */
const ISO_DATE = /^(?:19|20)\d{2}-(\d{2})(?:-\d{2})?(?:$|[T ])/;
/** In a text, as a word of its own: "ORD-2024-03-118" and "ref 7781-11" say no month (rerun 48). */
const ISO_DATES =
  /(?<![\p{L}\p{N}-])(?:19|20)\d{2}-(\d{2})(?:-\d{2}(?:T[\d:.]+(?:Z|[+-][\d:]+)?)?)?(?![\p{L}\p{N}-])/gu;
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
