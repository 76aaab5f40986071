import { isDeepStrictEqual } from 'node:util';
import { z } from 'zod';
import { MessageSchema, ToolSchemaSchema } from '../../core/messages.js';
import { RewardInfoSchema } from '../../core/trajectory.js';
import type { AgentAction, Environment, Episode, ResetRequest, StepResult } from '../environment.js';
import { describeZodError, EnvInfoSchema, StepResultSchema, TaskRefSchema } from './schemas.js';

/**
 * A conformance suite any Environment implementation can run (in-process, over HTTP, in the
 * sandbox): every check is named and reports why it failed instead of throwing.
 */
export interface ConformanceOptions {
  /** What to reset; default: the first listed task, or seed 0 when the env lists none. */
  reset?: ResetRequest;
  /**
   * A deterministic tool call used for the step and fork checks; ideally one that changes state, so
   * fork independence is actually exercised. Default: the first tool with `{}` arguments.
   */
  toolCall?: { name: string; arguments: string };
  /** The agent message for the message-step check (default 'Hello'). */
  message?: string;
}

export interface ConformanceCheck {
  name: string;
  ok: boolean;
  detail: string;
}

export async function runConformance(env: Environment, opts: ConformanceOptions = {}): Promise<ConformanceCheck[]> {
  const checks: ConformanceCheck[] = [];
  const open: Episode[] = [];
  let callSeq = 0;
  const callAction = (name: string, args: string): Extract<AgentAction, { type: 'tool_call' }> => ({
    type: 'tool_call',
    call: { id: `conformance_${++callSeq}`, type: 'function', function: { name, arguments: args } },
  });

  async function check(name: string, fn: () => Promise<string> | string): Promise<boolean> {
    try {
      checks.push({ name, ok: true, detail: await fn() });
      return true;
    } catch (err) {
      checks.push({ name, ok: false, detail: err instanceof Error ? err.message : String(err) });
      return false;
    }
  }
  const reset = async (req: ResetRequest) => {
    const e = await env.reset(req);
    open.push(e);
    return e;
  };

  await check('info', () => `${parseOrThrow(EnvInfoSchema, env.info, 'info').name}`);
  let toolNames: string[] = [];
  await check('tools', () => {
    const tools = parseOrThrow(z.array(ToolSchemaSchema), env.tools(), 'tools()');
    toolNames = tools.map((t) => t.function.name);
    if (toolNames.length === 0) throw new Error('tools() is empty');
    const dup = toolNames.find((n, i) => toolNames.indexOf(n) !== i);
    if (dup) throw new Error(`tool '${dup}' is listed twice`);
    return `${toolNames.length} tools`;
  });
  await check('systemPrompt', () => `${parseOrThrow(z.string(), env.systemPrompt(), 'systemPrompt()').length} chars`);

  let resetReq: ResetRequest | undefined = opts.reset;
  await check('listTasks', async () => {
    const tasks = parseOrThrow(z.array(TaskRefSchema), await env.listTasks(), 'listTasks()');
    resetReq ??= tasks.length ? { taskId: tasks[0].id } : { seed: 0 };
    return tasks.length ? `${tasks.length} tasks` : 'no fixed tasks (seeded env)';
  });
  resetReq ??= { seed: 0 };

  const call = opts.toolCall ?? (toolNames.length ? { name: toolNames[0], arguments: '{}' } : undefined);
  let episode: Episode | undefined;
  await check('reset', async () => {
    episode = await reset(resetReq!);
    if (typeof episode.id !== 'string' || !episode.id) throw new Error('episode.id is empty');
    if (typeof episode.taskId !== 'string') throw new Error('episode.taskId is not a string');
    const msgs = parseOrThrow(z.array(MessageSchema), episode.initialMessages(), 'initialMessages()');
    return `${JSON.stringify(resetReq)} → ${msgs.length} initial messages`;
  });
  if (!episode) return finish();
  const ep = episode;

  if (call) {
    await check('tool call step', async () => {
      const action = callAction(call.name, call.arguments);
      const r = await stepChecked(ep, action);
      if (r.observation.role !== 'tool')
        throw new Error(`observation role is '${r.observation.role}', expected 'tool'`);
      if (r.observation.tool_call_id !== action.call.id)
        throw new Error('observation.tool_call_id does not echo the call id');
      return `error=${r.error} done=${r.done}`;
    });
  }
  await check('bad JSON arguments → error observation', async () => {
    const r = await stepChecked(ep, callAction(call?.name ?? 'x', '{not json'));
    if (!r.error || r.observation.role !== 'tool') throw new Error('expected a tool observation with error=true');
    return r.observation.content.slice(0, 80);
  });
  await check('unknown tool → error observation', async () => {
    const r = await stepChecked(ep, callAction('no_such_tool_conformance', '{}'));
    if (!r.error || r.observation.role !== 'tool') throw new Error('expected a tool observation with error=true');
    return r.observation.content.slice(0, 80);
  });
  await check('message step', async () => {
    const r = await stepChecked(ep, { type: 'message', content: opts.message ?? 'Hello' });
    if (!r.done && r.observation.role !== 'user')
      throw new Error(`reply role is '${r.observation.role}', expected 'user' (or done)`);
    return `done=${r.done}${r.termination ? ` termination=${r.termination}` : ''}`;
  });
  await check('evaluate', async () => {
    const messages = ep.initialMessages();
    const info = parseOrThrow(RewardInfoSchema, await ep.evaluate(messages, 'agent_stop'), 'evaluate()');
    if (!Number.isFinite(info.reward)) throw new Error(`reward is ${info.reward}`);
    return `reward=${info.reward} success=${info.success}`;
  });

  if (call) {
    await check('fork independence', async () => {
      // Two fresh episodes of the same task must agree; a fork must behave like a third copy and
      // stepping either side must not leak into the other.
      const a = await reset(resetReq!);
      const b = await reset(resetReq!);
      const f = await a.fork();
      open.push(f);
      const same = (x: StepResult, y: StepResult, what: string) => {
        if (!isDeepStrictEqual(comparable(x), comparable(y))) {
          throw new Error(`${what}: ${JSON.stringify(comparable(x))} ≠ ${JSON.stringify(comparable(y))}`);
        }
      };
      const b1 = await b.step(callAction(call.name, call.arguments));
      same(await f.step(callAction(call.name, call.arguments)), b1, 'fork first step differs from a fresh episode');
      same(await a.step(callAction(call.name, call.arguments)), b1, 'stepping the fork changed the original');
      const b2 = await b.step(callAction(call.name, call.arguments));
      same(await f.step(callAction(call.name, call.arguments)), b2, 'stepping the original changed the fork');
      return 'fork and original evolve independently';
    });
  }

  await check('close', async () => {
    await Promise.all(open.splice(0).map((e) => e.close()));
    return 'all episodes closed';
  });
  return finish();

  async function finish() {
    await Promise.allSettled(open.map((e) => e.close()));
    return checks;
  }
}

async function stepChecked(ep: Episode, action: AgentAction): Promise<StepResult> {
  return parseOrThrow(StepResultSchema, await ep.step(action), 'step()');
}

function comparable(r: StepResult) {
  const { observation, error, done } = r;
  return { content: observation.content, role: observation.role, error, done };
}

function parseOrThrow<S extends z.ZodType>(schema: S, value: unknown, what: string): z.infer<S> {
  const r = schema.safeParse(value);
  if (!r.success) throw new Error(describeZodError(r.error, what));
  return r.data;
}

/** One line per failed check, for assertion messages and CLI output. */
export function formatConformance(checks: ConformanceCheck[]): string {
  return checks.map((c) => `${c.ok ? 'ok  ' : 'FAIL'} ${c.name}: ${c.detail}`).join('\n');
}
