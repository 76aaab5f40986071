import { z } from 'zod';

/**
 * The OpenAI chat-completions request body this server accepts. Unknown top-level fields are
 * ignored (clients send extras such as `user` or `metadata`); fields we cannot honour (n > 1,
 * stream) are rejected with a 400 that names them rather than silently misbehaving.
 */
const TextPartSchema = z.object({ type: z.literal('text'), text: z.string() });
const ContentSchema = z.union([z.string(), z.array(TextPartSchema)]);

const ToolCallSchema = z.object({
  id: z.string().min(1),
  type: z.literal('function').optional(),
  function: z.object({ name: z.string().min(1), arguments: z.string() }),
});

const MessageSchema = z.discriminatedUnion('role', [
  z.object({ role: z.literal('system'), content: ContentSchema }),
  z.object({ role: z.literal('developer'), content: ContentSchema }),
  z.object({ role: z.literal('user'), content: ContentSchema }),
  z.object({
    role: z.literal('assistant'),
    content: ContentSchema.nullable().optional(),
    tool_calls: z.array(ToolCallSchema).optional(),
  }),
  z.object({ role: z.literal('tool'), tool_call_id: z.string().min(1), content: ContentSchema }),
]);

const ToolNameSchema = z.string().regex(/^[a-zA-Z0-9_-]{1,64}$/, 'must match ^[a-zA-Z0-9_-]{1,64}$');

const ToolSchema = z.object({
  type: z.literal('function'),
  function: z.object({
    name: ToolNameSchema,
    description: z.string().optional(),
    parameters: z.record(z.string(), z.unknown()).optional(),
    strict: z.boolean().nullable().optional(),
  }),
});

const ResponseFormatSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('text') }),
  z.object({ type: z.literal('json_object') }),
  z.object({
    type: z.literal('json_schema'),
    json_schema: z.object({
      name: z.string().min(1),
      description: z.string().optional(),
      schema: z.record(z.string(), z.unknown()).optional(),
      strict: z.boolean().nullable().optional(),
    }),
  }),
]);

const ToolChoiceSchema = z.union([
  z.enum(['none', 'auto', 'required']),
  z.object({ type: z.literal('function'), function: z.object({ name: ToolNameSchema }) }),
]);

export const ChatRequestSchema = z.object({
  model: z.string().optional(),
  messages: z.array(MessageSchema).min(1),
  tools: z.array(ToolSchema).optional(),
  tool_choice: ToolChoiceSchema.optional(),
  parallel_tool_calls: z.boolean().optional(),
  response_format: ResponseFormatSchema.optional(),
  temperature: z.number().min(0).max(2).nullable().optional(),
  top_p: z.number().gt(0).max(1).nullable().optional(),
  max_tokens: z.number().int().positive().nullable().optional(),
  max_completion_tokens: z.number().int().positive().nullable().optional(),
  seed: z.number().int().nullable().optional(),
  stop: z
    .union([z.string(), z.array(z.string()).max(4)])
    .nullable()
    .optional(),
  frequency_penalty: z.number().min(-2).max(2).nullable().optional(),
  presence_penalty: z.number().min(-2).max(2).nullable().optional(),
  n: z.literal(1, 'only n = 1 is supported').nullable().optional(),
  stream: z.literal(false, 'streaming is not supported; omit stream or set it to false').nullable().optional(),
});
export type ChatRequest = z.infer<typeof ChatRequestSchema>;
export type ChatRequestMessage = ChatRequest['messages'][number];
export type ChatRequestTool = NonNullable<ChatRequest['tools']>[number];

export class BadRequestError extends Error {
  override name = 'BadRequestError';
  constructor(
    readonly param: string,
    message: string,
    readonly code: string = 'invalid_request',
  ) {
    super(`${param}: ${message}`);
  }
}

/** Parses a request body, throwing a BadRequestError naming the first bad field (e.g. `messages[2].role`). */
export function parseChatRequest(body: unknown): ChatRequest {
  const r = ChatRequestSchema.safeParse(body);
  if (!r.success) {
    const issue = r.error.issues[0];
    throw new BadRequestError(formatPath(issue.path), issue.message);
  }
  checkToolReferences(r.data);
  return r.data;
}

/** Cross-field rules the schema alone cannot state. */
function checkToolReferences(req: ChatRequest): void {
  const names = new Set((req.tools ?? []).map((t) => t.function.name));
  (req.tools ?? []).forEach((t, i) => {
    if ((req.tools ?? []).findIndex((u) => u.function.name === t.function.name) !== i) {
      throw new BadRequestError(`tools[${i}].function.name`, `duplicate tool name ${JSON.stringify(t.function.name)}`);
    }
  });
  const choice = req.tool_choice;
  if ((choice === 'required' || typeof choice === 'object') && names.size === 0) {
    throw new BadRequestError('tool_choice', 'requires a non-empty tools list');
  }
  if (typeof choice === 'object' && !names.has(choice.function.name)) {
    throw new BadRequestError('tool_choice.function.name', `${JSON.stringify(choice.function.name)} is not in tools`);
  }
  const callIds = new Set<string>();
  req.messages.forEach((m, i) => {
    if (m.role === 'assistant') m.tool_calls?.forEach((c) => callIds.add(c.id));
    if (m.role === 'tool' && !callIds.has(m.tool_call_id)) {
      throw new BadRequestError(
        `messages[${i}].tool_call_id`,
        `no earlier assistant tool_call has id ${JSON.stringify(m.tool_call_id)}`,
      );
    }
  });
}

export function contentText(content: string | { text: string }[] | null | undefined): string {
  if (content == null) return '';
  return typeof content === 'string' ? content : content.map((p) => p.text).join('');
}

function formatPath(path: PropertyKey[]): string {
  if (path.length === 0) return 'body';
  return path.map((p, i) => (typeof p === 'number' ? `[${p}]` : `${i ? '.' : ''}${String(p)}`)).join('');
}
