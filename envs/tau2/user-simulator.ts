import type OpenAI from 'openai';
import type { ToolCall, ToolSchema } from '../../core/messages.js';
import { readDataFile } from './domains.js';
import { userScenarioText, type Tau2Task } from './tasks.js';

/**
 * tau2's LLM user simulator (user/user_simulator.py): system prompt = global guidelines +
 * `<scenario>` with `str(task.user_scenario)`; the conversation is shown with roles flipped (the
 * agent speaks as `user`, the simulated user's own turns as `assistant`).
 */
export interface UserSimulatorLlm {
  client: OpenAI;
  /** A model id, or a resolver (e.g. the first model an endpoint lists), called per request. */
  model: string | (() => Promise<string>);
  /** tau2's default for the user simulator is 0. */
  temperature?: number;
  /** Sent as the request `seed`, as tau2 does with its run seed (default 300). */
  seed?: number;
}

export const STOP = '###STOP###';
export const TRANSFER = '###TRANSFER###';
export const OUT_OF_SCOPE = '###OUT-OF-SCOPE###';

/** The termination a user message asks for, or undefined if the conversation goes on. */
export function userStopReason(content: string | null): 'user_stop' | 'transfer' | 'out_of_scope' | undefined {
  if (content == null) return undefined;
  // tau2 records all three as USER_STOP; the distinction is kept for analysis.
  if (content.includes(STOP)) return 'user_stop';
  if (content.includes(TRANSFER)) return 'transfer';
  if (content.includes(OUT_OF_SCOPE)) return 'out_of_scope';
  return undefined;
}

export function userSimulatorSystemPrompt(task: Tau2Task, withTools: boolean): string {
  const guidelines = readDataFile(
    'user_simulator',
    withTools ? 'simulation_guidelines_tools.md' : 'simulation_guidelines.md',
  );
  return `${guidelines}\n\n<scenario>\n${userScenarioText(task)}\n</scenario>`;
}

/** A message in the simulator's own (flipped) view. */
export type FlippedMessage =
  | { role: 'user'; content: string }
  | { role: 'assistant'; content: string | null; tool_calls?: ToolCall[] }
  | { role: 'tool'; tool_call_id: string; content: string };

export interface UserTurn {
  content: string | null;
  toolCalls: ToolCall[];
}

export class UserSimulator {
  constructor(
    private readonly llm: UserSimulatorLlm,
    readonly systemPrompt: string,
    private readonly tools: ToolSchema[] | undefined,
    readonly messages: FlippedMessage[] = [],
  ) {}

  fork(): UserSimulator {
    return new UserSimulator(this.llm, this.systemPrompt, this.tools, structuredClone(this.messages));
  }

  /** The agent said something: it reaches the simulator as a `user` message. */
  hearAgent(content: string): void {
    this.messages.push({ role: 'user', content });
  }

  hearToolResult(toolCallId: string, content: string): void {
    this.messages.push({ role: 'tool', tool_call_id: toolCallId, content });
  }

  /**
   * Generates the simulated user's next turn (text, or calls to its own tools in mock). `signal`
   * aborts the request (the episode was cancelled or ran out of time), so the LLM server stops
   * generating for a conversation nobody waits on.
   */
  async next(signal?: AbortSignal): Promise<UserTurn> {
    const res = await this.llm.client.chat.completions.create(
      {
        model: typeof this.llm.model === 'string' ? this.llm.model : await this.llm.model(),
        temperature: this.llm.temperature ?? 0,
        ...(this.llm.seed !== undefined ? { seed: this.llm.seed } : {}),
        messages: [
          { role: 'system', content: this.systemPrompt },
          ...this.messages,
        ] as OpenAI.Chat.ChatCompletionMessageParam[],
        ...(this.tools?.length ? { tools: this.tools as OpenAI.Chat.ChatCompletionTool[] } : {}),
      },
      signal ? { signal } : undefined,
    );
    const msg = res.choices[0]?.message;
    if (!msg) throw new Error(`user simulator (${this.llm.model}) returned no choices`);
    const toolCalls: ToolCall[] = (msg.tool_calls ?? [])
      .filter((c): c is OpenAI.Chat.ChatCompletionMessageFunctionToolCall => c.type === 'function')
      .map((c) => ({
        id: c.id,
        type: 'function',
        function: { name: c.function.name, arguments: c.function.arguments },
      }));
    this.messages.push({
      role: 'assistant',
      content: msg.content ?? null,
      ...(toolCalls.length ? { tool_calls: toolCalls } : {}),
    });
    return { content: msg.content ?? null, toolCalls };
  }
}
