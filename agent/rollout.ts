import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import type { Message, ToolCall } from '../core/messages.js';
import type { RewardInfo, Termination, Trajectory, Usage } from '../core/trajectory.js';
import type { Environment, Episode } from '../envs/environment.js';
import { mapLimit } from '../core/concurrency.js';
import type { Llm } from '../llm/client.js';

/**
 * The agent loop every stage uses: the policy (chat with tools) against an Environment.
 *
 * Turn semantics follow tau2's half-duplex orchestrator: an assistant message is either text for
 * the user or tool calls. tau2 executes every tool call of one assistant message in order (results
 * as a MultiToolMessage) and counts each failed call as an error, cumulatively; we do the same, one
 * env step per call, so the recorded transcript answers every tool_call id. Unknown tools, bad JSON
 * arguments and schema violations are the environment's to report as error observations; the
 * runner never crashes on them. `steps` counts agent actions (env steps).
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
}

class EpisodeTimeout extends Error {}

function toParam(m: Message): ChatCompletionMessageParam {
  if (m.role === 'assistant') {
    return m.tool_calls?.length ? { role: 'assistant', content: m.content, tool_calls: m.tool_calls } : { role: 'assistant', content: m.content ?? '' };
  }
  return m as ChatCompletionMessageParam;
}

export function trajectoryId(env: string, taskRef: { taskId?: string; seed?: number }, trial: number): string {
  const task = taskRef.taskId ?? `seed-${taskRef.seed}`;
  return `${env}/${task}/t${trial}`;
}

export async function runEpisode(p: EpisodeParams): Promise<Trajectory> {
  const started = Date.now();
  const trial = p.trial ?? 0;
  const usage: Usage = { promptTokens: 0, completionTokens: 0, calls: 0 };
  const abort = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      abort.abort();
      reject(new EpisodeTimeout());
    }, p.timeoutMs);
  });
  expired.catch(() => undefined);
  const bounded = <T>(x: Promise<T>) => Promise.race([x, expired]);

  const episode: Episode = await bounded(p.env.reset(p.taskId !== undefined ? { taskId: p.taskId } : { seed: p.seed ?? 0 }));
  const messages: Message[] = [{ role: 'system', content: p.env.systemPrompt() }, ...episode.initialMessages()];
  const tools = p.env.tools();
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
      const res = await bounded(
        p.llm.chat(
          {
            messages: messages.map(toParam),
            ...(tools.length ? { tools } : {}),
            ...(p.temperature !== undefined ? { temperature: p.temperature } : {}),
          },
          { signal: abort.signal },
        ),
      );
      usage.calls++;
      usage.promptTokens += res.usage?.prompt_tokens ?? 0;
      usage.completionTokens += res.usage?.completion_tokens ?? 0;
      model = res.model || model;
      const reply = res.choices[0]?.message;
      const calls: ToolCall[] = (reply?.tool_calls ?? []).flatMap((c) =>
        c.type === 'function' ? [{ id: c.id, type: 'function' as const, function: { name: c.function.name, arguments: c.function.arguments } }] : [],
      );
      const content = reply?.content ?? null;
      if (calls.length) {
        const assistant: Message = { role: 'assistant', content, tool_calls: [] };
        messages.push(assistant);
        for (const call of calls) {
          if (steps >= p.maxSteps) {
            termination = 'max_steps';
            break;
          }
          assistant.tool_calls!.push(call);
          const r = await bounded(episode.step({ type: 'tool_call', call }));
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
      const r = await bounded(episode.step({ type: 'message', content }));
      steps++;
      messages.push(r.observation);
      if (r.done) termination = r.termination ?? 'user_stop';
    }
  } catch (e) {
    termination = e instanceof EpisodeTimeout ? 'timeout' : 'error';
    if (termination === 'error') failure = `${(e as Error).name}: ${(e as Error).message}`;
  } finally {
    clearTimeout(timer);
  }

  let rewardInfo: RewardInfo;
  try {
    rewardInfo = await episode.evaluate(messages.slice(1), termination!);
  } catch (e) {
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
  /** Once aborted, episodes not yet started are not started (their promise rejects with the reason). */
  signal?: AbortSignal;
}

/** Runs episodes with at most `concurrency` in flight; results keep the order of `tasks`. */
export async function runEpisodes(p: EpisodesParams): Promise<Trajectory[]> {
  const { tasks, concurrency, onEpisode, signal, ...common } = p;
  return mapLimit(tasks, concurrency, async (t, i) => {
    signal?.throwIfAborted();
    const traj = await runEpisode({ ...common, ...t });
    await onEpisode?.(traj, i);
    return traj;
  });
}
