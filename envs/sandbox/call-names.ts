import { z } from 'zod';
import { MessageSchema, type Message, type ToolCall } from '../../core/messages.js';
import type { AgentAction } from '../environment.js';
import { AgentActionSchema } from '../protocol/schemas.js';

const MessagesSchema = z.array(MessageSchema);

/**
 * What a generated env sees of the agent's tool calls, made the same whoever plays: ids become
 * `call_<k>` (the episode's k-th distinct id) and arguments that parse are re-serialized by
 * `JSON.stringify`. The harness's own marks stay outside: the trainer names calls `call_<turn>_0`
 * and spaces its arguments as Python's `json.dumps`, validation names gold `gold_<i>` and random
 * play `rnd_<i>`, each LLM server has its own ids; a module keyed on them rewarded wrong calls only
 * in training (rerun 17). Ids the env wrote itself (its opening's calls) are left as they are.
 * Actions and trajectories are also rebuilt by the protocol's schemas (their keys, in their order),
 * as the HTTP env server training goes through rebuilds them and validation's direct calls did not.
 */
export class CallNames {
  /** The caller's id → the id the env sees. */
  private readonly inside = new Map<string, string>();
  /** The id the env sees → the caller's. */
  private readonly outside = new Map<string, string>();

  constructor(
    /** Ids of the calls in the env's own opening messages. */
    private readonly own: ReadonlySet<string>,
  ) {}

  static forOpening(opening: readonly Message[]): CallNames {
    return new CallNames(
      new Set(opening.flatMap((m) => (m.role === 'assistant' ? (m.tool_calls ?? []) : []).map((c) => c.id))),
    );
  }

  /** A copy for a fork of the episode: the conversation so far keeps its names. */
  copy(): CallNames {
    const c = new CallNames(this.own);
    for (const [k, v] of this.inside) c.name(k, v);
    return c;
  }

  private name(outside: string, inside: string) {
    this.inside.set(outside, inside);
    this.outside.set(inside, outside);
  }

  private id(outside: string): string {
    if (this.own.has(outside)) return outside;
    let id = this.inside.get(outside);
    if (id === undefined) {
      id = `call_${this.inside.size}`;
      this.name(outside, id);
    }
    return id;
  }

  private call(c: ToolCall): ToolCall {
    if (this.own.has(c.id)) return c;
    return {
      ...c,
      id: this.id(c.id),
      function: { ...c.function, arguments: canonicalArguments(c.function.arguments) },
    };
  }

  /** The action as the env sees it. */
  action(a: AgentAction): AgentAction {
    return AgentActionSchema.parse(a.type === 'tool_call' ? { ...a, call: this.call(a.call) } : a);
  }

  /** The env's observation with the caller's id again. */
  observation(m: Message): Message {
    return m.role === 'tool' ? { ...m, tool_call_id: this.outside.get(m.tool_call_id) ?? m.tool_call_id } : m;
  }

  /** A trajectory as the env sees it (for evaluate). */
  messages(ms: readonly Message[]): Message[] {
    return MessagesSchema.parse(
      ms.map((m) => {
        if (m.role === 'assistant' && m.tool_calls?.length)
          return { ...m, tool_calls: m.tool_calls.map((c) => this.call(c)) };
        if (m.role === 'tool') return { ...m, tool_call_id: this.id(m.tool_call_id) };
        return m;
      }),
    );
  }
}

/** Arguments as `JSON.stringify` writes them when they parse; text that does not parse is the env's to report. */
export function canonicalArguments(text: string): string {
  try {
    return JSON.stringify(JSON.parse(text));
  } catch {
    return text;
  }
}
