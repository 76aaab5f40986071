import type { Message, ToolCall, ToolSchema } from '../../core/messages.js';
import type { RewardInfo, Termination } from '../../core/trajectory.js';
import type { AgentAction, EnvInfo, Environment, Episode, ResetRequest, StepResult, TaskRef } from '../environment.js';
import { Rng } from './rng.js';
import { canonicalJson, cloneState } from './state.js';
import { runToolCall, toToolSchema, type ToolDef } from './tools.js';
import { scriptedUser, STOP, type UserSimulator } from './user.js';
import { toolCallsOf, type CallRecord, type Score } from './verify.js';

/** Who the environment is for: checked against the generator's manifest by validation check 1. */
export interface EnvMetadata {
  /** Short kebab-case name, e.g. 'airline-spend-audit'. */
  name: string;
  /** The capability it isolates (snake_case, from stage 1). */
  capability: string;
  /** The target environment whose interface it keeps, e.g. 'tau2-airline'. */
  targetEnv: string;
  /** Why skill gained here transfers to the target (1–3 sentences). */
  transferRationale: string;
  description: string;
}

/** One generated task. Everything in it must be JSON and a pure function of the seed. */
export interface Instance<S> {
  initialState: S;
  /** The user's first message. */
  userGoal: string;
  /** Scripted follow-ups, one per agent message (used by the default user); then the user stops. */
  userTurns?: string[];
  /**
   * Tool calls already made when the episode opens, after `userGoal` (e.g. a lookup already done,
   * so an environment can isolate the step after it). They run on the initial state at reset and
   * their real results open the transcript; the gold state replays them before `gold`.
   */
  prefix?: AgentAction[];
  /** A reference solution: replayed by validation (check 3) and to compute the gold state. */
  gold: AgentAction[];
  /** Anything else the verifier needs (expected values to communicate, required arguments…). */
  expect?: unknown;
}

export interface EvaluateContext<S, I> {
  instance: I;
  /** State after the agent's episode. */
  state: S;
  /** State after replaying the gold tool calls on a fresh copy of the initial state. */
  goldState: S;
  messages: readonly Message[];
  calls: CallRecord[];
  termination: Termination;
}

export interface EnvironmentDefinition<S, I extends Instance<S>> {
  metadata: EnvMetadata;
  /** The agent's system prompt: role and policy, in the target's style. */
  systemPrompt: string;
  tools: ToolDef<S>[];
  /** The seeded generator G(seed): draw every random choice from `rng`. */
  generate(seed: number, rng: Rng): I;
  /** Defaults to `scriptedUser()` (instance.userTurns, then STOP). */
  user?: UserSimulator<S, I>;
  evaluate(ctx: EvaluateContext<S, I>): Score;
  /** Safety cap on agent actions per episode (default 60). */
  maxSteps?: number;
}

/** What validation sees of an instance (never shown to the agent). */
export interface InstanceView {
  seed: number;
  metadata: EnvMetadata;
  /** Canonical JSON of the whole generated instance: byte-identical for the same seed. */
  instance: string;
  gold: AgentAction[];
}

export interface SyntheticEnvironment extends Environment {
  readonly metadata: EnvMetadata;
  inspect(seed: number): InstanceView;
}

/** Reset with this task id to receive an `InstanceView` (see `inspectInstance`). */
export const INSPECT_PREFIX = 'inspect:';
/** Endings neither the agent nor the env chose (limits, failures): they score 0. */
export const ABNORMAL: readonly Termination[] = ['max_steps', 'max_errors', 'timeout', 'error'];

/** A tool-call action, for gold solutions: call('cancel_reservation', { reservation_id: 'X1' }). */
export function call(name: string, args: Record<string, unknown> = {}): AgentAction {
  return {
    type: 'tool_call',
    call: { id: 'gold', type: 'function', function: { name, arguments: JSON.stringify(args) } },
  };
}

/** A message to the user, for gold solutions. */
export function say(content: string): AgentAction {
  return { type: 'message', content };
}

export function defineEnvironment<S, I extends Instance<S>>(def: EnvironmentDefinition<S, I>): SyntheticEnvironment {
  const names = new Set<string>();
  for (const t of def.tools) {
    if (names.has(t.name)) throw new Error(`defineEnvironment: duplicate tool '${t.name}'`);
    names.add(t.name);
  }
  const user = def.user ?? (scriptedUser() as UserSimulator<S, I>);
  const info: EnvInfo = {
    name: def.metadata.name,
    kind: 'synthetic',
    description: def.metadata.description,
    capability: def.metadata.capability,
    targetEnv: def.metadata.targetEnv,
  };
  const schemas = def.tools.map(toToolSchema);
  let episodes = 0;

  const make = (seed: number): I => def.generate(seed, new Rng(seed));
  const view = (seed: number): InstanceView => {
    const instance = make(seed);
    return { seed, metadata: def.metadata, instance: canonicalJson(instance), gold: withGoldIds(instance.gold) };
  };

  const runTool = (state: S, instance: I, tc: ToolCall) => runToolCall(def.tools, state, instance, tc);

  const goldStateOf = (instance: I): S => {
    const state = cloneState(instance.initialState);
    for (const a of [...(instance.prefix ?? []), ...instance.gold])
      if (a.type === 'tool_call') runTool(state, instance, a.call);
    return state;
  };

  /** The state and opening transcript of a fresh episode: the user's goal, then the prefix's calls and their results. */
  const open = (instance: I): { state: S; opening: Message[] } => {
    const state = cloneState(instance.initialState);
    const opening: Message[] = [{ role: 'user', content: instance.userGoal }];
    (instance.prefix ?? []).forEach((a, i) => {
      if (a.type !== 'tool_call') throw new Error(`${def.metadata.name}: instance.prefix[${i}] must be a tool call`);
      const call = { ...a.call, id: `prefix_${i}` };
      const r = runTool(state, instance, call);
      opening.push(
        { role: 'assistant', content: null, tool_calls: [call] },
        { role: 'tool', tool_call_id: call.id, content: r.content },
      );
    });
    return { state, opening };
  };

  class SyntheticEpisode implements Episode {
    private steps = 0;
    private turn = 0;
    private finished = false;
    private readonly transcript: Message[];

    constructor(
      readonly id: string,
      readonly taskId: string,
      private readonly instance: I,
      private readonly state: S,
      private readonly opening: Message[],
      transcript?: Message[],
      counters?: { steps: number; turn: number; finished: boolean },
    ) {
      this.transcript = transcript ?? [...opening];
      if (counters) Object.assign(this, counters);
    }

    initialMessages(): Message[] {
      return this.opening.map((m) => ({ ...m }));
    }

    async step(action: AgentAction): Promise<StepResult> {
      if (this.finished) throw new Error(`episode ${this.id} is finished`);
      if (this.taskId.startsWith(INSPECT_PREFIX)) throw new Error(`episode ${this.id} is an inspection episode`);
      this.steps++;
      if (action.type === 'tool_call') {
        this.transcript.push({ role: 'assistant', content: null, tool_calls: [action.call] });
        const r = runTool(this.state, this.instance, action.call);
        const observation: Message = { role: 'tool', tool_call_id: action.call.id, content: r.content };
        this.transcript.push(observation);
        if (!r.error && r.tool?.endsEpisode) {
          this.finished = true;
          return { observation, error: false, done: true, termination: 'agent_stop' };
        }
        return this.capped({ observation, error: r.error, done: false });
      }
      this.transcript.push({ role: 'assistant', content: action.content });
      if (action.content.includes(STOP)) {
        this.finished = true;
        return { observation: { role: 'user', content: STOP }, error: false, done: true, termination: 'agent_stop' };
      }
      const reply = await user({
        instance: this.instance,
        state: this.state,
        messages: this.transcript,
        turn: this.turn++,
      });
      const observation: Message = { role: 'user', content: reply };
      this.transcript.push(observation);
      if (reply.includes(STOP)) {
        this.finished = true;
        return { observation, error: false, done: true, termination: 'user_stop' };
      }
      return this.capped({ observation, error: false, done: false });
    }

    private capped(r: StepResult): StepResult {
      if (this.steps < (def.maxSteps ?? 60)) return r;
      this.finished = true;
      return { ...r, done: true, termination: 'max_steps' };
    }

    async evaluate(messages: Message[], termination: Termination): Promise<RewardInfo> {
      if (ABNORMAL.includes(termination))
        return { reward: 0, components: {}, success: false, details: { termination } };
      const score = def.evaluate({
        instance: this.instance,
        state: this.state,
        goldState: goldStateOf(this.instance),
        messages,
        calls: toolCallsOf(messages),
        termination,
      });
      if (typeof score?.reward !== 'number' || !Number.isFinite(score.reward))
        throw new Error(`${def.metadata.name}: evaluate returned a non-numeric reward`);
      return {
        reward: score.reward,
        components: score.components ?? {},
        success: score.success ?? score.reward >= 0.99,
        ...(score.details ? { details: score.details } : {}),
      };
    }

    async fork(): Promise<Episode> {
      const copy = new SyntheticEpisode(
        `${this.id}-fork${++episodes}`,
        this.taskId,
        this.instance,
        cloneState(this.state),
        this.opening,
        cloneState(this.transcript),
        {
          steps: this.steps,
          turn: this.turn,
          finished: this.finished,
        },
      );
      return copy;
    }

    async close(): Promise<void> {}
  }

  return {
    info,
    metadata: def.metadata,
    tools: (): ToolSchema[] => schemas,
    systemPrompt: () => def.systemPrompt,
    listTasks: async (): Promise<TaskRef[]> => [],
    inspect: view,
    async reset(req: ResetRequest): Promise<Episode> {
      const id = `${def.metadata.name}-${++episodes}`;
      if ('taskId' in req && req.taskId.startsWith(INSPECT_PREFIX)) {
        const seed = parseSeed(req.taskId.slice(INSPECT_PREFIX.length), req.taskId);
        const instance = make(seed);
        const opening: Message[] = [{ role: 'system', content: canonicalJson(view(seed)) }];
        return new SyntheticEpisode(id, req.taskId, instance, cloneState(instance.initialState), opening);
      }
      const seed = 'seed' in req ? req.seed : parseSeed(req.taskId.replace(/^seed-/, ''), req.taskId);
      const instance = make(seed);
      const { state, opening } = open(instance);
      return new SyntheticEpisode(id, `seed-${seed}`, instance, state, opening);
    },
  };
}

/**
 * The instance and gold solution of `seed`, through any `Environment` (in-process or over the env
 * protocol, e.g. a sandboxed one): resets with task id `inspect:<seed>`, whose only initial message
 * is a system message holding the `InstanceView` as JSON.
 */
export async function inspectInstance(
  env: Environment,
  seed: number,
  /** Throws where the view's JSON text may not be parsed (a sandboxed module's is untrusted). */
  check?: (text: string) => void,
): Promise<InstanceView> {
  const ep = await env.reset({ taskId: `${INSPECT_PREFIX}${seed}` });
  try {
    const m = ep.initialMessages()[0];
    if (m?.role !== 'system')
      throw new Error(`environment '${env.info.name}' does not support inspection (task id ${INSPECT_PREFIX}${seed})`);
    check?.(m.content);
    return JSON.parse(m.content) as InstanceView;
  } finally {
    await ep.close();
  }
}

function parseSeed(s: string, taskId: string): number {
  const n = Number(s);
  if (!Number.isSafeInteger(n))
    throw new Error(`unknown task id '${taskId}' (expected seed-<n> or ${INSPECT_PREFIX}<n>)`);
  return n;
}

function withGoldIds(gold: readonly AgentAction[]): AgentAction[] {
  return gold.map((a, i) => (a.type === 'tool_call' ? { type: 'tool_call', call: { ...a.call, id: `gold_${i}` } } : a));
}
