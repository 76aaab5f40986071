import { randomUUID } from 'node:crypto';
import type { Message } from '../../core/messages.js';
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
import { getDomain, readDataFile, toolSchemas, type Tau2Domain, type Tau2DomainName } from './domains.js';
import { evaluateTau2 } from './evaluator.js';
import type { JudgeLlm } from './nl-judge.js';
import { historyAsMessages, parseArguments, Tau2State, type ReplayCall } from './state.js';
import { loadTasks, taskSplits, type Tau2Task, type TaskSet } from './tasks.js';
import {
  STOP,
  UserSimulator,
  userSimulatorSystemPrompt,
  userStopReason,
  type UserSimulatorLlm,
} from './user-simulator.js';

/** tau2's agent instruction block (agent/llm_agent.py), wrapped with the domain policy. */
export const AGENT_INSTRUCTION = `You are a customer service agent that helps the user according to the <policy> provided below.
In each turn you can either:
- Send a message to the user.
- Make a tool call.
You cannot do both at the same time.

Try to be helpful and always follow the policy. Always make sure you generate valid JSON only.`;
export const GREETING = 'Hi! How can I help you today?';
/** tau2's run defaults (config.py): DEFAULT_MAX_STEPS and DEFAULT_MAX_ERRORS. */
export const TAU2_MAX_STEPS = 200;
export const TAU2_MAX_ERRORS = 10;

export interface Tau2EnvOptions {
  taskSet?: TaskSet;
  userSimulator?: UserSimulatorLlm;
  judge?: JudgeLlm;
  maxSteps?: number;
  maxErrors?: number;
}

export function createTau2Environment(domainName: Tau2DomainName, opts: Tau2EnvOptions = {}): Environment {
  const domain = getDomain(domainName);
  const taskSet = opts.taskSet ?? 'current';
  const tools = toolSchemas(domain.name);
  const systemPrompt = `<instructions>\n${AGENT_INSTRUCTION}\n</instructions>\n<policy>\n${readDataFile(domain.name, 'policy.md')}\n</policy>`;
  const info: EnvInfo = {
    name: `tau2-${domain.name}`,
    kind: 'target',
    description: `tau2-bench ${domain.name} domain (${taskSet} tasks), ported exactly from sierra-research/tau2-bench`,
  };
  return {
    info,
    tools: () => tools,
    systemPrompt: () => systemPrompt,
    async listTasks(): Promise<TaskRef[]> {
      const splits = taskSplits(domain.name);
      return loadTasks(domain.name, taskSet).map((t) => {
        const names = splits.get(t.id) ?? [];
        return { id: t.id, split: names.find((s) => s !== 'base') ?? names[0] };
      });
    },
    async reset(req: ResetRequest, ropts?: RequestOptions): Promise<Episode> {
      if (!('taskId' in req)) throw new Error(`tau2-${domain.name} has fixed tasks: reset needs {taskId}, not a seed`);
      const task = loadTasks(domain.name, taskSet).find((t) => t.id === req.taskId);
      if (!task) throw new Error(`taskId: '${req.taskId}' is not a tau2 ${domain.name} task (${taskSet} set)`);
      return Tau2Episode.start(domain, task, opts, ropts?.signal);
    },
  };
}

interface Counters {
  steps: number;
  errors: number;
  done: boolean;
  termination?: Termination;
}

class Tau2Episode implements Episode {
  readonly id = randomUUID();
  private constructor(
    private readonly domain: Tau2Domain,
    private readonly task: Tau2Task,
    private readonly opts: Tau2EnvOptions,
    private readonly state: Tau2State,
    private readonly user: UserSimulator | undefined,
    private readonly opening: Message[],
    private readonly userCalls: ReplayCall[],
    private readonly counters: Counters,
  ) {}

  get taskId(): string {
    return this.task.id;
  }

  /** `signal` aborts the user simulator's opening turn (an LLM call). */
  static async start(
    domain: Tau2Domain,
    task: Tau2Task,
    opts: Tau2EnvOptions,
    signal?: AbortSignal,
  ): Promise<Tau2Episode> {
    const state = Tau2State.forTask(domain, task);
    const user = opts.userSimulator
      ? new UserSimulator(
          opts.userSimulator,
          userSimulatorSystemPrompt(task, !!domain.user),
          domain.user ? toolSchemas(domain.name, 'user') : undefined,
        )
      : undefined;
    const history = historyAsMessages(task.initial_state?.message_history ?? []);
    const ep = new Tau2Episode(domain, task, opts, state, user, [], [], { steps: 0, errors: 0, done: false });
    if (history.length) {
      ep.opening.push(...history);
      for (const m of history) {
        if (m.role === 'user' && m.content) user?.messages.push({ role: 'assistant', content: m.content });
        else if (m.role === 'assistant' && m.content && !m.tool_calls) user?.hearAgent(m.content);
      }
      const last = history[history.length - 1];
      if (!(last.role === 'assistant' && !last.tool_calls && last.content)) return ep; // the agent speaks next
    } else {
      ep.opening.push({ role: 'assistant', content: GREETING });
      user?.hearAgent(GREETING);
    }
    if (user) {
      ep.counters.steps += 1;
      ep.opening.push(await ep.userReply(signal));
    }
    return ep;
  }

  initialMessages(): Message[] {
    return structuredClone(this.opening);
  }

  async step(action: AgentAction, ropts?: RequestOptions): Promise<StepResult> {
    const c = this.counters;
    if (c.done) throw new Error(`episode ${this.id} is over (${c.termination})`);
    let observation: Message;
    let error = false;
    if (action.type === 'tool_call') {
      const args = parseArguments(action.call.function.arguments);
      const out = args
        ? this.state.call('assistant', action.call.function.name, args)
        : {
            content: `Error: tool call arguments are not a JSON object: ${action.call.function.arguments.slice(0, 200)}`,
            error: true,
          };
      observation = { role: 'tool', tool_call_id: action.call.id, content: out.content };
      error = out.error;
      c.steps += 2;
      if (error) c.errors += 1;
    } else if (action.content.includes(STOP)) {
      c.steps += 1;
      c.done = true;
      c.termination = 'agent_stop';
      return { observation: { role: 'user', content: '' }, error: false, done: true, termination: 'agent_stop' };
    } else {
      if (!this.user)
        throw new Error(`tau2-${this.domain.name}: an agent message needs a user simulator (pass opts.userSimulator)`);
      this.user.hearAgent(action.content);
      c.steps += 2;
      observation = await this.userReply(ropts?.signal);
    }
    if (!c.done && c.steps >= (this.opts.maxSteps ?? TAU2_MAX_STEPS))
      Object.assign(c, { done: true, termination: 'max_steps' });
    if (!c.done && c.errors >= (this.opts.maxErrors ?? TAU2_MAX_ERRORS))
      Object.assign(c, { done: true, termination: 'max_errors' });
    return { observation, error, done: c.done, ...(c.termination ? { termination: c.termination } : {}) };
  }

  /** The simulated user's next text turn, running its own tool calls first (mock). */
  private async userReply(signal?: AbortSignal): Promise<Message> {
    const user = this.user!;
    const c = this.counters;
    for (;;) {
      const turn = await user.next(signal);
      if (!turn.toolCalls.length) {
        const content = turn.content ?? '';
        const stop = userStopReason(content);
        if (stop) Object.assign(c, { done: true, termination: stop });
        return { role: 'user', content };
      }
      for (const tc of turn.toolCalls) {
        const args = parseArguments(tc.function.arguments);
        const out = args
          ? this.state.call('user', tc.function.name, args)
          : { content: `Error: tool call arguments are not a JSON object`, error: true };
        if (args) this.userCalls.push({ requestor: 'user', name: tc.function.name, args, expected: out.content });
        user.hearToolResult(tc.id, out.content);
        c.steps += 2;
        if (out.error) c.errors += 1;
      }
      if (c.steps >= (this.opts.maxSteps ?? TAU2_MAX_STEPS) || c.errors >= (this.opts.maxErrors ?? TAU2_MAX_ERRORS)) {
        Object.assign(c, {
          done: true,
          termination: c.errors >= (this.opts.maxErrors ?? TAU2_MAX_ERRORS) ? 'max_errors' : 'max_steps',
        });
        return { role: 'user', content: turn.content ?? '' };
      }
    }
  }

  evaluate(messages: Message[], termination: Termination, ropts?: RequestOptions): Promise<RewardInfo> {
    return evaluateTau2({
      domain: this.domain,
      task: this.task,
      messages,
      termination,
      userCalls: this.userCalls,
      judge: this.opts.judge,
      signal: ropts?.signal,
    });
  }

  async fork(): Promise<Episode> {
    return new Tau2Episode(
      this.domain,
      this.task,
      this.opts,
      this.state.fork(),
      this.user?.fork(),
      structuredClone(this.opening),
      structuredClone(this.userCalls),
      { ...this.counters },
    );
  }

  async close(): Promise<void> {}
}
