import { Context } from '@temporalio/activity';

/**
 * The one module of activity-context helpers (context, heartbeats, keep-alive) that every activity
 * and the LLM client use; outside an activity (tests, CLI) each is a no-op. Temporal delivers an
 * activity's cancellation only in the answer to a heartbeat, so an activity that waits minutes on one LLM call must keep heartbeating
 * while it waits, or `trace cancel` never reaches it. The keep-alive re-sends the activity's last
 * details: the server keeps only the latest, and an empty beat would erase the progress shown.
 */

/** The current activity's context, or undefined outside one (tests, CLI). */
export function activityContext(): Context | undefined {
  try {
    return Context.current();
  } catch {
    return undefined;
  }
}

const lastDetails = new WeakMap<Context, unknown>();

/** Heartbeats when running inside a Temporal activity; a no-op when called directly (tests, CLI). */
export function heartbeat(details?: unknown): void {
  const ctx = activityContext();
  if (!ctx) return;
  lastDetails.set(ctx, details);
  ctx.heartbeat(details);
}

/** Between item-level heartbeats (an episode or an LLM call may take minutes): proof the worker lives. */
export const KEEPALIVE_MS = 5_000;

/**
 * Runs `fn` with a signal that aborts when `signal` or the current activity is cancelled, and
 * heartbeats every `intervalMs` meanwhile so that the cancellation can arrive.
 */
export async function keepAliveDuring<T>(
  fn: (signal: AbortSignal | undefined) => Promise<T>,
  signal?: AbortSignal,
  intervalMs = KEEPALIVE_MS,
): Promise<T> {
  const ctx = activityContext();
  if (!ctx) return fn(signal);
  const timer = setInterval(() => ctx.heartbeat(lastDetails.get(ctx)), intervalMs);
  try {
    return await fn(signal ? AbortSignal.any([signal, ctx.cancellationSignal]) : ctx.cancellationSignal);
  } finally {
    clearInterval(timer);
  }
}

/** An activity function that heartbeats on a timer for its whole run. */
export function keepingAlive<I, O>(fn: (input: I) => Promise<O>): (input: I) => Promise<O> {
  return (input) => keepAliveDuring(() => fn(input));
}
