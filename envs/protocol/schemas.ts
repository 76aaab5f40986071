import { z } from 'zod';
import { MessageSchema, ToolCallSchema, ToolSchemaSchema } from '../../core/messages.js';
import { RewardInfoSchema, TerminationSchema } from '../../core/trajectory.js';
import type { AgentAction, EnvInfo, ResetRequest, StepResult, TaskRef } from '../environment.js';

/** zod schemas for the Environment interface's boundary objects, one per object (see envs/environment.ts). */
export const EnvInfoSchema = z.object({
  name: z.string().min(1),
  kind: z.enum(['target', 'synthetic']),
  description: z.string(),
  capability: z.string().optional(),
  targetEnv: z.string().optional(),
});

export const TaskRefSchema = z.object({ id: z.string().min(1), split: z.string().optional() });

export const ResetRequestSchema = z.union([
  z.object({ taskId: z.string().min(1) }).strict(),
  z.object({ seed: z.number().int() }).strict(),
]);

export const AgentActionSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('message'), content: z.string() }),
  z.object({ type: z.literal('tool_call'), call: ToolCallSchema }),
]);

export const StepResultSchema = z.object({
  observation: MessageSchema,
  error: z.boolean(),
  done: z.boolean(),
  termination: TerminationSchema.optional(),
});

// Wire bodies of the env protocol (envs/protocol/README.md).
export const InfoResponseSchema = z.object({
  info: EnvInfoSchema,
  tools: z.array(ToolSchemaSchema),
  systemPrompt: z.string(),
});
export type InfoResponse = z.infer<typeof InfoResponseSchema>;

export const TasksResponseSchema = z.object({ tasks: z.array(TaskRefSchema) });

/**
 * An episode's id, which the client puts in every later request's path and keeps while the episode
 * lives: short and URL-safe (rerun 84a: a module chose ids of 4 MB, and a lone surrogate, which
 * made every later call throw in encodeURIComponent; 85a: `..` took a request to another endpoint).
 */
const EpisodeIdSchema = z
  .string()
  .regex(
    /^(?!\.\.?$)[\w.:-]{1,128}$/,
    'at most 128 letters, digits and _ . : -, and not . or .. (a URL resolves them)',
  );

export const EpisodeCreatedSchema = z.object({
  episodeId: EpisodeIdSchema,
  taskId: z.string(),
  initialMessages: z.array(MessageSchema),
  /** The episode's own tools when they differ per task (Episode.tools); absent: the env's tools. */
  tools: z.array(ToolSchemaSchema).optional(),
});

export const StepRequestSchema = z.object({ action: AgentActionSchema });
export const EvaluateRequestSchema = z.object({ messages: z.array(MessageSchema), termination: TerminationSchema });
export const ForkResponseSchema = z.object({ episodeId: EpisodeIdSchema });
export const EmptyResponseSchema = z.object({});
export { RewardInfoSchema };

export const ProtocolErrorTypeSchema = z.enum([
  'bad_request',
  'not_found',
  'method_not_allowed',
  'unknown_episode',
  'payload_too_large',
  'permission_denied',
  'network_denied',
  'out_of_memory',
  'disk_limit',
  'file_limit',
  'output_limit',
  'internal',
]);
export type ProtocolErrorType = z.infer<typeof ProtocolErrorTypeSchema>;

export const ErrorBodySchema = z.object({
  error: z.object({ type: z.string(), message: z.string() }),
});

// Compile-time proof that the schemas and the interface's hand-written types agree both ways.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const agree: [
  Same<z.infer<typeof EnvInfoSchema>, EnvInfo>,
  Same<z.infer<typeof TaskRefSchema>, TaskRef>,
  Same<z.infer<typeof ResetRequestSchema>, ResetRequest>,
  Same<z.infer<typeof AgentActionSchema>, AgentAction>,
  Same<z.infer<typeof StepResultSchema>, StepResult>,
] = [true, true, true, true, true];
void agree;

/** One line naming the first bad field, e.g. `action.call.function.name: expected string`. */
export function describeZodError(err: z.ZodError, what: string): string {
  const issue = err.issues[0];
  const path = issue.path.length ? issue.path.join('.') : '(root)';
  return `${what}: ${path}: ${issue.message}`;
}
