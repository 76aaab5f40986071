import type { Message } from '../../core/messages.js';
import { stableHash } from './state.js';

/**
 * Verifier building blocks. A verifier returns a `Score`; the reward should depend mainly on the
 * capability the environment isolates (DB state reached, values communicated, arguments used).
 */
export interface Score {
  reward: number;
  components: Record<string, number>;
  /** Defaults to reward ≥ 0.99. */
  success?: boolean;
  details?: Record<string, unknown>;
}

/** A tool call the agent made, arguments parsed (`undefined` when they were not valid JSON). */
export interface CallRecord {
  name: string;
  args: Record<string, unknown> | undefined;
}

/** Tool calls in a trajectory, in order. */
export function toolCallsOf(messages: readonly Message[]): CallRecord[] {
  const out: CallRecord[] = [];
  for (const m of messages) {
    if (m.role !== 'assistant' || !m.tool_calls) continue;
    for (const c of m.tool_calls) {
      let args: Record<string, unknown> | undefined;
      try {
        const parsed = JSON.parse(c.function.arguments || '{}');
        args = parsed && typeof parsed === 'object' && !Array.isArray(parsed) ? parsed : undefined;
      } catch {
        args = undefined;
      }
      out.push({ name: c.function.name, args });
    }
  }
  return out;
}

/** True when both states have the same canonical hash. */
export function statesMatch(a: unknown, b: unknown): boolean {
  return stableHash(a) === stableHash(b);
}

/** Normalised text of what the agent said to the user (assistant message contents). */
export function agentText(messages: readonly Message[]): string {
  return messages
    .filter((m) => m.role === 'assistant' && typeof m.content === 'string')
    .map((m) => normalizeText(m.content as string))
    .join('\n');
}

/**
 * Whether every value was communicated to the user. Strings match case-insensitively; numbers
 * match with or without thousands separators, currency signs and trailing `.00`.
 */
export function communicated(
  messages: readonly Message[],
  values: readonly (string | number)[],
): { ok: boolean; missing: string[] } {
  const text = agentText(messages);
  const missing = values.filter((v) => !mentions(text, v)).map(String);
  return { ok: missing.length === 0, missing };
}

function mentions(text: string, v: string | number): boolean {
  if (typeof v === 'string') return text.includes(normalizeText(v));
  const nums = (text.match(/-?\d+(?:\.\d+)?/g) ?? []).map(Number);
  return nums.some((n) => Math.abs(n - v) < 0.005);
}

function normalizeText(s: string): string {
  return s
    .toLowerCase()
    .replace(/(\d),(?=\d{3}\b)/g, '$1')
    .replace(/\s+/g, ' ');
}

/**
 * Whether some call to `name` had arguments containing `expected` (deep partial match: objects
 * may have extra keys, arrays must match element-wise and in length).
 */
export function calledWith(
  calls: readonly CallRecord[],
  name: string,
  expected: Record<string, unknown> = {},
): boolean {
  return calls.some((c) => c.name === name && c.args !== undefined && partialMatch(expected, c.args));
}

function partialMatch(expected: unknown, actual: unknown): boolean {
  if (Array.isArray(expected)) {
    return (
      Array.isArray(actual) && actual.length === expected.length && expected.every((e, i) => partialMatch(e, actual[i]))
    );
  }
  if (expected !== null && typeof expected === 'object') {
    if (actual === null || typeof actual !== 'object' || Array.isArray(actual)) return false;
    return Object.entries(expected).every(([k, v]) => partialMatch(v, (actual as Record<string, unknown>)[k]));
  }
  if (typeof expected === 'string' && typeof actual === 'string')
    return expected.trim().toLowerCase() === actual.trim().toLowerCase();
  return expected === actual;
}

/**
 * Weighted partial credit, e.g. the paper's permission-error recovery:
 * weighted({ action: [0.6, sent], communication: [0.4, told] }) → reward 0.6·action + 0.4·communication.
 */
export function weighted(
  parts: Record<string, [weight: number, ok: boolean | number]>,
  details?: Record<string, unknown>,
): Score {
  const components: Record<string, number> = {};
  let reward = 0;
  for (const [k, [w, ok]] of Object.entries(parts)) {
    const v = typeof ok === 'number' ? ok : ok ? 1 : 0;
    components[k] = v;
    reward += w * v;
  }
  return { reward: round(reward), components, details };
}

/**
 * The paper's structured-data reward: 1.0 when the DB and the communication both match, `partial`
 * (default 0.3) when only the DB matches, 0 otherwise.
 */
export function dbThenCommunication(
  dbOk: boolean,
  commOk: boolean,
  partial = 0.3,
  details?: Record<string, unknown>,
): Score {
  const reward = dbOk ? (commOk ? 1 : partial) : 0;
  return { reward, components: { DB: dbOk ? 1 : 0, COMMUNICATE: commOk ? 1 : 0 }, details };
}

function round(x: number): number {
  return Math.round(x * 1e6) / 1e6;
}
