import { randomUUID } from 'node:crypto';
import type { z } from 'zod';
import type { Environment, Episode } from '../environment.js';
import {
  describeZodError,
  EpisodeCreatedSchema,
  EvaluateRequestSchema,
  InfoResponseSchema,
  ResetRequestSchema,
  RewardInfoSchema,
  StepRequestSchema,
  StepResultSchema,
  TasksResponseSchema,
  type ProtocolErrorType,
} from './schemas.js';

const OpeningSchema = EpisodeCreatedSchema.omit({ episodeId: true });

/**
 * The env protocol's request handling, independent of transport: the HTTP server and the sandbox's
 * stdio runner both feed requests through here, so they answer byte-for-byte alike.
 */
export interface ProtocolRequest {
  method: string;
  /** Path without query string, e.g. `/v1/episodes/abc/step`. */
  path: string;
  /** Parsed JSON body; undefined when the request had none. */
  body?: unknown;
  /** Aborted when the client stops waiting (its HTTP connection closed): passed to the env's reset/step/evaluate. */
  signal?: AbortSignal;
}

export interface ProtocolResponse {
  status: number;
  body: unknown;
}

export interface ProtocolHandlerOptions {
  /** Episodes untouched for this long are closed and forgotten (default 10 minutes). */
  idleTimeoutMs?: number;
  /** Maps an env exception to a more specific error type (e.g. the sandbox's permission denials). */
  classifyError?: (err: unknown) => { status: number; type: ProtocolErrorType; message?: string } | undefined;
}

export interface ProtocolHandler {
  handle(req: ProtocolRequest): Promise<ProtocolResponse>;
  /** Number of live episodes (for tests and monitoring). */
  episodeCount(): number;
  /** Closes every live episode and stops the idle sweep. */
  close(): Promise<void>;
}

class ProtocolFault extends Error {
  constructor(
    readonly status: number,
    readonly type: ProtocolErrorType,
    message: string,
  ) {
    super(message);
  }
}

export function errorBody(type: string, message: string) {
  return { error: { type, message } };
}

const DEFAULT_IDLE_MS = 10 * 60_000;

export function createProtocolHandler(env: Environment, opts: ProtocolHandlerOptions = {}): ProtocolHandler {
  const idleMs = opts.idleTimeoutMs ?? DEFAULT_IDLE_MS;
  const episodes = new Map<string, { episode: Episode; lastUsed: number }>();
  // Only a fault this handler threw answers with its own status and type, kept where nothing else
  // reaches: a module sharing the sandbox bundle's top level threw one it built on ProtocolFault's
  // prototype, typed output_limit or __proto__ (rerun 72i).
  const thrown = new WeakMap<object, { status: number; type: ProtocolErrorType; message: string }>();
  const fault = (status: number, type: ProtocolErrorType, message: string) => {
    const f = new ProtocolFault(status, type, message);
    thrown.set(f, { status, type, message });
    return f;
  };

  const sweep = setInterval(
    () => {
      const cutoff = Date.now() - idleMs;
      for (const [id, e] of episodes) {
        if (e.lastUsed < cutoff) {
          episodes.delete(id);
          e.episode.close().catch(() => {});
        }
      }
    },
    Math.max(50, Math.min(idleMs / 2, 30_000)),
  );
  sweep.unref();

  function register(episode: Episode): string {
    const id = randomUUID();
    episodes.set(id, { episode, lastUsed: Date.now() });
    return id;
  }

  function lookup(id: string): Episode {
    const e = episodes.get(id);
    if (!e) throw fault(404, 'unknown_episode', `unknown episode '${id}' (closed, expired or never created)`);
    e.lastUsed = Date.now();
    return e.episode;
  }

  function parse<S extends z.ZodType>(schema: S, body: unknown, what: string): z.infer<S> {
    const r = schema.safeParse(body);
    if (!r.success) throw fault(400, 'bad_request', describeZodError(r.error, what));
    return r.data;
  }

  /** The env's answers are checked too, so a buggy env is named as such instead of breaking clients. */
  function answer<S extends z.ZodType>(schema: S, value: unknown, what: string): z.infer<S> {
    const r = schema.safeParse(value);
    if (!r.success) throw fault(500, 'internal', describeZodError(r.error, `environment returned an invalid ${what}`));
    return r.data;
  }

  async function route(method: string, path: string, body: unknown, signal: AbortSignal | undefined): Promise<unknown> {
    const opts = signal ? { signal } : undefined;
    const parts = path.split('/').filter(Boolean);
    if (parts[0] !== 'v1') throw fault(404, 'not_found', `no such endpoint: ${path}`);
    const allow = (...methods: string[]) => {
      if (!methods.includes(method)) {
        throw fault(405, 'method_not_allowed', `${method} ${path} not allowed (use ${methods.join(' or ')})`);
      }
    };
    if (parts.length === 2 && parts[1] === 'info') {
      allow('GET');
      return answer(
        InfoResponseSchema,
        { info: env.info, tools: env.tools(), systemPrompt: env.systemPrompt() },
        'info/tools/systemPrompt',
      );
    }
    if (parts.length === 2 && parts[1] === 'tasks') {
      allow('GET');
      return answer(TasksResponseSchema, { tasks: await env.listTasks() }, 'task list');
    }
    if (parts.length === 2 && parts[1] === 'episodes') {
      allow('POST');
      const req = parse(ResetRequestSchema, body, 'reset request (expected {taskId} or {seed})');
      const episode = await env.reset(req, opts);
      let opening;
      try {
        opening = answer(
          OpeningSchema,
          {
            taskId: episode.taskId,
            initialMessages: episode.initialMessages(),
            ...(episode.tools ? { tools: episode.tools() } : {}),
          },
          'episode',
        );
      } catch (err) {
        await episode.close().catch(() => {});
        throw err;
      }
      return { episodeId: register(episode), ...opening };
    }
    if (parts[1] === 'episodes' && parts.length === 3) {
      allow('DELETE');
      const episode = lookup(parts[2]);
      episodes.delete(parts[2]);
      await episode.close();
      return {};
    }
    if (parts[1] === 'episodes' && parts.length === 4) {
      const [, , id, verb] = parts;
      if (verb === 'step') {
        allow('POST');
        const { action } = parse(StepRequestSchema, body, 'step request');
        return answer(StepResultSchema, await lookup(id).step(action, opts), 'StepResult');
      }
      if (verb === 'evaluate') {
        allow('POST');
        const { messages, termination } = parse(EvaluateRequestSchema, body, 'evaluate request');
        return answer(RewardInfoSchema, await lookup(id).evaluate(messages, termination, opts), 'RewardInfo');
      }
      if (verb === 'fork') {
        allow('POST');
        return { episodeId: register(await lookup(id).fork()) };
      }
    }
    throw fault(404, 'not_found', `no such endpoint: ${path}`);
  }

  return {
    async handle({ method, path, body, signal }) {
      try {
        return { status: 200, body: await route(method.toUpperCase(), path, body, signal) };
      } catch (err) {
        // Reading a thrown value can throw too (a null-prototype object, a revoked Proxy: rerun
        // 55b); that is still the environment's error, not a bad request.
        try {
          const own = typeof err === 'object' && err !== null ? thrown.get(err) : undefined;
          if (own) return { status: own.status, body: errorBody(own.type, own.message) };
          const message = err instanceof Error ? String(err.message) : String(err);
          const c = opts.classifyError?.(err);
          return {
            status: c?.status ?? 500,
            body: errorBody(c?.type ?? 'internal', c?.message ?? (message || 'environment error')),
          };
        } catch {
          return {
            status: 500,
            body: errorBody('internal', 'the environment threw a value that cannot be read as text'),
          };
        }
      }
    },
    episodeCount: () => episodes.size,
    async close() {
      clearInterval(sweep);
      const all = [...episodes.values()];
      episodes.clear();
      await Promise.allSettled(all.map((e) => e.episode.close()));
    },
  };
}
