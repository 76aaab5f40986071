import OpenAI from 'openai';
import type {
  ChatCompletion,
  ChatCompletionCreateParamsNonStreaming,
  ChatCompletionMessageParam,
} from 'openai/resources/chat/completions';
import { z } from 'zod';
import type { Config, LlmRoleName } from '../core/config.js';
import type { Usage } from '../core/trajectory.js';
import type { OpenDeps } from '../envs/registry.js';
import { Semaphore } from '../core/concurrency.js';
import { keepAliveDuring } from '../infra/activity-context.js';

/**
 * One OpenAI-compatible client per LLM role. Transport failures (5xx, 429 honouring Retry-After,
 * 408/409, timeouts, connection errors) are retried with backoff by the `openai` client itself;
 * structured outputs are parsed, zod-validated and repaired by a bounded re-ask. Inside an
 * activity, a request heartbeats while it waits and is aborted when the activity is cancelled.
 */

export const DEFAULT_LLM_BASE_URL = 'http://127.0.0.1:8765/v1';
const DEFAULT_MAX_RETRIES = 4;

export class InvalidLlmOutputError extends Error {
  override name = 'InvalidLlmOutputError';
  constructor(
    readonly schemaName: string,
    readonly attempts: number,
    readonly lastError: string,
    readonly lastContent: string | null,
  ) {
    super(`${schemaName}: invalid LLM output after ${attempts} attempt(s): ${lastError}`);
  }
}

export type ChatParams = Omit<ChatCompletionCreateParamsNonStreaming, 'model'> & { model?: string };

export interface Llm {
  readonly role: LlmRoleName;
  readonly client: OpenAI;
  /** The configured model, or the first model the endpoint lists. */
  model(): Promise<string>;
  readonly temperature: number | undefined;
  chat(params: ChatParams, opts?: { signal?: AbortSignal }): Promise<ChatCompletion>;
  structured<T>(
    messages: ChatCompletionMessageParam[],
    schema: z.ZodType<T>,
    name: string,
    opts?: { temperature?: number; seed?: number; signal?: AbortSignal },
  ): Promise<T>;
  /** Tokens and calls spent through this instance so far (for cost in reports). */
  usage(): Usage;
}

export interface LlmOptions {
  maxRetries?: number;
  /** Heartbeat interval while a request waits inside an activity (default KEEPALIVE_MS). */
  heartbeatMs?: number;
}

/** Per process and endpoint, so concurrent activities of one worker share a role's bound. */
const semaphores = new Map<string, Semaphore>();

function semaphoreFor(key: string, limit: number): Semaphore {
  let s = semaphores.get(key);
  if (!s) semaphores.set(key, (s = new Semaphore(limit)));
  return s;
}

export function llmBaseUrl(config: Config, role: LlmRoleName): string {
  return config.llm[role].baseURL ?? process.env.TRACE_LLM_BASE_URL ?? DEFAULT_LLM_BASE_URL;
}

/**
 * Strips a Markdown code fence some models wrap JSON in. By index, not a regex: a backtracking
 * pattern took quadratic time on a reply of an opening fence and whitespace (64,000 newlines:
 * 7.7 s of the worker's event loop).
 */
export function unfence(text: string): string {
  const body = text.trim();
  if (!body.startsWith('```') || body.length < 6 || !body.endsWith('```')) return text;
  let inner = body.slice(3, -3);
  if (inner.startsWith('json')) inner = inner.slice(4);
  return inner.trim();
}

/** The JSON value of an LLM reply (code fence tolerated), or undefined when it is not JSON. */
export function parseJsonReply(content: string | null): unknown {
  try {
    return JSON.parse(unfence(content ?? ''));
  } catch {
    return undefined;
  }
}

function describeIssues(err: z.ZodError): string {
  return err.issues
    .slice(0, 8)
    .map((i) => `${i.path.length ? i.path.join('.') : '(root)'}: ${i.message}`)
    .join('; ');
}

/**
 * The JSON schema sent as response_format: zod's, minus keywords OpenAI's strict mode rejects
 * (string length bounds). Our zod validation still enforces them, with a repair re-ask.
 */
export function jsonSchemaFor(schema: z.ZodType): Record<string, unknown> {
  const { $schema: _drop, ...rest } = z.toJSONSchema(schema) as Record<string, unknown>;
  return stripKeys(rest, new Set(['minLength', 'maxLength'])) as Record<string, unknown>;
}

function stripKeys(v: unknown, drop: ReadonlySet<string>): unknown {
  if (Array.isArray(v)) return v.map((x) => stripKeys(x, drop));
  if (!v || typeof v !== 'object') return v;
  // `properties` maps field names, which may legitimately be called minLength.
  return Object.fromEntries(
    Object.entries(v).flatMap(([k, x]) =>
      drop.has(k) ? [] : [[k, k === 'properties' ? mapValues(x, drop) : stripKeys(x, drop)]],
    ),
  );
}

function mapValues(props: unknown, drop: ReadonlySet<string>): unknown {
  if (!props || typeof props !== 'object') return props;
  return Object.fromEntries(Object.entries(props).map(([k, x]) => [k, stripKeys(x, drop)]));
}

/**
 * How activities get their LLM clients: injected through their factory's deps
 * (createXActivities), so a test or another deployment can hand in its own; createLlm is the default.
 */
export type LlmFactory = (config: Config, role: LlmRoleName) => Llm;

export function createLlm(config: Config, role: LlmRoleName, opts: LlmOptions = {}): Llm {
  const rc = config.llm[role];
  const baseURL = llmBaseUrl(config, role);
  const client = new OpenAI({
    baseURL,
    apiKey: process.env[rc.apiKeyEnv] || 'local',
    timeout: rc.timeoutMs,
    maxRetries: opts.maxRetries ?? DEFAULT_MAX_RETRIES,
  });
  const sem = semaphoreFor(`${role}@${baseURL}#${rc.concurrency}`, rc.concurrency);
  const total: Usage = { promptTokens: 0, completionTokens: 0, calls: 0 };
  let modelId: Promise<string> | undefined;

  const model = () => {
    if (rc.model) return Promise.resolve(rc.model);
    modelId ??= client.models.list().then((page) => {
      const first = page.data[0]?.id;
      if (!first) throw new Error(`llm.${role}.model: not set and ${baseURL}/models lists no model`);
      return first;
    });
    modelId.catch(() => (modelId = undefined));
    return modelId;
  };

  const chat = async (params: ChatParams, o: { signal?: AbortSignal } = {}): Promise<ChatCompletion> => {
    const m = params.model ?? (await model());
    const body: ChatCompletionCreateParamsNonStreaming = {
      ...params,
      model: m,
      ...(params.temperature === undefined && rc.temperature !== undefined ? { temperature: rc.temperature } : {}),
      ...(params.max_tokens === undefined && rc.maxTokens !== undefined ? { max_tokens: rc.maxTokens } : {}),
    };
    // Heartbeating while queued too: the semaphore wait can be as long as the call itself.
    const res = await keepAliveDuring(
      (signal) => sem.run(() => client.chat.completions.create(body, { signal })),
      o.signal,
      opts.heartbeatMs,
    );
    total.calls++;
    total.promptTokens += res.usage?.prompt_tokens ?? 0;
    total.completionTokens += res.usage?.completion_tokens ?? 0;
    return res;
  };

  const structured = async <T>(
    messages: ChatCompletionMessageParam[],
    schema: z.ZodType<T>,
    name: string,
    o: { temperature?: number; seed?: number; signal?: AbortSignal } = {},
  ): Promise<T> => {
    const convo = [...messages];
    const responseFormat = {
      type: 'json_schema' as const,
      json_schema: { name, schema: jsonSchemaFor(schema), strict: true },
    };
    const attempts = config.analysis.maxRepairAttempts + 1;
    let lastError = '';
    let lastContent: string | null = null;
    for (let attempt = 1; attempt <= attempts; attempt++) {
      const res = await chat(
        {
          messages: convo,
          response_format: responseFormat,
          ...(o.temperature !== undefined ? { temperature: o.temperature } : {}),
          ...(o.seed !== undefined ? { seed: o.seed } : {}),
        },
        { signal: o.signal },
      );
      lastContent = res.choices[0]?.message?.content ?? null;
      let parsed: unknown;
      try {
        parsed = JSON.parse(unfence(lastContent ?? ''));
      } catch (e) {
        lastError = `not valid JSON (${(e as Error).message})`;
        convo.push(
          { role: 'assistant', content: lastContent ?? '' },
          { role: 'user', content: repairPrompt(lastError) },
        );
        continue;
      }
      const r = schema.safeParse(parsed);
      if (r.success) return r.data;
      lastError = describeIssues(r.error);
      convo.push({ role: 'assistant', content: lastContent ?? '' }, { role: 'user', content: repairPrompt(lastError) });
    }
    throw new InvalidLlmOutputError(name, attempts, lastError, lastContent);
  };

  return {
    role,
    client,
    model,
    temperature: rc.temperature,
    chat,
    structured,
    usage: () => ({ ...total }),
  };
}

function repairPrompt(error: string): string {
  return `Your previous reply was rejected: ${error}. Reply again with only the corrected JSON object, exactly matching the required schema.`;
}

export function addUsage(a: Usage, b: Usage): Usage {
  return {
    promptTokens: a.promptTokens + b.promptTokens,
    completionTokens: a.completionTokens + b.completionTokens,
    calls: a.calls + b.calls,
  };
}

export const ZERO_USAGE: Usage = Object.freeze({ promptTokens: 0, completionTokens: 0, calls: 0 });

/** The LLM roles an env talks to itself (τ²'s user simulator and judge), for openEnvironment's deps. */
export function envLlm(config: Config, llm: LlmFactory = createLlm): NonNullable<OpenDeps['llm']> {
  return (role) => llm(config, role);
}
