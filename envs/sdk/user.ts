import type { Message } from '../../core/messages.js';

/** The end-of-conversation marker (as in τ²): a user reply containing it ends the episode. */
export const STOP = '###STOP###';

export interface UserContext<S = unknown, I = unknown> {
  instance: I;
  state: S;
  /** The conversation so far, without the system prompt; the last entry is the agent's message. */
  messages: readonly Message[];
  /** How many agent messages the user has answered before this one. */
  turn: number;
}

/** Produces the user's reply to each agent message; include `STOP` to end the episode. */
export type UserSimulator<S = any, I = any> = (ctx: UserContext<S, I>) => string | Promise<string>;

/**
 * The default user: answers the agent's n-th message with `instance.userTurns[n]`, then STOP.
 * Pass `turns` to compute the follow-ups from the instance instead.
 */
export function scriptedUser<S = unknown, I extends { userTurns?: string[] } = { userTurns?: string[] }>(
  turns?: (instance: I) => readonly string[],
): UserSimulator<S, I> {
  return ({ instance, turn }) => (turns ? turns(instance) : (instance.userTurns ?? []))[turn] ?? STOP;
}

/**
 * A user played by an LLM. `complete` is supplied by the host (generated environments run without
 * network access, so they use `scriptedUser`; in-process environments may wire a completion
 * function from the userSimulator role). The LLM sees the agent's messages as 'user' turns.
 */
export function llmUser<S = unknown, I extends { userGoal: string } = { userGoal: string }>(opts: {
  complete: (messages: { role: 'system' | 'user' | 'assistant'; content: string }[]) => Promise<string>;
  instructions: (instance: I) => string;
  maxTurns?: number;
}): UserSimulator<S, I> {
  return async ({ instance, messages, turn }) => {
    if (turn >= (opts.maxTurns ?? 10)) return STOP;
    type Turn = { role: 'system' | 'user' | 'assistant'; content: string };
    const convo = messages.flatMap((m): Turn[] => {
      if (m.role === 'assistant' && m.content) return [{ role: 'user', content: m.content }];
      if (m.role === 'user') return [{ role: 'assistant', content: m.content }];
      return [];
    });
    const system = `You are a customer talking to an agent. ${opts.instructions(instance)} When your goal is met or cannot be met, reply with ${STOP}.`;
    return opts.complete([{ role: 'system', content: system }, ...convo]);
  };
}
