import type { Message, ToolCall, ToolSchema } from '../core/messages.js';
import type { RewardInfo, Termination } from '../core/trajectory.js';
import { STOP } from './sdk/user.js';

/**
 * The one interface every target (tau2 airline/retail/mock, user-supplied over HTTP) and every
 * synthetic capability environment implements, so rollouts, training and evaluation treat them alike.
 */
export interface EnvInfo {
  name: string;
  kind: 'target' | 'synthetic';
  description: string;
  /** For synthetic envs: the capability it isolates and the target whose interface it keeps. */
  capability?: string;
  targetEnv?: string;
}

export interface TaskRef {
  id: string;
  /** e.g. 'train' | 'test' from tau2's split_tasks.json; undefined when the env has no splits. */
  split?: string;
}

/** What to start: a fixed task of a target env, or a seed of a generated env. */
export type ResetRequest = { taskId: string } | { seed: number };

/** One agent action per turn, as in tau2: a message to the user or a single tool call. */
export type AgentAction = { type: 'message'; content: string } | { type: 'tool_call'; call: ToolCall };

/** The assistant message an action stands for in the transcript the environment evaluates. */
export function actionMessage(a: AgentAction): Message {
  return a.type === 'tool_call'
    ? { role: 'assistant', content: null, tool_calls: [a.call] }
    : { role: 'assistant', content: a.content };
}

/**
 * How the agent spoke to the user, least first: not at all, only before its last tool call, or
 * after it (anywhere, where it made none). A word has a letter or a digit that shows, so the end
 * marker, punctuation and default-ignorable characters (U+200B, U+3164, …) are none. Training caps
 * an episode that speaks less than gold (`envs/gold-anchor.ts`).
 */
export const SPEECH = ['silent', 'before_last_call', 'after_last_call'] as const;
export type Speech = (typeof SPEECH)[number];

export function speechOf(messages: readonly Message[]): Speech {
  let spoke = false;
  let last = false;
  for (const m of messages) {
    if (m.role !== 'assistant') continue;
    if (m.tool_calls?.length) last = false;
    else if (typeof m.content === 'string' && isWords(m.content)) spoke = last = true;
  }
  return last ? 'after_last_call' : spoke ? 'before_last_call' : 'silent';
}

const isWords = (text: string) =>
  /[\p{L}\p{N}]/u.test(text.replaceAll(STOP, '').replace(/\p{Default_Ignorable_Code_Point}/gu, ''));

/**
 * Per-request options: `signal` aborts a request the caller no longer waits for (a cancelled
 * activity, an episode past its time limit). An env that answers from memory may ignore it; one that
 * waits on something slow (a remote server, an LLM user simulator) should stop waiting.
 */
export interface RequestOptions {
  signal?: AbortSignal;
}

export interface StepResult {
  /** The tool message (for a tool call) or the user's reply (for a message). */
  observation: Message;
  /** True when the tool call failed (unknown tool, bad JSON, schema violation, tool error). */
  error: boolean;
  done: boolean;
  termination?: Termination;
}

export interface Environment {
  readonly info: EnvInfo;
  /** The tools exactly as the agent sees them (OpenAI function schemas). */
  tools(): ToolSchema[];
  /** The agent's system prompt (for tau2: instruction block + <policy>). */
  systemPrompt(): string;
  /** Fixed tasks; a seeded generator env returns [] and is reset by seed. */
  listTasks(): Promise<TaskRef[]>;
  reset(req: ResetRequest, opts?: RequestOptions): Promise<Episode>;
  /** Releases what the env holds (a sandbox process, an HTTP connection); envs that hold nothing omit it. */
  close?(): Promise<void>;
}

export interface Episode {
  readonly id: string;
  readonly taskId: string;
  /** Messages that open the conversation after the system prompt (e.g. greeting + first user turn). */
  initialMessages(): Message[];
  /**
   * The tools of this episode when they differ per task (ToolSandbox shows each scenario's own allow
   * list); omitted, the agent sees `Environment.tools()`.
   */
  tools?(): ToolSchema[];
  step(action: AgentAction, opts?: RequestOptions): Promise<StepResult>;
  /** Scores the finished episode; `messages` is the full trajectory without the system prompt. */
  evaluate(messages: Message[], termination: Termination, opts?: RequestOptions): Promise<RewardInfo>;
  /** An independent copy of the episode's current state (cheap replay from a prefix). */
  fork(): Promise<Episode>;
  close(): Promise<void>;
}
