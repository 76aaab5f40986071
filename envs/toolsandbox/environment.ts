import { createHash, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type OpenAI from 'openai';
import { z } from 'zod';
import type { Message, ToolCall, ToolSchema } from '../../core/messages.js';
import type { RewardInfo, Termination } from '../../core/trajectory.js';
import type {
  AgentAction,
  EnvInfo,
  Environment,
  Episode,
  RequestOptions,
  ResetRequest,
  StepResult,
  TaskRef,
} from '../environment.js';
import type { EnvLlm } from '../registry.js';
import { pyNumber, pyStrRepr } from '../tau2/python-format.js';
import type { Row, SandboxContext } from './context.js';
import { evaluateContext } from './evaluator.js';
import { BASE_VARIANT, loadPack, loadScenarios, type ToolSandboxScenario } from './scenarios.js';
import { callTool, parseToolArguments, PORTED_TOOLS, type ToolOutcome } from './tools.js';

/**
 * ToolSandbox as an Environment: one episode per scenario, played as upstream's Scenario.play does
 * (tool_sandbox/common/scenario.py) with the OpenAI agent / user roles' message handling
 * (roles/openai_api_agent.py, roles/openai_api_user.py): every turn is a SANDBOX message, a tool
 * call is the Python code upstream's agent writes, its trace lands on that message, the execution
 * environment answers with repr(result) or the exception line; the simulated user sees the SANDBOX
 * messages visible to it (its system prompt, the few-shot dialogue, the conversation with roles
 * flipped) and ends the conversation by calling `end_conversation`. The episode's score is upstream's
 * milestone similarity of the finished world state (evaluator.ts).
 * Derived from apple/ToolSandbox (Copyright (C) 2024 Apple Inc.; licence in data/toolsandbox/LICENSE).
 */

const SCHEMA_FILE = new URL('../../data/toolsandbox/derived/tools_openai_schema.json', import.meta.url);
const SchemaFile = z.object({
  augmentations: z.record(
    z.string(),
    z.array(z.object({ type: z.literal('function'), function: z.object({ name: z.string() }).passthrough() })),
  ),
  scrambled_names: z.record(z.string(), z.string()),
  visible_to: z.record(z.string(), z.array(z.string())),
});

interface Schemas {
  /** Execution-facing tool names in upstream's registry order (name_to_tool). */
  order: string[];
  /** augmentation ('none', TOOL_NAME_SCRAMBLED, …) → execution-facing name → the schema the agent sees. */
  byAugmentation: Map<string, Map<string, ToolSchema>>;
  scrambledNames: Record<string, string>;
}
let schemas: Schemas | undefined;
/** Upstream's OpenAI schemas of every tool under each augmentation (data/toolsandbox/SOURCE.md). */
function toolSchemas(): Schemas {
  if (!schemas) {
    const parsed = SchemaFile.parse(JSON.parse(readFileSync(SCHEMA_FILE, 'utf8')));
    const order = parsed.augmentations.none.map((t) => t.function.name);
    const byAugmentation = new Map<string, Map<string, ToolSchema>>();
    for (const [aug, list] of Object.entries(parsed.augmentations)) {
      // Each list is the same registry in the same order; a name-scrambled entry carries the scrambled name.
      if (list.length !== order.length)
        throw new Error(`tools_openai_schema.json: ${aug} lists ${list.length} tools, none lists ${order.length}`);
      byAugmentation.set(
        aug,
        new Map(
          list.map((t, i) => {
            const expected = aug === NAME_SCRAMBLED ? parsed.scrambled_names[order[i]] : order[i];
            if (t.function.name !== expected)
              throw new Error(`tools_openai_schema.json: ${aug}[${i}] is '${t.function.name}', expected '${expected}'`);
            return [order[i], t as unknown as ToolSchema];
          }),
        ),
      );
    }
    schemas = { order, byAugmentation, scrambledNames: parsed.scrambled_names };
  }
  return schemas;
}
const NAME_SCRAMBLED = 'TOOL_NAME_SCRAMBLED';

/** The user's own tool (visible_to USER). */
const USER_TOOLS = ['end_conversation'];

/** get_available_tools: the allow list less the deny list (the user's end_conversation included). */
const availableTools = (s: ToolSandboxScenario): string[] => s.toolAllowList.filter((t) => !s.toolDenyList.includes(t));

/** Why a scenario is not offered offline, or undefined when it runs. */
export function offlineSkipReason(s: ToolSandboxScenario): string | undefined {
  const missing = availableTools(s).filter((t) => !PORTED_TOOLS.includes(t));
  // A variant's distraction tools may be RapidAPI ones even when the base scenario needs no network.
  if (s.needsNetwork || missing.some((t) => loadPack().tool_modules[t] === 'rapid_api_search_tools'))
    return 'need RapidAPI (network)';
  if (missing.length) return `use a tool not ported yet (${[...new Set(missing)].join(', ')})`;
  return undefined;
}

/**
 * Upstream has no train/test split (the paper scores all 129 base scenarios). TRACE's evaluation
 * refuses to score tasks that rollouts saw, so the port assigns one, fixed and reproducible: the
 * low bit of sha256(scenario name) — 'test' when set, else 'train'.
 */
export function scenarioSplit(name: string): 'train' | 'test' {
  return createHash('sha256').update(name).digest()[0] & 1 ? 'test' : 'train';
}

/** `toolsandbox-<category>`: a scenario category, lower-cased (single_tool_call, canonicalization, …). */
export function scenarioCategories(): string[] {
  return [
    ...new Set(
      loadScenarios()
        .filter((s) => s.variant === BASE_VARIANT)
        .flatMap((s) => s.categories),
    ),
  ]
    .map((c) => c.toLowerCase())
    .sort();
}

/** `toolsandbox-<variant>`: upstream's augmented variants (3_distraction_tools, …_tool_name_scrambled, …). */
export function scenarioVariants(): string[] {
  return [...new Set(loadScenarios().map((s) => s.variant))].filter((v) => v !== BASE_VARIANT);
}

export interface ToolSandboxEnvOptions {
  /** Only scenarios of this category (lower-case upstream name). */
  category?: string;
  /** An augmented variant instead of the base scenarios. */
  variant?: string;
  /** The user-simulator role; without it an agent's message to the user fails with a one-line error. */
  userSimulator?: EnvLlm;
}

export function createToolSandboxEnvironment(opts: ToolSandboxEnvOptions = {}): Environment {
  const all = loadScenarios();
  const base = all.filter((s) => s.variant === BASE_VARIANT);
  const variant = opts.variant ?? BASE_VARIANT;
  if (variant !== BASE_VARIANT && !scenarioVariants().includes(variant)) {
    throw new Error(`toolsandbox: unknown variant '${variant}' (known: ${scenarioVariants().join(', ')})`);
  }
  if (opts.category !== undefined && !scenarioCategories().includes(opts.category)) {
    throw new Error(`toolsandbox: unknown category '${opts.category}' (known: ${scenarioCategories().join(', ')})`);
  }
  const selected = all.filter(
    (s) =>
      s.variant === variant &&
      (opts.category === undefined || s.categories.map((c) => c.toLowerCase()).includes(opts.category)),
  );
  const runnable = selected.filter((s) => !offlineSkipReason(s));
  const skipped = new Map<string, number>();
  for (const s of selected) {
    const why = offlineSkipReason(s);
    if (why) skipped.set(why, (skipped.get(why) ?? 0) + 1);
  }
  const name =
    variant !== BASE_VARIANT
      ? `toolsandbox-${variant}`
      : opts.category === undefined
        ? 'toolsandbox'
        : `toolsandbox-${opts.category}`;
  const skippedText = [...skipped].map(([why, n]) => `${n} ${why}`).join('; ');
  const info: EnvInfo = {
    name,
    kind: 'target',
    description:
      `apple/ToolSandbox ${variant === BASE_VARIANT ? 'base' : variant} scenarios${opts.category ? ` (${opts.category})` : ''}: ${runnable.length} of ${selected.length} offline-runnable` +
      (skipped.size ? `, skipped ${selected.length - runnable.length} (${skippedText})` : '') +
      '; scored by milestone similarity (perfect = 1.0)',
  };
  // The union of the offered scenarios' agent tools; each episode shows the agent only its own allow list.
  const augmentations = runnable[0]?.toolAugmentationList ?? [];
  const allTools = [...new Set(runnable.flatMap(availableTools))].filter((t) => !USER_TOOLS.includes(t)).sort();
  const prefix = base[0].startingContext().getDatabase('SANDBOX', { allHistory: true });
  const systemPrompt = String(prefix.find((r) => r.sender === 'SYSTEM' && r.recipient === 'AGENT')?.content ?? '');
  return {
    info,
    tools: () => allTools.map((t) => schemaOf(t, augmentations)),
    systemPrompt: () => systemPrompt,
    async listTasks(): Promise<TaskRef[]> {
      return runnable.map((s) => ({ id: s.name, split: scenarioSplit(s.name) }));
    },
    async reset(req: ResetRequest): Promise<Episode> {
      if (!('taskId' in req)) throw new Error(`${name} has fixed scenarios: reset needs {taskId}, not a seed`);
      const s = selected.find((x) => x.name === req.taskId);
      if (!s) throw new Error(`taskId: '${req.taskId}' is not a ${name} scenario`);
      const why = offlineSkipReason(s);
      if (why) throw new Error(`taskId: scenario '${s.name}' cannot run offline (${why})`);
      return ToolSandboxEpisode.start(s, opts.userSimulator);
    },
  };
}

/** A tool's schema as the agent of a scenario with these augmentations sees it (the user's tools are never scrambled). */
function schemaOf(tool: string, augmentations: readonly string[] = []): ToolSchema {
  const all = toolSchemas().byAugmentation;
  const aug = USER_TOOLS.includes(tool) ? 'none' : (augmentations.find((a) => all.has(a)) ?? 'none');
  const s = all.get(aug)!.get(tool);
  if (!s) throw new Error(`tools_openai_schema.json: no schema for tool '${tool}'`);
  return s;
}

/** The agent-facing name of a tool (get_agent_facing_tool_name: scrambled under TOOL_NAME_SCRAMBLED). */
function agentFacingName(tool: string, augmentations: readonly string[]): string {
  return augmentations.includes(NAME_SCRAMBLED) && !USER_TOOLS.includes(tool)
    ? toolSchemas().scrambledNames[tool]
    : tool;
}

/** A SANDBOX message's visible_to: upstream's Message defaults it to [sender, recipient]; rows written as data leave it null. */
function visibleTo(r: Row): string[] {
  return (r.visible_to as string[] | null) ?? [r.sender as string, r.recipient as string];
}

/** Python's repr of the JSON arguments dict (floats kept as floats), as the agent's tool-call code embeds it. */
function argsRepr(args: Record<string, unknown>, floats: Set<string>): string {
  const repr = (v: unknown, isFloat: boolean): string => {
    if (v === null) return 'None';
    if (typeof v === 'boolean') return v ? 'True' : 'False';
    if (typeof v === 'number') return pyNumber(v, isFloat);
    if (typeof v === 'string') return pyStrRepr(v);
    if (Array.isArray(v)) return `[${v.map((x) => repr(x, false)).join(', ')}]`;
    return `{${Object.entries(v as object)
      .map(([k, x]) => `${pyStrRepr(k)}: ${repr(x, false)}`)
      .join(', ')}}`;
  };
  return `{${Object.entries(args)
    .map(([k, v]) => `${pyStrRepr(k)}: ${repr(v, floats.has(k))}`)
    .join(', ')}}`;
}

/** openai_tool_call_to_python_code. */
function toolCallCode(id: string, name: string, args: Record<string, unknown>, floats: Set<string>): string {
  return `${id}_parameters = ${argsRepr(args, floats)}\n${id}_response = ${name}(**${id}_parameters)\nprint(repr(${id}_response))`;
}

interface State {
  done: boolean;
  termination?: Termination;
}

class ToolSandboxEpisode implements Episode {
  readonly id = randomUUID();
  private constructor(
    private readonly scenario: ToolSandboxScenario,
    private readonly ctx: SandboxContext,
    /** max_sandbox_message_index once the starting context is laid (Scenario.play's loop bound). */
    private readonly startIndex: number,
    private readonly user: EnvLlm | undefined,
    private readonly state: State,
  ) {}

  static start(s: ToolSandboxScenario, user: EnvLlm | undefined): ToolSandboxEpisode {
    const ctx = s.startingContext();
    return new ToolSandboxEpisode(s, ctx, ctx.maxSandboxMessageIndex, user, { done: false });
  }

  get taskId(): string {
    return this.scenario.name;
  }

  /**
   * The agent's tools for this scenario, not the env-wide union: its allow list in the order of
   * upstream's tool registry (get_available_tools filters name_to_tool; the allow list's own,
   * shuffled order does not show).
   */
  tools(): ToolSchema[] {
    const allowed = new Set(availableTools(this.scenario).filter((t) => !USER_TOOLS.includes(t)));
    return toolSchemas()
      .order.filter((t) => allowed.has(t))
      .map((t) => schemaOf(t, this.scenario.toolAugmentationList));
  }

  /** Agent-facing name → execution-facing name, for this scenario's agent tools. */
  private agentToolNames(): Map<string, string> {
    const augs = this.scenario.toolAugmentationList;
    return new Map(
      availableTools(this.scenario)
        .filter((t) => !USER_TOOLS.includes(t))
        .map((t) => [agentFacingName(t, augs), t]),
    );
  }

  /** The scenario's opening messages as the agent sees them (after the system prompt): the first user turn. */
  initialMessages(): Message[] {
    return this.ctx
      .getDatabase('SANDBOX', { allHistory: true })
      .filter((r) => r.sender === 'USER' && r.recipient === 'AGENT' && visibleTo(r).includes('AGENT'))
      .map((r) => ({ role: 'user', content: String(r.content) }));
  }

  private add(row: Row): void {
    this.ctx.addToDatabase('SANDBOX', [{ visible_to: [row.sender, row.recipient], ...row }]);
  }

  /** Runs a tool call message as the execution environment and adds its reply (which carries the tool trace). */
  private execute(sender: 'AGENT' | 'USER', call: ToolCall, allowed: Map<string, string>): ToolOutcome {
    const name = call.function.name;
    // The code runs the execution-facing tool; the message keeps the name the agent used.
    const exec = allowed.get(name) ?? name;
    let parsed: ReturnType<typeof parseToolArguments> | undefined;
    let bad: string | undefined;
    try {
      parsed = parseToolArguments(call.function.arguments);
    } catch (e) {
      bad = `Error: tool call arguments are not a JSON object: ${(e as Error).message}`;
    }
    const ids = sender === 'AGENT' ? { openai_tool_call_id: call.id, openai_function_name: name } : {};
    // Upstream's agent raises (the scenario crashes) on an unknown tool or unparsable arguments;
    // here the agent is told, as an exception line, and the turn counts.
    if (!bad && !allowed.has(name))
      bad = `KeyError: "Agent tool call agent_facing_tool_name='${name}' is not a known allowed tool."`;
    this.add({
      sender,
      recipient: 'EXECUTION_ENVIRONMENT',
      content: parsed ? toolCallCode(call.id, exec, parsed.args, parsed.floats) : call.function.arguments,
      ...ids,
    });
    const out: ToolOutcome = bad
      ? { content: bad, exception: bad, trace: null }
      : callTool(this.ctx, exec, parsed!.args, parsed!.floats);
    // The execution environment moves the trace from the call message onto its reply
    // (roles/execution_environment.py: erased on the call with update_database, set on the response).
    if (out.trace !== null)
      this.ctx.updateDatabase('SANDBOX', [{ ...this.ctx.getDatabase('SANDBOX')[0], tool_trace: null }]);
    this.add({
      sender: 'EXECUTION_ENVIRONMENT',
      recipient: sender,
      content: out.content,
      tool_call_exception: out.exception,
      ...(out.trace !== null ? { tool_trace: [out.trace] } : {}),
      ...ids,
    });
    return out;
  }

  private get conversationActive(): boolean {
    return this.ctx.getDatabase('SANDBOX')[0].conversation_active as boolean;
  }

  /** Scenario.play's loop condition: the conversation is active and fewer than max_messages were added. */
  private checkLimits(): void {
    if (!this.conversationActive) Object.assign(this.state, { done: true, termination: 'user_stop' });
    else if (this.ctx.maxSandboxMessageIndex >= this.scenario.maxMessages + this.startIndex)
      Object.assign(this.state, { done: true, termination: 'max_steps' });
  }

  async step(action: AgentAction, ropts?: RequestOptions): Promise<StepResult> {
    if (this.state.done) throw new Error(`episode ${this.id} is over (${this.state.termination})`);
    let observation: Message;
    let error = false;
    if (action.type === 'tool_call') {
      const out = this.execute('AGENT', action.call, this.agentToolNames());
      observation = { role: 'tool', tool_call_id: action.call.id, content: out.content };
      error = out.exception !== null;
    } else {
      this.add({ sender: 'AGENT', recipient: 'USER', content: action.content });
      this.checkLimits();
      observation = this.state.done ? { role: 'user', content: '' } : await this.userTurn(ropts?.signal);
    }
    this.checkLimits();
    return {
      observation,
      error,
      done: this.state.done,
      ...(this.state.termination ? { termination: this.state.termination } : {}),
    };
  }

  /** The simulated user's messages as its OpenAI request shows them (openai_api_user.to_openai_messages). */
  userView(): OpenAI.Chat.ChatCompletionMessageParam[] {
    const out: OpenAI.Chat.ChatCompletionMessageParam[] = [];
    for (const r of this.ctx.getDatabase('SANDBOX', { allHistory: true })) {
      if (!visibleTo(r).includes('USER')) continue;
      const content = String(r.content ?? '');
      if (r.sender === 'SYSTEM' && r.recipient === 'USER') out.push({ role: 'system', content });
      else if (r.sender === 'AGENT' && r.recipient === 'USER') out.push({ role: 'user', content });
      else if (r.sender === 'USER' && r.recipient === 'AGENT') out.push({ role: 'assistant', content });
    }
    return out;
  }

  /** `signal` aborts the user simulator's request (the episode was cancelled or ran out of time). */
  private async userTurn(signal?: AbortSignal): Promise<Message> {
    const llm = this.user;
    if (!llm) throw new Error(`${this.scenario.name}: an agent message needs the user simulator (llm.userSimulator)`);
    const res = await llm.client.chat.completions.create(
      {
        model: typeof llm.model === 'string' ? llm.model : await llm.model(),
        ...(llm.temperature !== undefined ? { temperature: llm.temperature } : {}),
        messages: this.userView(),
        tools: USER_TOOLS.map((t) => schemaOf(t)) as OpenAI.Chat.ChatCompletionTool[],
      },
      signal ? { signal } : undefined,
    );
    const msg = res.choices[0]?.message;
    if (!msg) throw new Error('user simulator returned no choices');
    const calls = (msg.tool_calls ?? []).filter(
      (c): c is OpenAI.Chat.ChatCompletionMessageFunctionToolCall => c.type === 'function',
    );
    if (!calls.length) {
      const content = msg.content ?? '';
      this.add({ sender: 'USER', recipient: 'AGENT', content });
      return { role: 'user', content };
    }
    for (const c of calls)
      this.execute(
        'USER',
        { id: c.id, type: 'function', function: { name: c.function.name, arguments: c.function.arguments } },
        new Map(USER_TOOLS.map((t) => [t, t])),
      );
    return { role: 'user', content: msg.content ?? '' };
  }

  async evaluate(_messages: Message[], termination: Termination): Promise<RewardInfo> {
    const r = evaluateContext(this.scenario.evaluation, this.ctx);
    return {
      reward: r.similarity,
      success: r.similarity === 1,
      components: {
        similarity: r.similarity,
        milestone_similarity: r.milestone_similarity,
        minefield_similarity: r.minefield_similarity,
      },
      details: {
        scenario: this.scenario.name,
        categories: this.scenario.categories,
        termination,
        turn_count: r.turn_count,
        milestone_mapping: r.milestone_mapping,
        minefield_mapping: r.minefield_mapping,
      },
    };
  }

  /** The world state so far (SANDBOX messages and databases), for replays and tests. */
  context(): SandboxContext {
    return this.ctx;
  }

  async fork(): Promise<Episode> {
    return new ToolSandboxEpisode(this.scenario, this.ctx.clone(), this.startIndex, this.user, { ...this.state });
  }

  async close(): Promise<void> {}
}
