import { z } from 'zod';

/** OpenAI-style chat messages: the wire format of every trajectory, env step and LLM call. */
export const ToolCallSchema = z.object({
  id: z.string(),
  type: z.literal('function').default('function'),
  function: z.object({ name: z.string(), arguments: z.string() }),
});
export type ToolCall = z.infer<typeof ToolCallSchema>;

export const MessageSchema = z.discriminatedUnion('role', [
  z.object({ role: z.literal('system'), content: z.string() }),
  z.object({ role: z.literal('user'), content: z.string() }),
  z.object({
    role: z.literal('assistant'),
    content: z.string().nullable(),
    tool_calls: z.array(ToolCallSchema).optional(),
  }),
  z.object({ role: z.literal('tool'), tool_call_id: z.string(), content: z.string() }),
]);
export type Message = z.infer<typeof MessageSchema>;

/** An OpenAI function-tool schema, exactly as the agent sees it. */
export const ToolSchemaSchema = z.object({
  type: z.literal('function'),
  function: z.object({
    name: z.string(),
    description: z.string().optional(),
    parameters: z.record(z.string(), z.unknown()),
  }),
});
export type ToolSchema = z.infer<typeof ToolSchemaSchema>;
