import type { ToolCall, ToolSchema } from '../../core/messages.js';
import { schemaViolation, type JsonSchema } from './schema.js';

/**
 * A tool the agent can call. `run` reads and mutates `state` in place and returns the observation
 * (a string, or any JSON value, which is serialised). Throw `ToolError` for an error the agent
 * should see (e.g. "Reservation not found", a PermissionError); the episode returns it as an error
 * observation. Arguments are validated against `parameters` before `run` is called.
 */
export interface ToolDef<S = any, A = any> {
  name: string;
  description: string;
  parameters: JsonSchema;
  /** A successful call ends the episode (a final write, a handoff); a failed one is an ordinary error observation. */
  endsEpisode?: boolean;
  run(args: A, ctx: ToolContext<S>): unknown;
}

export interface ToolContext<S> {
  state: S;
  /** The generated instance of this episode (read-only). */
  instance: unknown;
}

/** An error shown to the agent as the tool's observation (`error: true`), e.g. new ToolError('PermissionError: ...'). */
export class ToolError extends Error {
  override name = 'ToolError';
}

export function defineTool<S = any, A = any>(def: ToolDef<S, A>): ToolDef<S, A> {
  if (!/^[a-zA-Z0-9_-]{1,64}$/.test(def.name))
    throw new Error(`tool name '${def.name}' must match [a-zA-Z0-9_-]{1,64}`);
  return def;
}

/**
 * Tools that keep a target environment's exact names and schemas: pass the target's OpenAI
 * schemas (e.g. `targetEnv.tools()`) and one implementation per tool name. A name without a
 * schema, or a schema without an implementation among `names`, is an error.
 */
export function toolsFromSchemas<S>(
  schemas: readonly ToolSchema[],
  impls: Record<string, ToolDef<S>['run']>,
): ToolDef<S>[] {
  return Object.entries(impls).map(([name, run]) => {
    const s = schemas.find((x) => x.function.name === name);
    if (!s) throw new Error(`toolsFromSchemas: target has no tool named '${name}'`);
    return { name, description: s.function.description ?? '', parameters: s.function.parameters as JsonSchema, run };
  });
}

/** The OpenAI function schema the agent sees for a tool. */
export function toToolSchema(t: ToolDef): ToolSchema {
  return { type: 'function', function: { name: t.name, description: t.description, parameters: t.parameters } };
}

/**
 * Runs one call against `state`. Unknown tools, bad JSON, schema violations and thrown errors come
 * back as error observations (`Error: …`); `tool` is the tool that ran, when there was one.
 */
export function runToolCall<S>(
  tools: readonly ToolDef<S>[],
  state: S,
  instance: unknown,
  tc: ToolCall,
): { content: string; error: boolean; tool?: ToolDef<S> } {
  const tool = tools.find((t) => t.name === tc.function.name);
  if (!tool)
    return {
      content: `Error: unknown tool '${tc.function.name}'. Available tools: ${tools.map((t) => t.name).join(', ')}`,
      error: true,
    };
  let args: unknown;
  try {
    args = JSON.parse(tc.function.arguments || '{}');
  } catch (e) {
    return {
      content: `Error: arguments of ${tool.name} are not valid JSON: ${(e as Error).message}`,
      error: true,
      tool,
    };
  }
  const bad = schemaViolation(tool.parameters, args);
  if (bad) return { content: `Error: invalid arguments for ${tool.name}: ${bad}`, error: true, tool };
  try {
    const out = tool.run(args, { state, instance });
    return { content: typeof out === 'string' ? out : JSON.stringify(out ?? null), error: false, tool };
  } catch (e) {
    if (e instanceof ToolError) return { content: `Error: ${e.message}`, error: true, tool };
    return { content: `Error: tool ${tool.name} failed: ${(e as Error)?.message ?? String(e)}`, error: true, tool };
  }
}
