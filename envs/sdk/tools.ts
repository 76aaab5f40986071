import type { ToolSchema } from '../../core/messages.js';
import type { JsonSchema } from './schema.js';

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
  if (!/^[a-zA-Z0-9_-]{1,64}$/.test(def.name)) throw new Error(`tool name '${def.name}' must match [a-zA-Z0-9_-]{1,64}`);
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
