import type { ChatHistoryItem, GbnfJsonSchema } from 'node-llama-cpp';
import { BadRequestError, contentText, type ChatRequest, type ChatRequestTool } from './chat-request.js';
import {
  assertGrammarSize,
  jsonSchemasToGrammarSchemas,
  jsonSchemaToGrammarSchema,
  SchemaConversionError,
} from './json-schema-grammar.js';

/**
 * Turns an OpenAI chat request into the model's chat history plus the output constraint for this
 * turn. Tool use is done by constrained decoding rather than by the model's native template (tiny
 * models have none): with tools on offer, every assistant turn is one JSON "action" —
 * `{"type":"tool_call","name":…,"arguments":{…}}` or `{"type":"message","content":…}` — whose
 * grammar admits only the offered tool names and arguments matching each tool's schema. Earlier
 * assistant turns are rendered in the same form so the model sees a consistent transcript.
 */
export type OutputMode =
  { kind: 'text' } | { kind: 'json'; schema?: GbnfJsonSchema } | { kind: 'action'; schema: GbnfJsonSchema };

export interface ChatPrompt {
  history: ChatHistoryItem[];
  output: OutputMode;
}

export type Action = { type: 'message'; content: unknown } | { type: 'tool_call'; name: string; arguments: unknown };

export function buildChatPrompt(req: ChatRequest): ChatPrompt {
  const tools = req.tool_choice === 'none' ? [] : (req.tools ?? []);
  const contentSchema = responseContentSchema(req);
  const output: OutputMode = tools.length
    ? { kind: 'action', schema: actionSchema(req, tools, contentSchema) }
    : req.response_format && req.response_format.type !== 'text'
      ? { kind: 'json', schema: contentSchema }
      : { kind: 'text' };
  const actions = output.kind === 'action';

  const history: ChatHistoryItem[] = [];
  const callNames = new Map<string, string>();
  for (const m of req.messages) {
    switch (m.role) {
      case 'system':
      case 'developer':
        history.push({ type: 'system', text: contentText(m.content) });
        break;
      case 'user':
        history.push({ type: 'user', text: contentText(m.content) });
        break;
      case 'assistant': {
        const parts: string[] = [];
        const text = contentText(m.content);
        if (text && (actions || !m.tool_calls?.length))
          parts.push(actions ? JSON.stringify({ type: 'message', content: text }) : text);
        for (const c of m.tool_calls ?? []) {
          callNames.set(c.id, c.function.name);
          parts.push(
            JSON.stringify({ type: 'tool_call', name: c.function.name, arguments: parseOrRaw(c.function.arguments) }),
          );
        }
        history.push({ type: 'model', response: [parts.join('\n')] });
        break;
      }
      case 'tool':
        history.push({
          type: 'user',
          text: `Result of tool call ${callNames.get(m.tool_call_id) ?? ''} (${m.tool_call_id}):\n${contentText(m.content)}`,
        });
        break;
    }
  }
  if (actions) addSystemText(history, toolInstructions(req, tools));
  history.push({ type: 'model', response: [] });
  return { history, output };
}

/** Reads the JSON the grammar produced back into an action; undefined when it was cut short. */
export function parseAction(text: string): Action | undefined {
  try {
    const v = JSON.parse(text) as Action;
    return v && (v.type === 'message' || v.type === 'tool_call') ? v : undefined;
  } catch {
    return undefined;
  }
}

function responseContentSchema(req: ChatRequest): GbnfJsonSchema | undefined {
  const rf = req.response_format;
  if (rf?.type !== 'json_schema' || !rf.json_schema.schema) return undefined;
  return convertOrReject(rf.json_schema.schema, 'response_format.json_schema.schema');
}

function actionSchema(
  req: ChatRequest,
  tools: ChatRequestTool[],
  contentSchema: GbnfJsonSchema | undefined,
): GbnfJsonSchema {
  const forced = typeof req.tool_choice === 'object' ? req.tool_choice.function.name : undefined;
  const chosen = tools.map((t, i) => ({ t, i })).filter(({ t }) => !forced || t.function.name === forced);
  // The tools' parameters under one budget, as the grammar they make together is bounded.
  const typed = chosen.filter(({ t }) => t.function.parameters);
  const converted = asBadRequest(() =>
    jsonSchemasToGrammarSchemas(
      typed.map(({ t, i }) => ({ schema: t.function.parameters, field: `tools[${i}].function.parameters` })),
      'tools',
    ),
  );
  const parameters = new Map(typed.map(({ i }, k) => [i, converted[k]]));
  const calls: GbnfJsonSchema[] = chosen.map(({ t, i }) => ({
    type: 'object',
    properties: {
      type: { const: 'tool_call' },
      name: { const: t.function.name },
      arguments: parameters.get(i) ?? { type: 'object', additionalProperties: true },
    },
  }));
  const replyAllowed = req.tool_choice === undefined || req.tool_choice === 'auto';
  const message: GbnfJsonSchema = {
    type: 'object',
    properties: { type: { const: 'message' }, content: contentSchema ?? { type: 'string' } },
  };
  const options = replyAllowed ? [message, ...calls] : calls;
  const action = options.length === 1 ? options[0] : { oneOf: options };
  // So is the grammar with its wrapping (each call's name, the message).
  asBadRequest(() => assertGrammarSize(action, 'tools'));
  return action;
}

function toolInstructions(req: ChatRequest, tools: ChatRequestTool[]): string {
  const list = tools
    .map((t) =>
      JSON.stringify({
        name: t.function.name,
        description: t.function.description ?? '',
        parameters: schemaForPrompt(t.function.parameters ?? {}),
      }),
    )
    .join('\n');
  const replyAllowed = req.tool_choice === undefined || req.tool_choice === 'auto';
  return [
    'You are given a question and a set of tools. Call the tool that answers the question, with arguments taken from the question.',
    `<tools>\n${list}\n</tools>`,
    'Answer with exactly one JSON object.',
    'To call a tool: {"type": "tool_call", "name": <tool name>, "arguments": {<arguments>}}',
    ...(replyAllowed ? ['To reply to the user instead: {"type": "message", "content": <your reply>}'] : []),
  ].join('\n');
}

/** Schema bookkeeping (`$schema` URLs, titles) only distracts a small model, which copies it into arguments. */
function schemaForPrompt(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(schemaForPrompt);
  if (typeof schema !== 'object' || schema === null) return schema;
  return Object.fromEntries(
    Object.entries(schema)
      .filter(([k]) => !['$schema', '$id', 'title', 'additionalProperties'].includes(k))
      .map(([k, v]) => [k, k === 'properties' || k === '$defs' ? mapValues(v, schemaForPrompt) : schemaForPrompt(v)]),
  );
}

function mapValues(obj: unknown, f: (v: unknown) => unknown): unknown {
  if (typeof obj !== 'object' || obj === null) return obj;
  return Object.fromEntries(Object.entries(obj).map(([k, v]) => [k, f(v)]));
}

function addSystemText(history: ChatHistoryItem[], text: string): void {
  const first = history[0];
  if (first?.type === 'system' && typeof first.text === 'string') first.text = `${first.text}\n\n${text}`;
  else history.unshift({ type: 'system', text });
}

function convertOrReject(schema: unknown, field: string): GbnfJsonSchema {
  return asBadRequest(() => jsonSchemaToGrammarSchema(schema, field));
}

/** A schema the grammar cannot take is the client's error (400, naming the field). */
function asBadRequest<T>(f: () => T): T {
  try {
    return f();
  } catch (e) {
    if (e instanceof SchemaConversionError) throw new BadRequestError(e.field, e.reason);
    throw e;
  }
}

function parseOrRaw(args: string): unknown {
  try {
    return JSON.parse(args);
  } catch {
    return args;
  }
}
