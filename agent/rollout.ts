import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import type { Message, ToolCall, ToolSchema } from '../core/messages.js';
import type { RewardInfo, Termination, Trajectory, Usage } from '../core/trajectory.js';
import type { Environment, Episode } from '../envs/environment.js';
import { mapLimit } from '../core/concurrency.js';
import type { Llm } from '../llm/client.js';
import { keepAliveDuring } from '../infra/activity-context.js';

/**
 * The agent loop every stage uses: the policy (chat with tools) against an Environment.
 *
 * Turn semantics follow tau2's half-duplex orchestrator: an assistant message is either text for
 * the user or tool calls. tau2 executes every tool call of one assistant message in order (results
 * as a MultiToolMessage) and counts each failed call as an error, cumulatively; we do the same, one
 * env step per call, so the recorded transcript answers every tool_call id. Unknown tools, bad JSON
 * arguments and schema violations are the environment's to report as error observations; the
 * runner never crashes on them. `steps` counts agent actions (env steps).
 *
 * Cancellation (the caller's `signal`, or the current activity's) reaches every request in flight,
 * LLM and env alike, and the episode then rejects with its reason instead of returning a trajectory:
 * a cancelled episode says nothing about the agent and must not be stored as an 'error' one. Inside
 * an activity the episode heartbeats on a timer, since Temporal delivers a cancellation only in a
 * heartbeat's answer and one env request (a slow target server) may take minutes.
 */

export interface EpisodeParams {
  env: Environment;
  taskId?: string;
  seed?: number;
  trial?: number;
  llm: Llm;
  maxSteps: number;
  maxErrors: number;
  timeoutMs: number;
  temperature?: number;
  /** Aborts the episode's requests (LLM and env) and rejects it with the signal's reason. */
  signal?: AbortSignal;
  /** Heartbeat interval inside an activity (default KEEPALIVE_MS). */
  heartbeatMs?: number;
}

class EpisodeTimeout extends Error {
  override name = 'EpisodeTimeout';
}

function toParam(m: Message): ChatCompletionMessageParam {
  if (m.role === 'assistant') {
    return m.tool_calls?.length
      ? { role: 'assistant', content: m.content, tool_calls: m.tool_calls }
      : { role: 'assistant', content: m.content ?? '' };
  }
  return m as ChatCompletionMessageParam;
}

/** The policy's reply to a conversation: text for the user and/or tool calls, with what it cost. */
export interface PolicyReply {
  content: string | null;
  calls: ToolCall[];
  usage: Omit<Usage, 'calls'>;
  model: string;
  /** The reply stopped at its token cap (finish_reason `length`). */
  truncated: boolean;
}

/** One chat request to the policy (tools offered when there are any), its reply parsed. */
export async function askPolicy(
  llm: Llm,
  messages: readonly Message[],
  tools: readonly ToolSchema[],
  temperature: number | undefined,
  signal?: AbortSignal,
  /** A cap on the reply's tokens in place of the role's `maxTokens`. */
  maxTokens?: number,
): Promise<PolicyReply> {
  const res = await llm.chat(
    {
      messages: messages.map(toParam),
      ...(tools.length ? { tools: [...tools] } : {}),
      ...(temperature !== undefined ? { temperature } : {}),
      ...(maxTokens !== undefined ? { max_tokens: maxTokens } : {}),
    },
    { signal },
  );
  const reply = res.choices[0]?.message;
  return {
    content: reply?.content ?? null,
    calls: (reply?.tool_calls ?? []).flatMap((c) =>
      c.type === 'function'
        ? [
            {
              id: c.id,
              type: 'function' as const,
              function: { name: c.function.name, arguments: c.function.arguments },
            },
          ]
        : [],
    ),
    usage: { promptTokens: res.usage?.prompt_tokens ?? 0, completionTokens: res.usage?.completion_tokens ?? 0 },
    model: res.model,
    truncated: res.choices[0]?.finish_reason === 'length',
  };
}

export function trajectoryId(env: string, taskRef: { taskId?: string; seed?: number }, trial: number): string {
  const task = taskRef.taskId ?? `seed-${taskRef.seed}`;
  return `${env}/${task}/t${trial}`;
}

export function runEpisode(p: EpisodeParams): Promise<Trajectory> {
  return keepAliveDuring((cancel) => episodeLoop(p, cancel), p.signal, p.heartbeatMs);
}

async function episodeLoop(p: EpisodeParams, cancel: AbortSignal | undefined): Promise<Trajectory> {
  cancel?.throwIfAborted();
  const started = Date.now();
  const trial = p.trial ?? 0;
  const usage: Usage = { promptTokens: 0, completionTokens: 0, calls: 0 };
  // The time limit aborts the loop's requests too; evaluate() and close() run after it, so they get
  // only the cancellation signal.
  const abort = new AbortController();
  const signal = cancel ? AbortSignal.any([abort.signal, cancel]) : abort.signal;
  let timedOut = false;
  let timer: NodeJS.Timeout | undefined;
  let onCancel: (() => void) | undefined;
  // Rejects on the time limit or on cancellation, for envs that do not honour the signal.
  const stopped = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      timedOut = true;
      reject(new EpisodeTimeout());
      abort.abort(new EpisodeTimeout());
    }, p.timeoutMs);
    onCancel = () => reject(cancel!.reason);
    cancel?.addEventListener('abort', onCancel, { once: true });
  });
  stopped.catch(() => undefined);
  const bounded = <T>(x: Promise<T>) => Promise.race([x, stopped]);
  const unbind = () => {
    clearTimeout(timer);
    if (onCancel) cancel?.removeEventListener('abort', onCancel);
  };

  let episode: Episode;
  try {
    episode = await bounded(
      p.env.reset(p.taskId !== undefined ? { taskId: p.taskId } : { seed: p.seed ?? 0 }, { signal }),
    );
  } catch (e) {
    unbind();
    throw e;
  }
  const messages: Message[] = [{ role: 'system', content: p.env.systemPrompt() }, ...episode.initialMessages()];
  const tools = episode.tools?.() ?? p.env.tools();
  let model = '';
  let steps = 0;
  let errors = 0;
  let termination: Termination | undefined;
  let failure: string | undefined;
  try {
    model = await p.llm.model();
    while (!termination) {
      if (steps >= p.maxSteps) {
        termination = 'max_steps';
        break;
      }
      const reply = await bounded(askPolicy(p.llm, messages, tools, p.temperature, signal));
      usage.calls++;
      usage.promptTokens += reply.usage.promptTokens;
      usage.completionTokens += reply.usage.completionTokens;
      model = reply.model || model;
      const { calls, content } = reply;
      if (calls.length) {
        const assistant: Message = { role: 'assistant', content, tool_calls: [] };
        messages.push(assistant);
        for (const call of calls) {
          if (steps >= p.maxSteps) {
            termination = 'max_steps';
            break;
          }
          assistant.tool_calls!.push(call);
          const r = await bounded(episode.step({ type: 'tool_call', call }, { signal }));
          steps++;
          messages.push(r.observation);
          if (r.error) errors++;
          if (r.done) {
            termination = r.termination ?? 'agent_stop';
            break;
          }
          if (errors >= p.maxErrors) {
            termination = 'max_errors';
            break;
          }
        }
        continue;
      }
      if (!content?.trim()) {
        // tau2 flags an empty agent message as a protocol error and ends the episode.
        messages.push({ role: 'assistant', content: content ?? '' });
        termination = 'agent_stop';
        failure = 'empty agent message';
        break;
      }
      messages.push({ role: 'assistant', content });
      const r = await bounded(episode.step({ type: 'message', content }, { signal }));
      steps++;
      messages.push(r.observation);
      if (r.done) termination = r.termination ?? 'user_stop';
    }
  } catch (e) {
    if (cancel?.aborted) {
      unbind();
      // Not awaited: a cancelled caller should not wait on the env; a remote env deletes it anyway on close.
      void episode.close().catch(() => undefined);
      throw cancel.reason;
    }
    // A request aborted by the time limit may reject with its own abort error before the race does.
    termination = timedOut ? 'timeout' : 'error';
    if (termination === 'error') failure = `${(e as Error).name}: ${(e as Error).message}`;
  } finally {
    unbind();
  }

  let rewardInfo: RewardInfo;
  try {
    rewardInfo = await episode.evaluate(messages.slice(1), termination!, cancel ? { signal: cancel } : undefined);
  } catch (e) {
    if (cancel?.aborted) {
      void episode.close().catch(() => undefined);
      throw cancel.reason;
    }
    rewardInfo = { reward: 0, components: {}, success: false, details: { evaluateError: (e as Error).message } };
    if (termination !== 'timeout') termination = 'error';
  } finally {
    await episode.close().catch(() => undefined);
  }
  if (failure) rewardInfo = { ...rewardInfo, details: { ...rewardInfo.details, runnerNote: failure } };
  return {
    id: trajectoryId(p.env.info.name, p, trial),
    env: p.env.info.name,
    taskId: episode.taskId,
    ...(p.seed !== undefined && p.taskId === undefined ? { seed: p.seed } : {}),
    trial,
    model: model || 'unknown',
    messages,
    reward: rewardInfo.reward,
    rewardInfo,
    success: rewardInfo.success,
    termination: termination!,
    usage,
    steps,
    durationMs: Date.now() - started,
  };
}

export interface TaskSpec {
  taskId?: string;
  seed?: number;
  trial: number;
}

export interface EpisodesParams extends Omit<EpisodeParams, 'taskId' | 'seed' | 'trial'> {
  tasks: readonly TaskSpec[];
  concurrency: number;
  /** Called as each episode finishes (persist, heartbeat). */
  onEpisode?: (t: Trajectory, index: number) => Promise<void> | void;
}

/** Runs episodes with at most `concurrency` in flight; results keep the order of `tasks`. */
export async function runEpisodes(p: EpisodesParams): Promise<Trajectory[]> {
  const { tasks, concurrency, onEpisode, ...common } = p;
  return mapLimit(tasks, concurrency, async (t, i) => {
    // Once aborted, episodes not yet started are not started (their promise rejects with the reason).
    common.signal?.throwIfAborted();
    const traj = await runEpisode({ ...common, ...t });
    await onEpisode?.(traj, i);
    return traj;
  });
}
