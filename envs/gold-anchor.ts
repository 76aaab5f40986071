import type { Message } from '../core/messages.js';
import { actionMessage, speechOf, SPEECH, type AgentAction, type Speech } from './environment.js';
import { communicated, toolCallsOf, type CallRecord } from './sdk/verify.js';

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
  /** The numbers gold's words say, or where they say none, the values of the seed's instance they name. */
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
/** Longest, in characters and in words: a longer string in the instance is prose (a goal, a policy), not a value gold reads out. */
const MAX_FACT_LENGTH = 64;
const MAX_FACT_WORDS = 4;

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
  let instance: unknown;
  try {
    instance = typeof view.instance === 'string' ? JSON.parse(view.instance) : undefined;
  } catch {
    instance = undefined;
  }
  return { calls, facts: factsOf(words, instance), speech: speechOf(messages) };
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
  const { missing } = communicated(messages, anchor.facts);
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
  return expected === actual;
}

/**
 * The facts of gold's words: each number or token with a digit in them (an id, a date, an amount);
 * where there is none, each value of the instance they name as a whole word (a name, a status, a city).
 */
function factsOf(words: string, instance: unknown): (string | number)[] {
  const facts = new Set<string | number>();
  for (const raw of words.split(/\s+/)) {
    // Punctuation around it is not part of it; a minus before a digit is.
    const token = raw.replace(/^(?:(?!-\p{N})[^\p{L}\p{N}])+|[^\p{L}\p{N}]+$/gu, '');
    if (!/\p{N}/u.test(token)) continue;
    const number = token.replace(/,(?=\d{3}\b)/g, '');
    facts.add(/^-?\d+(?:\.\d+)?$/.test(number) ? Number(number) : token);
  }
  // Where gold's words hold a number or an id, that is the answer; the names around it are
  // context an answer in other words may leave out (the fixture's right total without the status
  // word was paid as a wrong total, rerun 37).
  if (facts.size) return [...facts];
  const text = words.toLowerCase();
  // The instance holds gold itself: its words are what the facts are read from, not facts.
  const { gold: _, ...data } = instance && typeof instance === 'object' ? (instance as Record<string, unknown>) : {};
  for (const leaf of stringLeaves(data)) {
    const value = leaf.trim().toLowerCase();
    if (value.length < MIN_FACT_LENGTH || value.length > MAX_FACT_LENGTH || !/[\p{L}\p{N}]/u.test(value)) continue;
    if (value.split(/\s+/).length > MAX_FACT_WORDS) continue;
    if (wordIn(text, value)) facts.add(leaf.trim());
  }
  return [...facts];
}

function wordIn(text: string, value: string): boolean {
  for (let at = text.indexOf(value); at >= 0; at = text.indexOf(value, at + 1)) {
    const before = text.slice(0, at);
    const after = text.slice(at + value.length);
    if (!/[\p{L}\p{N}]$/u.test(before) && !/^[\p{L}\p{N}]/u.test(after)) return true;
  }
  return false;
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
