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
 * The facts of gold's words: each number or token with a digit in them (an id, a date, an amount),
 * and each value of the instance they name as whole words (a name, a status, a product); undefined
 * where more long values need a look than MAX_LONG_VALUES (the least cap then holds). Near linear
 * in the words and the instance: a scan of every value against the words took the worker 79 s per
 * reset on a 1 MiB gold and 40,000 values (rerun 38).
 */
function factsOf(text: string, instance: unknown): (string | number)[] | undefined {
  const words = wordsOf(text);
  const facts = new Set<string | number>();
  for (const w of words) if (/\p{N}/u.test(w)) facts.add(NUMBER.test(w) ? Number(w) : w);
  const says = spoken(text);
  let long = 0;
  // The instance holds gold itself: its words are what the facts are read from, not facts.
  const { gold: _, ...data } = instance && typeof instance === 'object' ? (instance as Record<string, unknown>) : {};
  for (const leaf of stringLeaves(data)) {
    if (leaf.length > MAX_FACT_LENGTH * 2) continue;
    const phrase = wordsOf(leaf).join(' ');
    if (phrase.length < MIN_FACT_LENGTH || phrase.length > MAX_FACT_LENGTH) continue;
    if (!says.opens(phrase)) continue;
    if (phrase.split(' ').length > PHRASE_WORDS && ++long > MAX_LONG_VALUES) return undefined;
    if (says.has(phrase)) facts.add(phrase);
  }
  return [...facts];
}

/**
 * What a text says, to match facts against: its words and its phrases (`has`; those of up to
 * PHRASE_WORDS words from a set, longer ones by a search of the whole text), and its numbers (an
 * amount within AMOUNT_TOLERANCE is the amount). `opens`: whether its first PHRASE_WORDS words do.
 */
function spoken(text: string): { has(fact: string | number): boolean; opens(phrase: string): boolean } {
  const words = wordsOf(text);
  const phrases = new Set<string>();
  for (let n = 1; n <= PHRASE_WORDS; n++)
    for (let i = 0; i + n <= words.length; i++) phrases.add(words.slice(i, i + n).join(' '));
  const joined = ` ${words.join(' ')} `;
  const numbers = (text.replace(/(\d),(?=\d{3}\b)/g, '$1').match(/-?\d+(?:\.\d+)?/g) ?? [])
    .map(Number)
    .sort((a, b) => a - b);
  const head = (phrase: string) => phrase.split(' ').slice(0, PHRASE_WORDS).join(' ');
  return {
    has: (fact) =>
      typeof fact === 'number'
        ? near(numbers, fact)
        : fact.split(' ').length <= PHRASE_WORDS
          ? phrases.has(fact)
          : phrases.has(head(fact)) && joined.includes(` ${fact} `),
    opens: (phrase) => phrases.has(head(phrase)),
  };
}

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

/** A number as a word: digits, a decimal part, a minus; thousands separators already gone. */
const NUMBER = /^-?\d+(?:\.\d+)?$/;

/**
 * A text's words, lower case, without the punctuation around each (a minus before a digit stays)
 * and with thousands separators taken out of numbers: "$1,234.50." is "1234.50".
 */
function wordsOf(text: string): string[] {
  const out: string[] = [];
  for (const raw of text.toLowerCase().split(/\s+/)) {
    const w = raw.replace(/^(?:(?!-\p{N})[^\p{L}\p{N}])+|[^\p{L}\p{N}]+$/gu, '').replace(/(\d),(?=\d{3}\b)/g, '$1');
    if (w) out.push(w);
  }
  return out;
}

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
