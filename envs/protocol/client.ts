import http from 'node:http';
import https from 'node:https';
import type { z } from 'zod';
import type { Message, ToolSchema } from '../../core/messages.js';
import type { RewardInfo, Termination } from '../../core/trajectory.js';
import type {
  AgentAction,
  EnvInfo,
  Environment,
  Episode,
  RequestOptions,
  ResetRequest,
  StepResult,
  TaskRef,
} from '../environment.js';
import type { ProtocolResponse } from './handler.js';
import {
  describeZodError,
  EmptyResponseSchema,
  EpisodeCreatedSchema,
  ErrorBodySchema,
  ForkResponseSchema,
  InfoResponseSchema,
  RewardInfoSchema,
  StepResultSchema,
  TasksResponseSchema,
  type InfoResponse,
} from './schemas.js';

/**
 * How a RemoteEnvironment reaches its server: HTTP (HttpEnvironment) or the sandbox's stdio pipe.
 * An aborted `opts.signal` rejects the request with the signal's reason at once.
 */
export interface ProtocolTransport {
  request(method: string, path: string, body?: unknown, opts?: RequestOptions): Promise<ProtocolResponse>;
}

/** An error answer from an env protocol server ({error: {type, message}} with a 4xx/5xx status). */
export class EnvProtocolError extends Error {
  override name = 'EnvProtocolError';
  constructor(
    readonly status: number,
    readonly type: string,
    message: string,
  ) {
    super(message);
  }
}

/** An Environment whose every call is a request over the env protocol; responses are zod-validated. */
export class RemoteEnvironment implements Environment {
  readonly info: EnvInfo;
  private readonly open = new Set<RemoteEpisode>();

  protected constructor(
    readonly transport: ProtocolTransport,
    private readonly described: InfoResponse,
    readonly label: string,
  ) {
    this.info = described.info;
  }

  /** Fetches /v1/info once; tools() and systemPrompt() then answer locally. */
  static async describe(transport: ProtocolTransport, label: string): Promise<InfoResponse> {
    return call(transport, label, 'GET', '/v1/info', undefined, InfoResponseSchema);
  }

  tools(): ToolSchema[] {
    return this.described.tools;
  }

  systemPrompt(): string {
    return this.described.systemPrompt;
  }

  async listTasks(): Promise<TaskRef[]> {
    return (await this.call('GET', '/v1/tasks', undefined, TasksResponseSchema)).tasks;
  }

  async reset(req: ResetRequest, opts?: RequestOptions): Promise<Episode> {
    const r = await this.call('POST', '/v1/episodes', req, EpisodeCreatedSchema, opts);
    return this.track(r.episodeId, r.taskId, r.initialMessages, r.tools);
  }

  /** Deletes every episode this client still has open on the server. */
  async closeEpisodes(): Promise<void> {
    await Promise.allSettled([...this.open].map((e) => e.close()));
  }

  /** @internal */
  track(id: string, taskId: string, initialMessages: Message[], tools?: ToolSchema[]): RemoteEpisode {
    const e = new RemoteEpisode(this, id, taskId, initialMessages, tools);
    this.open.add(e);
    return e;
  }

  /** @internal */
  untrack(e: RemoteEpisode): void {
    this.open.delete(e);
  }

  /**
   * Whether a failed DELETE means the episode is already gone (expired, or its server stopped), so
   * closing it is done rather than an error.
   */
  episodeGone(err: unknown): boolean {
    return err instanceof EnvProtocolError && err.type === 'unknown_episode';
  }

  /** @internal */
  call<S extends z.ZodType>(
    method: string,
    path: string,
    body: unknown,
    schema: S,
    opts?: RequestOptions,
  ): Promise<z.infer<S>> {
    return call(this.transport, this.label, method, path, body, schema, opts);
  }
}

class RemoteEpisode implements Episode {
  private closed = false;

  constructor(
    private readonly env: RemoteEnvironment,
    readonly id: string,
    readonly taskId: string,
    private readonly initial: Message[],
    private readonly ownTools?: ToolSchema[],
  ) {
    // Only an episode whose server sent its own tools has tools(); the agent otherwise sees the env's.
    if (ownTools) this.tools = () => structuredClone(ownTools);
  }

  tools?: () => ToolSchema[];

  private get path() {
    return `/v1/episodes/${encodeURIComponent(this.id)}`;
  }

  initialMessages(): Message[] {
    return structuredClone(this.initial);
  }

  step(action: AgentAction, opts?: RequestOptions): Promise<StepResult> {
    return this.env.call('POST', `${this.path}/step`, { action }, StepResultSchema, opts);
  }

  evaluate(messages: Message[], termination: Termination, opts?: RequestOptions): Promise<RewardInfo> {
    return this.env.call('POST', `${this.path}/evaluate`, { messages, termination }, RewardInfoSchema, opts);
  }

  async fork(): Promise<Episode> {
    const { episodeId } = await this.env.call('POST', `${this.path}/fork`, undefined, ForkResponseSchema);
    return this.env.track(episodeId, this.taskId, this.initial, this.ownTools);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.env.untrack(this);
    try {
      await this.env.call('DELETE', this.path, undefined, EmptyResponseSchema);
    } catch (err) {
      if (!this.env.episodeGone(err)) throw err;
    }
  }
}

async function call<S extends z.ZodType>(
  transport: ProtocolTransport,
  label: string,
  method: string,
  path: string,
  body: unknown,
  schema: S,
  opts?: RequestOptions,
): Promise<z.infer<S>> {
  const res = await transport.request(method, path, body, opts);
  if (res.status !== 200) {
    const e = ErrorBodySchema.safeParse(res.body);
    if (e.success)
      throw new EnvProtocolError(res.status, e.data.error.type, `${label}: ${method} ${path}: ${e.data.error.message}`);
    throw new EnvProtocolError(
      res.status,
      'bad_response',
      `${label}: ${method} ${path}: HTTP ${res.status} without an error body`,
    );
  }
  const r = schema.safeParse(res.body);
  if (!r.success) {
    throw new EnvProtocolError(502, 'bad_response', describeZodError(r.error, `${label}: ${method} ${path} response`));
  }
  return r.data;
}

/**
 * Talks the env protocol over HTTP with node:http and a keep-alive agent (several times cheaper
 * per request than fetch on loopback, which matters for per-step env calls).
 */
export class HttpTransport implements ProtocolTransport {
  private readonly agent: http.Agent;

  constructor(
    readonly baseUrl: string,
    private readonly timeoutMs = 120_000,
  ) {
    this.agent = baseUrl.startsWith('https:')
      ? new https.Agent({ keepAlive: true })
      : new http.Agent({ keepAlive: true });
  }

  request(method: string, path: string, body?: unknown, opts: RequestOptions = {}): Promise<ProtocolResponse> {
    const { signal } = opts;
    if (signal?.aborted) return Promise.reject(signal.reason);
    const where = `${this.baseUrl}: ${method} ${path}`;
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const headers: http.OutgoingHttpHeaders =
      payload === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) };
    // Paths append to the base so a server mounted under a prefix (http://host/my-env) works.
    const url = new URL(this.baseUrl + path);
    const send = url.protocol === 'https:' ? https.request : http.request;
    return new Promise<ProtocolResponse>((resolve, reject) => {
      // Aborting destroys the socket, so the server sees its client go and can stop working on it.
      const req = send(url, { method, headers, agent: this.agent, ...(signal ? { signal } : {}) }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', (err) =>
          reject(signal?.aborted ? signal.reason : new EnvProtocolError(0, 'unreachable', `${where}: ${err.message}`)),
        );
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          try {
            resolve({ status: res.statusCode ?? 0, body: text ? JSON.parse(text) : undefined });
          } catch {
            reject(
              new EnvProtocolError(
                res.statusCode ?? 0,
                'bad_response',
                `${where}: response is not JSON: ${text.slice(0, 200)}`,
              ),
            );
          }
        });
      });
      req.setTimeout(this.timeoutMs, () =>
        req.destroy(Object.assign(new Error(`no answer within ${this.timeoutMs} ms`), { code: 'TIMEOUT' })),
      );
      req.on('error', (err: NodeJS.ErrnoException) => {
        if (signal?.aborted) return reject(signal.reason);
        const why = err.code === 'TIMEOUT' ? err.message : (err.code ?? err.message);
        reject(new EnvProtocolError(0, 'unreachable', `${where}: ${why}`));
      });
      req.end(payload);
    });
  }

  /** Drops idle keep-alive sockets so the process can exit. */
  close(): void {
    this.agent.destroy();
  }
}

/** A user-supplied environment in any language, reached over the env HTTP protocol. */
export class HttpEnvironment extends RemoteEnvironment {
  static async connect(url: string, opts: { timeoutMs?: number } = {}): Promise<HttpEnvironment> {
    const base = url.replace(/\/+$/, '');
    const transport = new HttpTransport(base, opts.timeoutMs);
    try {
      return new HttpEnvironment(transport, await RemoteEnvironment.describe(transport, url), url);
    } catch (err) {
      transport.close();
      throw err;
    }
  }

  /** Deletes the episodes this client left open and its idle connections; the server keeps running. */
  async close(): Promise<void> {
    await this.closeEpisodes();
    (this.transport as HttpTransport).close();
  }
}
