import { z } from 'zod';
import { MessageSchema, type Message, type ToolCall, type ToolSchema } from '../../core/messages.js';
import type { AgentAction, StepResult } from '../environment.js';
import { AgentActionSchema } from '../protocol/schemas.js';
import { callShapeViolation } from '../sdk/schema.js';

const MessagesSchema = z.array(MessageSchema);

/** One call's arguments (JSON text), as one observation: what the worker parses and checks stays small. */
export const MAX_ARGUMENTS_BYTES = 64 * 1024;
/** Levels of arrays and objects in one call's arguments: 4 000 under an open schema overflowed the re-serialization's stack (rerun 23). */
const MAX_ARGUMENTS_DEPTH = 64;

function nestedDeeper(v: unknown, levels: number): boolean {
  if (v === null || typeof v !== 'object') return false;
  if (levels === 0) return true;
  return Object.values(v).some((x) => nestedDeeper(x, levels - 1));
}

/**
 * A JSON value with every object's keys in code-unit order. Validation's policy writes keys in the
 * order the tool declares them (its grammar), the trainer's may write any order: a module could
 * pay reversed keys in training alone.
 */
function sortedKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortedKeys);
  if (v === null || typeof v !== 'object') return v;
  const obj = v as Record<string, unknown>;
  return Object.fromEntries(
    Object.keys(obj)
      .sort()
      .map((k) => [k, sortedKeys(obj[k])]),
  );
}

/**
 * What a generated env sees of the agent's tool calls, made the same whoever plays.
 *
 * Names: ids become `call_<k>` (the episode's k-th distinct id) and arguments are re-serialized by
 * `JSON.stringify`, keys sorted. The harness's own marks stay outside: the trainer names calls `call_<turn>_0`
 * and spaces its arguments as Python's `json.dumps`, validation names gold `gold_<i>` and random
 * play `rnd_<i>`, each LLM server has its own ids; a module keyed on them rewarded wrong calls only
 * in training (rerun 17). The env's own opening is left as it wrote it; which calls are its own is
 * told by their place (the opening), not their ids, which a module could make the trainer's.
 *
 * Shape: a call that does not fit the env's tools (an unknown name; arguments that are not a JSON
 * object, e.g. Python's `NaN`; a missing, unexpected or wrongly typed argument) never reaches the
 * module: the worker answers it with a tool error that ends the episode (scored 0), and the
 * trajectory the module evaluates leaves it out with its answer. A model can write any of these, validation's scripted play only some,
 * and a module paid the others in training alone (rerun 19).
 *
 * Actions and trajectories are also rebuilt by the protocol's schemas (their keys, in their order),
 * as the HTTP env server training goes through rebuilds them and validation's direct calls did not.
 */
export class AgentCalls {
  /** The caller's id → the id the env sees. */
  private readonly inside = new Map<string, string>();
  /** The id the env sees → the caller's. */
  private readonly outside = new Map<string, string>();
  /** The env's opening as the protocol's schemas rebuild it: its calls are the env's own. */
  private readonly openingJson: string;

  constructor(
    /** The episode's opening messages. */
    private readonly opening: readonly Message[],
    /** The episode's tools, as the agent sees them. */
    private readonly tools: readonly ToolSchema[],
  ) {
    this.openingJson = JSON.stringify(MessagesSchema.parse(opening));
  }

  /** A copy for a fork of the episode: the conversation so far keeps its names. */
  copy(): AgentCalls {
    const c = new AgentCalls(this.opening, this.tools);
    for (const [k, v] of this.inside) c.name(k, v);
    return c;
  }

  private name(outside: string, inside: string) {
    this.inside.set(outside, inside);
    this.outside.set(inside, outside);
  }

  private id(outside: string): string {
    let id = this.inside.get(outside);
    if (id === undefined) {
      id = `call_${this.inside.size}`;
      this.name(outside, id);
    }
    return id;
  }

  /** Each call's fault by its name and arguments: evaluate re-reads every call the steps checked. */
  private readonly faults = new Map<string, string | undefined>();

  /** Why the env must not see this call of the agent's, if it does not fit the env's tools. */
  fault(c: ToolCall): string | undefined {
    const key = JSON.stringify([c.function.name, c.function.arguments]);
    if (!this.faults.has(key)) this.faults.set(key, this.check(c));
    return this.faults.get(key);
  }

  private check(c: ToolCall): string | undefined {
    const size = Buffer.byteLength(c.function.arguments);
    if (size > MAX_ARGUMENTS_BYTES) return `arguments are ${size} bytes; at most ${MAX_ARGUMENTS_BYTES}`;
    const name = c.function.name;
    const tool = this.tools.find((t) => t.function.name === name);
    if (!tool) return `unknown tool '${name}'. Available tools: ${this.tools.map((t) => t.function.name).join(', ')}`;
    let args: unknown;
    try {
      args = JSON.parse(c.function.arguments || '{}');
    } catch (e) {
      return `arguments of ${name} are not valid JSON: ${(e as Error).message}`;
    }
    if (args === null || typeof args !== 'object' || Array.isArray(args))
      return `arguments of ${name} must be a JSON object`;
    if (nestedDeeper(args, MAX_ARGUMENTS_DEPTH))
      return `arguments of ${name} nest deeper than ${MAX_ARGUMENTS_DEPTH} levels`;
    const bad = callShapeViolation(tool.function.parameters, args);
    return bad && `invalid arguments for ${name}: ${bad}`;
  }

  /**
   * The worker's answer to a call the env never sees (`fault`), as the SDK's tools word theirs. It
   * ends the episode, as the agent stopping there (the env evaluates what it saw, scored 0): going
   * on, the refused calls still spent turns and counted as errors, and a module paid max_errors
   * with fewer errors of its own, or max_steps after fewer steps than turns (reruns 22, 23).
   */
  static refusal(call: ToolCall, fault: string): StepResult {
    return {
      observation: { role: 'tool', tool_call_id: call.id, content: `Error: ${fault}` },
      error: true,
      done: true,
      termination: 'agent_stop',
    };
  }

  /** The worker's answer to an action after a refusal ended the episode. */
  static ended(a: AgentAction): StepResult {
    const content = 'Error: the episode ended at a call that did not fit the tools';
    return {
      observation:
        a.type === 'tool_call' ? { role: 'tool', tool_call_id: a.call.id, content } : { role: 'user', content },
      error: true,
      done: true,
      termination: 'agent_stop',
    };
  }

  private call(c: ToolCall): ToolCall {
    return {
      ...c,
      id: this.id(c.id),
      function: { ...c.function, arguments: JSON.stringify(sortedKeys(JSON.parse(c.function.arguments || '{}'))) },
    };
  }

  /** The action as the env sees it; a tool call must fit (`fault`). */
  action(a: AgentAction): AgentAction {
    return AgentActionSchema.parse(a.type === 'tool_call' ? { ...a, call: this.call(a.call) } : a);
  }

  /** The env's observation with the caller's id again. */
  observation(m: Message): Message {
    return m.role === 'tool' ? { ...m, tool_call_id: this.outside.get(m.tool_call_id) ?? m.tool_call_id } : m;
  }

  /**
   * A trajectory as the env sees it (for evaluate): the env's opening as it wrote it, then the
   * agent's calls that fit (their turns without text), each with its answer; calls that do not fit are left out with their
   * answers, and so is an assistant turn left with no call (its text too: a text-only turn the env
   * never stepped would tell that a refused call was there).
   */
  messages(ms: readonly Message[]): Message[] {
    const n = this.opening.length;
    const own = JSON.stringify(MessagesSchema.parse(ms.slice(0, n))) === this.openingJson;
    const refused = new Set<string>();
    const seen: Message[] = own ? ms.slice(0, n) : [];
    for (const m of own ? ms.slice(n) : ms) {
      if (m.role === 'assistant' && m.tool_calls?.length) {
        const fits = m.tool_calls.filter((c) => !this.fault(c));
        for (const c of m.tool_calls) if (!fits.includes(c)) refused.add(c.id);
        // Without the text beside the calls: validation's policies never write any (gold, random play
        // and the embedded server give a call turn no content), the trainer's may, and a module paid it
        // in training alone (rerun 22).
        if (fits.length) seen.push({ ...m, content: null, tool_calls: fits.map((c) => this.call(c)) });
      } else if (m.role === 'tool') {
        if (!refused.has(m.tool_call_id)) seen.push({ ...m, tool_call_id: this.id(m.tool_call_id) });
      } else if (m.role === 'assistant') seen.push({ role: 'assistant', content: m.content });
      else seen.push(m);
    }
    return MessagesSchema.parse(seen);
  }
}
