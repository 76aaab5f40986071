import { z } from 'zod';
import { readDataJson, type Tau2DomainName } from './domains.js';

/** tau2's task files (data_model/tasks.py), validated at load. */
const Args = z.record(z.string(), z.unknown());
const Requestor = z.enum(['user', 'assistant']);

export const ActionSchema = z.object({
  action_id: z.string(),
  requestor: Requestor.default('assistant'),
  name: z.string(),
  arguments: Args,
  info: z.string().nullish(),
  compare_args: z.array(z.string()).nullish(),
});
export type Action = z.infer<typeof ActionSchema>;

export const EnvFunctionCallSchema = z.object({ env_type: Requestor, func_name: z.string(), arguments: Args });
export const EnvAssertionSchema = EnvFunctionCallSchema.extend({
  assert_value: z.boolean().default(true),
  message: z.string().nullish(),
});
export type EnvFunctionCall = z.infer<typeof EnvFunctionCallSchema>;
export type EnvAssertion = z.infer<typeof EnvAssertionSchema>;

export const RewardTypeSchema = z.enum(['DB', 'ENV_ASSERTION', 'NL_ASSERTION', 'ACTION', 'COMMUNICATE']);
export type RewardType = z.infer<typeof RewardTypeSchema>;

/** A message of an initial_state.message_history, in tau2's own format. */
export const Tau2MessageSchema = z.object({
  role: z.enum(['system', 'user', 'assistant', 'tool']),
  content: z.string().nullish(),
  tool_calls: z
    .array(z.object({ id: z.string().default(''), name: z.string(), arguments: Args, requestor: Requestor.optional() }))
    .nullish(),
  id: z.string().nullish(),
  requestor: Requestor.nullish(),
});
export type Tau2Message = z.infer<typeof Tau2MessageSchema>;

const StructuredInstructions = z.object({
  domain: z.string(),
  reason_for_call: z.string(),
  known_info: z.string().nullish(),
  unknown_info: z.string().nullish(),
  task_instructions: z.string(),
});

export const TaskSchema = z.object({
  id: z.string(),
  description: z.record(z.string(), z.unknown()).nullish(),
  user_scenario: z.object({
    persona: z.string().nullish(),
    instructions: z.union([StructuredInstructions, z.string()]),
  }),
  ticket: z.string().nullish(),
  initial_state: z
    .object({
      initialization_data: z.object({ agent_data: Args.nullish(), user_data: Args.nullish() }).nullish(),
      initialization_actions: z.array(EnvFunctionCallSchema).nullish(),
      message_history: z.array(Tau2MessageSchema).nullish(),
    })
    .nullish(),
  evaluation_criteria: z
    .object({
      actions: z.array(ActionSchema).nullish(),
      env_assertions: z.array(EnvAssertionSchema).nullish(),
      communicate_info: z.array(z.string()).nullish(),
      nl_assertions: z.array(z.string()).nullish(),
      reward_basis: z.array(RewardTypeSchema).default(['DB', 'COMMUNICATE']),
    })
    .nullish(),
  user_tools: z.array(z.string()).nullish(),
});
export type Tau2Task = z.infer<typeof TaskSchema>;

export type TaskSet = 'current' | 'legacy';

const taskCache = new Map<string, Tau2Task[]>();

/** The domain's tasks: `tasks.json` (current) or the v0.2.0 file (legacy; airline and retail only). */
export function loadTasks(domain: Tau2DomainName, taskSet: TaskSet = 'current'): Tau2Task[] {
  const key = `${domain}/${taskSet}`;
  const hit = taskCache.get(key);
  if (hit) return hit;
  if (taskSet === 'legacy' && domain === 'mock')
    throw new Error("taskSet: the mock domain has no legacy task file; use 'current'");
  const file = taskSet === 'current' ? 'tasks.json' : 'legacy_v0.2.0/tasks.json';
  const raw = readDataJson<unknown[]>(domain, file);
  const tasks = raw.map((t, i) => {
    const r = TaskSchema.safeParse(t);
    if (!r.success)
      throw new Error(
        `data/tau2/${domain}/${file}: task ${i}: ${r.error.issues[0].path.join('.')}: ${r.error.issues[0].message}`,
      );
    return r.data;
  });
  taskCache.set(key, tasks);
  return tasks;
}

/** Task id → split names (tau2's split_tasks.json, e.g. train/test/base). */
export function taskSplits(domain: Tau2DomainName): Map<string, string[]> {
  const raw = readDataJson<Record<string, string[]>>(domain, 'split_tasks.json');
  const out = new Map<string, string[]>();
  for (const [split, ids] of Object.entries(raw)) for (const id of ids) out.set(id, [...(out.get(id) ?? []), split]);
  return out;
}

/** Python's textwrap.indent: prefixes every line that is not whitespace-only. */
function indent(text: string, prefix: string): string {
  return (text.match(/[^\r\n]*(\r\n|\r|\n)|[^\r\n]+$/g) ?? []).map((l) => (l.trim() ? prefix + l : l)).join('');
}

/** `str(task.user_scenario)`: the text inside the user simulator's `<scenario>` block. */
export function userScenarioText(task: Tau2Task): string {
  const s = task.user_scenario;
  const lines: string[] = [];
  if (s.persona != null) lines.push('Persona:', indent(s.persona, '\t'));
  let instructions: string;
  if (typeof s.instructions === 'string') instructions = s.instructions;
  else {
    const i = s.instructions;
    const parts = [`Domain: ${i.domain}`, `Reason for call:\n${indent(i.reason_for_call, '\t')}`];
    if (i.known_info != null) parts.push(`Known info:\n${indent(i.known_info, '\t')}`);
    if (i.unknown_info != null) parts.push(`Unknown info:\n${indent(i.unknown_info, '\t')}`);
    parts.push(`Task instructions:\n${indent(i.task_instructions, '\t')}`);
    instructions = parts.join('\n');
  }
  lines.push('Instructions:', indent(instructions, '\t'));
  return lines.join('\n');
}
