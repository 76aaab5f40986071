import type { Message } from '../../core/messages.js';
import type { RewardInfo, Termination } from '../../core/trajectory.js';
import type { Tau2Domain } from './domains.js';
import type { Obj } from './model.js';
import { judgeNlAssertions, type JudgeLlm } from './nl-judge.js';
import { jsonEqual, parseArguments, Tau2State, trajectoryCalls, type ReplayCall } from './state.js';
import type { Action, RewardType, Tau2Task } from './tasks.js';

/**
 * tau2's evaluation (evaluator.py, EvaluationType.ALL): premature termination scores 0; otherwise
 * DB (gold actions replayed on a fresh env vs the trajectory's mutating calls replayed on another,
 * compared by hash), ENV_ASSERTION, COMMUNICATE, ACTION and NL_ASSERTION components, multiplied over
 * the task's reward_basis.
 */
export const COMPLETED_TERMINATIONS: ReadonlySet<Termination> = new Set([
  'agent_stop',
  'user_stop',
  'transfer',
  'out_of_scope',
]);

export interface EvaluateInput {
  domain: Tau2Domain;
  task: Tau2Task;
  /** The whole conversation after the system prompt, including any initial message history. */
  messages: Message[];
  termination: Termination;
  /** Tool calls the simulated user made (mock), which OpenAI-format messages cannot carry. */
  userCalls?: ReplayCall[];
  judge?: JudgeLlm;
  /** Aborts the judge's LLM call (the caller stopped waiting). */
  signal?: AbortSignal;
}

export async function evaluateTau2(input: EvaluateInput): Promise<RewardInfo> {
  const { task, termination } = input;
  if (!COMPLETED_TERMINATIONS.has(termination)) {
    return {
      reward: 0,
      components: {},
      success: false,
      details: { note: `Simulation terminated prematurely. Termination reason: ${termination}` },
    };
  }
  const criteria = task.evaluation_criteria;
  if (!criteria) return { reward: 1, components: {}, success: true, details: { note: 'No evaluation criteria' } };
  const basis = new Set<RewardType>(criteria.reward_basis);

  const env = evaluateEnvironment(input);
  const actionChecks = checkActions(input.messages, input.userCalls ?? [], criteria.actions ?? []);
  const communicateChecks = checkCommunicate(input.messages, criteria.communicate_info ?? []);
  let nlChecks: Awaited<ReturnType<typeof judgeNlAssertions>> | undefined;
  if (basis.has('NL_ASSERTION') && criteria.nl_assertions?.length) {
    if (!input.judge)
      throw new Error(`task ${task.id}: reward_basis includes NL_ASSERTION but no judge LLM was configured`);
    nlChecks = await judgeNlAssertions(input.judge, input.messages, criteria.nl_assertions, input.signal);
  }
  const all = (xs: { met: boolean }[]) => (xs.every((x) => x.met) ? 1 : 0);
  const scores: Record<RewardType, number> = {
    DB: env.dbReward,
    ENV_ASSERTION: all(env.assertions),
    ACTION: all(actionChecks),
    COMMUNICATE: all(communicateChecks),
    NL_ASSERTION: nlChecks ? all(nlChecks) : 1,
  };
  const components: Record<string, number> = {};
  let reward = 1;
  for (const k of criteria.reward_basis) {
    if (k in components) continue;
    // Upstream reports no DB/ENV_ASSERTION breakdown when a task has neither actions nor assertions.
    if (env.skipped && (k === 'DB' || k === 'ENV_ASSERTION')) continue;
    components[k] = scores[k];
    reward *= scores[k];
  }
  return {
    reward,
    components,
    success: Math.abs(reward - 1) < 1e-6,
    details: {
      reward_basis: criteria.reward_basis,
      db_check: { db_match: env.dbReward === 1, db_reward: env.dbReward, ...env.dbMatches },
      env_assertions: env.assertions,
      action_checks: actionChecks,
      communicate_checks: communicateChecks,
      nl_assertions: nlChecks ?? null,
      replay_mismatches: env.mismatches,
    },
  };
}

interface EnvResult {
  dbReward: number;
  assertions: { func_name: string; met: boolean }[];
  dbMatches: Record<string, boolean>;
  mismatches: string[];
  /** True when the task has neither actions nor env_assertions (DB counts as 1, unreported). */
  skipped: boolean;
}

/** EnvironmentEvaluator: hash comparison of predicted vs gold environments, then env_assertions. */
export function evaluateEnvironment({ domain, task, messages, userCalls = [] }: EvaluateInput): EnvResult {
  const criteria = task.evaluation_criteria!;
  if (criteria.actions == null && criteria.env_assertions == null) {
    return { dbReward: 1, assertions: [], dbMatches: {}, mismatches: [], skipped: true };
  }
  const predicted = Tau2State.forTask(domain, task, { withHistory: false });
  // Agent and user tools act on separate DBs, so replaying each side in its own order is exact.
  const mismatches = predicted.replay([...trajectoryCalls(messages), ...userCalls]);
  const gold = Tau2State.forTask(domain, task);
  for (const a of criteria.actions ?? []) gold.apply(a.requestor, a.name, a.arguments);
  // Equal serialisations ⇔ equal tau2 hashes; comparing the copies directly avoids hashing 7 MB twice.
  const agentMatch = gold.db.sameAs(predicted.db);
  const userMatch = !gold.userDb || !predicted.userDb || gold.userDb.sameAs(predicted.userDb);
  const dbReward = agentMatch && userMatch ? 1 : 0;
  const assertions = (criteria.env_assertions ?? []).map((a) => {
    let met: boolean;
    try {
      met = predicted.runFunction(a.env_type, a.func_name, a.arguments) === a.assert_value;
    } catch {
      met = false;
    }
    return { func_name: a.func_name, met };
  });
  return {
    dbReward,
    assertions,
    dbMatches: { agent_db_match: agentMatch, user_db_match: userMatch },
    mismatches,
    skipped: false,
  };
}

/** CommunicateEvaluator: each info string must appear in some agent message (commas removed). */
export function checkCommunicate(messages: Message[], infos: string[]): { info: string; met: boolean }[] {
  const texts = messages
    .filter((m): m is Extract<Message, { role: 'assistant' }> => m.role === 'assistant')
    .map((m) => m.content)
    .filter((c): c is string => c != null && c.trim() !== '')
    .map((c) => c.toLowerCase().replaceAll(',', ''));
  return infos.map((info) => ({ info, met: texts.some((t) => t.includes(info.toLowerCase())) }));
}

/** ActionEvaluator: every gold action must match some tool call (on compare_args, or all args). */
export function checkActions(
  messages: Message[],
  userCalls: ReplayCall[],
  actions: Action[],
): { action_id: string; met: boolean }[] {
  const calls: { name: string; args: Obj }[] = [];
  for (const m of messages) {
    if (m.role !== 'assistant' || !m.tool_calls) continue;
    for (const tc of m.tool_calls)
      calls.push({ name: tc.function.name, args: parseArguments(tc.function.arguments) ?? {} });
  }
  for (const c of userCalls) calls.push({ name: c.name, args: c.args });
  return actions.map((a) => ({ action_id: a.action_id, met: calls.some((c) => actionMatches(a, c)) }));
}

function actionMatches(a: Action, call: { name: string; args: Obj }): boolean {
  if (a.name !== call.name) return false;
  const keys = a.compare_args ?? Object.keys(call.args);
  if (!keys.length) return true;
  const pick = (o: Obj) => Object.fromEntries(Object.entries(o).filter(([k]) => keys.includes(k)));
  return jsonEqual(pick(call.args), pick(a.arguments));
}
