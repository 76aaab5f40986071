import { z } from 'zod';
import type { Message, ToolCall } from '../core/messages.js';
import { TrajectorySchema, type Termination, type Trajectory } from '../core/trajectory.js';

/**
 * Converts tau2-bench simulation results (the monolithic `Results` JSON a `tau2 run` saves: info,
 * tasks, simulations) into our Trajectory records, so existing tau2 runs can go straight to stage 1
 * analysis. Only what the agent saw is kept: the user's own tool calls (telecom) and their results
 * are dropped; the domain policy becomes the system message. A single SimulationRun (the per-file
 * "dir" format) is accepted too when `env` is given.
 */

const Tau2ToolCall = z.object({
  id: z.string().default(''),
  name: z.string(),
  arguments: z.record(z.string(), z.unknown()),
  requestor: z.enum(['user', 'assistant']).default('assistant'),
});

const Usage = z
  .object({ prompt_tokens: z.number().optional(), completion_tokens: z.number().optional() })
  .passthrough();

const Tau2ToolMessage = z.object({
  id: z.string().default(''),
  role: z.literal('tool'),
  content: z.string().nullish(),
  requestor: z.enum(['user', 'assistant']).default('assistant'),
  error: z.boolean().default(false),
});

const Tau2Message = z.union([
  z.object({ role: z.literal('system'), content: z.string().nullish() }),
  z.object({ role: z.literal('user'), content: z.string().nullish(), tool_calls: z.array(Tau2ToolCall).nullish() }),
  z.object({
    role: z.literal('assistant'),
    content: z.string().nullish(),
    tool_calls: z.array(Tau2ToolCall).nullish(),
    usage: Usage.nullish(),
  }),
  z.object({ role: z.literal('tool'), tool_messages: z.array(Tau2ToolMessage) }),
  Tau2ToolMessage,
]);

const Tau2RewardInfo = z
  .object({
    reward: z.number(),
    reward_breakdown: z.record(z.string(), z.number()).nullish(),
    db_check: z.object({ db_match: z.boolean(), db_reward: z.number() }).nullish(),
    communicate_checks: z.array(z.object({ info: z.string(), met: z.boolean() }).passthrough()).nullish(),
    action_checks: z
      .array(
        z.object({ action: z.object({ name: z.string() }).passthrough(), action_match: z.boolean() }).passthrough(),
      )
      .nullish(),
    nl_assertions: z.array(z.object({ nl_assertion: z.string(), met: z.boolean() }).passthrough()).nullish(),
    info: z.record(z.string(), z.unknown()).nullish(),
  })
  .passthrough();

const TERMINATIONS: Record<string, Termination> = {
  user_stop: 'user_stop',
  agent_stop: 'agent_stop',
  max_steps: 'max_steps',
  timeout: 'timeout',
  too_many_errors: 'max_errors',
  // The agent broke the protocol: a policy failure, kept for analysis.
  agent_error: 'agent_stop',
  user_error: 'error',
  infrastructure_error: 'error',
  context_window_exceeded: 'error',
  unexpected_error: 'error',
};

const Tau2Simulation = z
  .object({
    id: z.string(),
    task_id: z.union([z.string(), z.number()]).transform(String),
    duration: z.number().default(0),
    termination_reason: z
      .string()
      .refine((r) => r in TERMINATIONS, { message: `expected one of ${Object.keys(TERMINATIONS).join(', ')}` }),
    reward_info: Tau2RewardInfo.nullish().refine((r) => r != null, {
      message: 'missing: this simulation was not evaluated (run tau2 evaluation first)',
    }),
    messages: z.array(Tau2Message),
    trial: z.number().int().nullish(),
    seed: z.number().int().nullish(),
  })
  .passthrough();
type Tau2Simulation = z.infer<typeof Tau2Simulation>;

const Tau2Results = z.object({
  info: z
    .object({
      agent_info: z.object({ llm: z.string().nullish() }).passthrough(),
      environment_info: z.object({ domain_name: z.string(), policy: z.string().nullish() }).passthrough(),
    })
    .passthrough(),
  simulations: z.array(Tau2Simulation),
});

export class Tau2ImportError extends Error {
  override name = 'Tau2ImportError';
}

function fail(err: z.ZodError, prefix = ''): never {
  const i = err.issues[0];
  const p = [prefix, ...i.path.map(String)].filter(Boolean).join('.');
  throw new Tau2ImportError(`tau2 results: ${p || '(root)'}: ${i.message}`);
}

export interface ImportOptions {
  /** Env name for the trajectories; default `tau2-<domain>` from the results' info. */
  env?: string;
  /** Model id when the results do not name one (single-simulation files). */
  model?: string;
}

export function importTau2Results(jsonText: string, opts: ImportOptions = {}): Trajectory[] {
  let raw: unknown;
  try {
    raw = JSON.parse(jsonText);
  } catch (e) {
    throw new Tau2ImportError(`tau2 results: not valid JSON (${(e as Error).message})`);
  }
  if (raw && typeof raw === 'object' && !('simulations' in raw) && 'messages' in raw) {
    if (!opts.env)
      throw new Tau2ImportError('tau2 results: a single simulation has no info.environment_info; pass the env name');
    const sim = Tau2Simulation.safeParse(raw);
    if (!sim.success) fail(sim.error);
    return [convert(sim.data, opts.env, opts.model ?? 'unknown', undefined)];
  }
  const r = Tau2Results.safeParse(raw);
  if (!r.success) fail(r.error);
  const { info, simulations } = r.data;
  const env = opts.env ?? `tau2-${info.environment_info.domain_name}`;
  const model = info.agent_info.llm ?? opts.model ?? 'unknown';
  return simulations.map((s) => convert(s, env, model, info.environment_info.policy ?? undefined));
}

function convert(s: Tau2Simulation, env: string, model: string, policy: string | undefined): Trajectory {
  const messages: Message[] = policy ? [{ role: 'system', content: policy }] : [];
  const usage = { promptTokens: 0, completionTokens: 0, calls: 0 };
  let steps = 0;
  // tau2 tool calls may have empty ids; pair them with their results in order under synthetic ids.
  const pendingIds: string[] = [];
  const pushTool = (t: z.infer<typeof Tau2ToolMessage>) => {
    if (t.requestor !== 'assistant') return;
    const k = t.id ? pendingIds.indexOf(t.id) : 0;
    const id = t.id || pendingIds[0] || `call_${messages.length}`;
    if (k >= 0 && pendingIds.length) pendingIds.splice(k, 1);
    messages.push({ role: 'tool', tool_call_id: id, content: t.content ?? '' });
  };
  s.messages.forEach((m, i) => {
    switch (m.role) {
      case 'system':
        if (m.content) messages.push({ role: 'system', content: m.content });
        return;
      case 'user':
        if (m.content) messages.push({ role: 'user', content: m.content });
        return;
      case 'assistant': {
        const calls: ToolCall[] = (m.tool_calls ?? [])
          .filter((c) => c.requestor === 'assistant')
          .map((c, k) => ({
            id: c.id || `call_${i}_${k}`,
            type: 'function',
            function: { name: c.name, arguments: JSON.stringify(c.arguments) },
          }));
        pendingIds.push(...calls.map((c) => c.id));
        messages.push({
          role: 'assistant',
          content: m.content ?? null,
          ...(calls.length ? { tool_calls: calls } : {}),
        });
        steps += Math.max(1, calls.length);
        // tau2's fixed greeting carries no usage: it was not an LLM call.
        if (m.usage) usage.calls++;
        usage.promptTokens += m.usage?.prompt_tokens ?? 0;
        usage.completionTokens += m.usage?.completion_tokens ?? 0;
        return;
      }
      case 'tool':
        if ('tool_messages' in m) m.tool_messages.forEach(pushTool);
        else pushTool(m);
    }
  });
  const ri = s.reward_info!;
  const components = ri.reward_breakdown ?? {};
  const details: Record<string, unknown> = { tau2_termination_reason: s.termination_reason };
  if (ri.db_check) details.db_match = ri.db_check.db_match;
  const unmet = (ri.communicate_checks ?? []).filter((c) => !c.met).map((c) => c.info);
  if (unmet.length) details.not_communicated = unmet;
  const missed = (ri.action_checks ?? []).filter((c) => !c.action_match).map((c) => c.action.name);
  if (missed.length) details.missed_actions = missed;
  const failedNl = (ri.nl_assertions ?? []).filter((c) => !c.met).map((c) => c.nl_assertion);
  if (failedNl.length) details.failed_nl_assertions = failedNl;
  // tau2's is_successful: reward within 1e-6 of 1.
  const success = ri.reward >= 1 - 1e-6;
  const t = {
    id: s.id,
    env,
    taskId: s.task_id,
    ...(s.seed != null ? { seed: s.seed } : {}),
    trial: s.trial ?? 0,
    model,
    messages,
    reward: ri.reward,
    rewardInfo: { reward: ri.reward, components, success, details },
    success,
    termination: TERMINATIONS[s.termination_reason],
    usage,
    steps,
    durationMs: Math.round(s.duration * 1000),
  };
  const checked = TrajectorySchema.safeParse(t);
  if (!checked.success) fail(checked.error, `simulations[${s.id}]`);
  return checked.data;
}
