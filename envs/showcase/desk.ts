import type { Message, ToolSchema } from '../../core/messages.js';
import type { RewardInfo, Termination } from '../../core/trajectory.js';
import type { AgentAction, Environment, Episode, ResetRequest, StepResult, TaskRef } from '../environment.js';
import { deskHotel, deskTools, DESK_POLICY, type DeskDb } from '../sdk/desk.js';
import { Rng } from '../sdk/rng.js';
import { stableHash } from '../sdk/state.js';
import { runToolCall, toToolSchema } from '../sdk/tools.js';

/**
 * `showcase-desk`: a hotel front desk sized for a 135M policy. The guest asks to cancel a booking,
 * either by its code ("cancel booking R7KQ2") or by name ("cancel the booking for Mia Lee"); by
 * name the agent must look the code up first. Two tools with one string argument each (their
 * shapes live in the SDK, envs/sdk/desk.ts, so capability envs keep them exactly). The episode
 * ends at a successful cancellation, at the agent's second message (the guest answers the first
 * with a plain confirmation), or after MAX_STEPS agent actions. Reward 1 only when exactly the
 * asked-for booking is cancelled.
 */
export const SHOWCASE_DESK = 'showcase-desk';
const MAX_STEPS = 4;
const STOP = '###STOP###';
export const CONFIRM = 'Yes, please cancel it.';
const TOOL_DEFS = [deskTools.find_booking, deskTools.cancel_booking];
const TOOLS: ToolSchema[] = TOOL_DEFS.map(toToolSchema);

export type DeskTaskKind = 'by_code' | 'by_name';
export interface DeskTask {
  id: string;
  split: 'train' | 'test';
  kind: DeskTaskKind;
  opening: string;
  initialState: DeskDb;
  gold: AgentAction[];
}

const BY_CODE = [
  (c: string) => `Please cancel booking ${c}.`,
  (c: string) => `Cancel my booking ${c}, thanks.`,
  (c: string) => `Hi, booking ${c} needs to be cancelled.`,
];
const BY_NAME = [
  (n: string) => `Please cancel the booking for ${n}.`,
  (n: string) => `Hi, I'm ${n}. Cancel my booking, please.`,
  (n: string) => `Cancel ${n}'s booking, thanks.`,
];

/** Task i of the fixed set: its own small hotel, one guest to cancel. Pure function of i. */
function makeTask(i: number, split: DeskTask['split'], kind: DeskTaskKind): DeskTask {
  const rng = new Rng(`${SHOWCASE_DESK}:${i}`);
  const hotel = deskHotel(rng, rng.int(3, 5));
  const [code, { guest }] = rng.pick(Object.entries(hotel.bookings));
  const cancel = callAction('cancel_booking', { booking_code: code });
  return {
    id: `desk-${String(i).padStart(2, '0')}`,
    split,
    kind,
    opening: kind === 'by_name' ? rng.pick(BY_NAME)(guest) : rng.pick(BY_CODE)(code),
    initialState: hotel,
    gold: kind === 'by_name' ? [callAction('find_booking', { guest }), cancel] : [cancel],
  };
}

/** 20 train and 24 test tasks, half of each by code and half by name, interleaved. */
export const DESK_TASKS: readonly DeskTask[] = Array.from({ length: 44 }, (_, i) =>
  makeTask(i, i < 20 ? 'train' : 'test', i % 2 ? 'by_name' : 'by_code'),
);

function callAction(name: string, args: Record<string, string>): AgentAction {
  return {
    type: 'tool_call',
    call: { id: 'gold', type: 'function', function: { name, arguments: JSON.stringify(args) } },
  };
}

/** The state after the task's gold actions: what the verifier compares against. */
export function goldState(task: DeskTask): DeskDb {
  const state = structuredClone(task.initialState);
  for (const a of task.gold) {
    if (a.type !== 'tool_call') continue;
    const r = runToolCall(TOOL_DEFS, state, task, a.call);
    if (r.error) throw new Error(`${SHOWCASE_DESK}: gold action of ${task.id} failed: ${r.content}`);
  }
  return state;
}

const ABNORMAL: readonly Termination[] = ['max_steps', 'max_errors', 'timeout', 'error'];

class DeskEpisode implements Episode {
  private steps = 0;
  private messages = 0;
  private finished = false;

  constructor(
    readonly id: string,
    private readonly task: DeskTask,
    private readonly state: DeskDb,
  ) {}

  get taskId() {
    return this.task.id;
  }

  initialMessages(): Message[] {
    return [{ role: 'user', content: this.task.opening }];
  }

  async step(action: AgentAction): Promise<StepResult> {
    if (this.finished) throw new Error(`${SHOWCASE_DESK}: episode ${this.id} is finished`);
    this.steps++;
    if (action.type === 'message') {
      // One confirmation (the agent may ask before acting); the guest's second reply ends it.
      if (this.messages++ === 0 && this.steps < MAX_STEPS)
        return { observation: { role: 'user', content: CONFIRM }, error: false, done: false };
      this.finished = true;
      return { observation: { role: 'user', content: STOP }, error: false, done: true, termination: 'user_stop' };
    }
    const r = runToolCall(TOOL_DEFS, this.state, this.task, action.call);
    const observation: Message = { role: 'tool', tool_call_id: action.call.id, content: r.content };
    if (!r.error && r.tool?.endsEpisode) {
      this.finished = true;
      return { observation, error: false, done: true, termination: 'agent_stop' };
    }
    if (this.steps >= MAX_STEPS) {
      this.finished = true;
      return { observation, error: r.error, done: true, termination: 'max_steps' };
    }
    return { observation, error: r.error, done: false };
  }

  async evaluate(_messages: Message[], termination: Termination): Promise<RewardInfo> {
    const db = !ABNORMAL.includes(termination) && stableHash(this.state) === stableHash(goldState(this.task));
    const cancelled = Object.entries(this.state.bookings)
      .filter(([, b]) => b.status === 'cancelled')
      .map(([code]) => code);
    return {
      reward: db ? 1 : 0,
      components: { DB: db ? 1 : 0 },
      success: db,
      details: { kind: this.task.kind, cancelled, termination },
    };
  }

  async fork(): Promise<Episode> {
    const copy = new DeskEpisode(`${this.id}-fork`, this.task, structuredClone(this.state));
    Object.assign(copy, { steps: this.steps, messages: this.messages, finished: this.finished });
    return copy;
  }

  async close() {}
}

export function deskTask(taskId: string): DeskTask {
  const task = DESK_TASKS.find((t) => t.id === taskId);
  if (!task) throw new Error(`${SHOWCASE_DESK}: unknown taskId '${taskId}'`);
  return task;
}

export function createShowcaseDeskEnv(): Environment {
  let episodes = 0;
  return {
    info: {
      name: SHOWCASE_DESK,
      kind: 'target',
      description: `Hotel front desk for small models: cancel a booking by code or by guest name (2 tools, ${DESK_TASKS.length} tasks).`,
    },
    tools: () => structuredClone(TOOLS),
    systemPrompt: () => DESK_POLICY,
    listTasks: async (): Promise<TaskRef[]> => DESK_TASKS.map((t) => ({ id: t.id, split: t.split })),
    async reset(req: ResetRequest): Promise<Episode> {
      const n = DESK_TASKS.length;
      const task = 'taskId' in req ? deskTask(req.taskId) : DESK_TASKS[((req.seed % n) + n) % n];
      return new DeskEpisode(`${SHOWCASE_DESK}-${++episodes}`, task, structuredClone(task.initialState));
    },
  };
}
