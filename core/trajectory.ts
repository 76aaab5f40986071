import { z } from 'zod';
import { MessageSchema } from './messages.js';

export const TerminationSchema = z.enum([
  'agent_stop', // the agent ended the episode (e.g. tau2 ###STOP### from the agent side or a final answer)
  'user_stop', // the user simulator ended it (###STOP###)
  'transfer', // ###TRANSFER### / transfer_to_human_agents
  'out_of_scope', // ###OUT-OF-SCOPE###
  'max_steps',
  'max_errors',
  'timeout',
  'error', // the episode could not continue (env or LLM failure after retries)
]);
export type Termination = z.infer<typeof TerminationSchema>;

export const RewardInfoSchema = z.object({
  reward: z.number(),
  /** Named reward components, e.g. {DB: 1, COMMUNICATE: 0}. */
  components: z.record(z.string(), z.number()),
  success: z.boolean(),
  /** Free-form evaluation details (failed assertions, hashes) for analysts and reports. */
  details: z.record(z.string(), z.unknown()).optional(),
});
export type RewardInfo = z.infer<typeof RewardInfoSchema>;

export const UsageSchema = z.object({
  promptTokens: z.number().int().nonnegative(),
  completionTokens: z.number().int().nonnegative(),
  calls: z.number().int().nonnegative(),
});
export type Usage = z.infer<typeof UsageSchema>;

/** One episode of an agent in an environment: the unit stage 1 analyses and stage 3 trains on. */
export const TrajectorySchema = z.object({
  id: z.string(),
  env: z.string(),
  taskId: z.string(),
  seed: z.number().int().optional(),
  trial: z.number().int().nonnegative().default(0),
  model: z.string(),
  messages: z.array(MessageSchema),
  reward: z.number(),
  rewardInfo: RewardInfoSchema,
  success: z.boolean(),
  termination: TerminationSchema,
  usage: UsageSchema,
  steps: z.number().int().nonnegative(),
  durationMs: z.number().nonnegative(),
});
export type Trajectory = z.infer<typeof TrajectorySchema>;
