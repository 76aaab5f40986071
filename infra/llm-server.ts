import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { BadRequestError, parseChatRequest } from './llm/chat-request.js';
import { loadLlmEngine, type LlmEngine } from './llm/engine.js';

/**
 * The embedded stack's OpenAI-compatible LLM server: node-llama-cpp on loopback, serving the
 * SmolLM2 GGUF that infra/fetch-model.sh places in .cache/models/. Tool calls and JSON outputs are
 * grammar-constrained, so they always parse (see infra/llm/chat-prompt.ts).
 *
 *   node --import tsx infra/llm-server.ts --port 8765     (prints the base URL; stops on SIGTERM/SIGINT)
 */
const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const DEFAULT_MODEL_PATH = path.join(REPO_ROOT, '.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf');
const MAX_BODY_BYTES = 8 * 1024 * 1024;

export interface LlmServerOptions {
  /** 0 = an ephemeral port. Default: TRACE_LLM_PORT or 8765. */
  port?: number;
  host?: string;
  modelPath?: string;
  /** Tokens per sequence (each request's prompt + completion). */
  contextSize?: number;
  /** Concurrent generations (context sequences); further requests queue. */
  parallel?: number;
  /**
   * CPU threads for evaluation, at most 2. Default 1: llama.cpp's threads spin-wait on each other,
   * and on a busy 2-core machine (workers, Temporal) two threads measured ~40x slower than one.
   */
  threads?: number;
  /**
   * llama.cpp contexts the `parallel` sequences are split over, each decoding on its own `threads`.
   * Default 2 (at most `parallel`): two single-threaded contexts use both cores of a 2-core machine
   * without the spin-waiting of one context with two threads.
   */
  contexts?: number;
}

export interface LlmServer {
  baseURL: string;
  model: string;
  close(): Promise<void>;
}

export async function startLlmServer(opts: LlmServerOptions = {}): Promise<LlmServer> {
  const engine = await loadLlmEngine({
    modelPath: opts.modelPath ?? process.env.TRACE_LLM_MODEL_PATH ?? DEFAULT_MODEL_PATH,
    contextSize: opts.contextSize ?? envInt('TRACE_LLM_CONTEXT_SIZE') ?? 8192,
    parallel: opts.parallel ?? envInt('TRACE_LLM_PARALLEL') ?? 4,
    threads: Math.min(opts.threads ?? envInt('TRACE_LLM_THREADS') ?? 1, 2),
    contexts: opts.contexts ?? envInt('TRACE_LLM_CONTEXTS') ?? 2,
    gpu: process.env.TRACE_LLM_GPU === '1',
  });
  const server = http.createServer((req, res) => {
    handle(engine, req, res).catch((e) =>
      sendError(res, 500, 'server_error', e instanceof Error ? e.message : String(e)),
    );
  });
  const host = opts.host ?? '127.0.0.1';
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(opts.port ?? envInt('TRACE_LLM_PORT') ?? 8765, host, resolve);
    });
  } catch (e) {
    await engine.close();
    throw e;
  }
  const { port } = server.address() as AddressInfo;
  let closing: Promise<void> | undefined;
  return {
    baseURL: `http://${host.includes(':') ? `[${host}]` : host}:${port}/v1`,
    model: engine.modelId,
    close: () =>
      (closing ??= (async () => {
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeAllConnections();
        });
        await engine.close();
      })()),
  };
}

async function handle(engine: LlmEngine, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://local');
  const route = `${req.method} ${url.pathname.replace(/\/+$/, '')}`;
  if (route === 'GET /v1/models') return sendJson(res, 200, { object: 'list', data: [modelCard(engine)] });
  if (route === `GET /v1/models/${engine.modelId}`) return sendJson(res, 200, modelCard(engine));
  if (route === 'GET /health')
    return sendJson(res, 200, { status: 'ok', model: engine.modelId, parallel: engine.parallel, ...engine.stats() });
  if (route !== 'POST /v1/chat/completions') {
    return sendError(res, 404, 'not_found', `no route ${req.method} ${url.pathname}`);
  }

  const raw = await readBody(req);
  if (raw === undefined)
    return sendError(res, 413, 'invalid_request_error', `body: larger than ${MAX_BODY_BYTES} bytes`, 'body');
  let body: unknown;
  try {
    body = JSON.parse(raw);
  } catch {
    return sendError(res, 400, 'invalid_request_error', 'body: not valid JSON', 'body');
  }
  // A client that gives up (timeout, cancel) frees its sequence instead of holding it to the end.
  const abort = new AbortController();
  res.on('close', () => {
    if (!res.writableFinished) abort.abort(new Error('client disconnected'));
  });
  try {
    const request = parseChatRequest(body);
    const done = await engine.complete(request, abort.signal);
    sendJson(res, 200, {
      id: `chatcmpl-${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`,
      object: 'chat.completion',
      created: Math.floor(Date.now() / 1000),
      model: engine.modelId,
      choices: [{ index: 0, message: done.message, logprobs: null, finish_reason: done.finish_reason }],
      usage: done.usage,
    });
  } catch (e) {
    if (abort.signal.aborted) return;
    if (e instanceof BadRequestError) return sendError(res, 400, 'invalid_request_error', e.message, e.param, e.code);
    throw e;
  }
}

function modelCard(engine: LlmEngine) {
  return {
    id: engine.modelId,
    object: 'model',
    created: 0,
    owned_by: 'trace-local',
    context_length: engine.contextSize,
  };
}

async function readBody(req: http.IncomingMessage): Promise<string | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) return undefined;
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function sendJson(res: http.ServerResponse, status: number, body: unknown): void {
  if (res.headersSent || res.destroyed) return;
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function sendError(
  res: http.ServerResponse,
  status: number,
  type: string,
  message: string,
  param: string | null = null,
  code: string | null = null,
): void {
  sendJson(res, status, { error: { message, type, param, code } });
}

function envInt(name: string): number | undefined {
  const v = process.env[name];
  if (v === undefined || v === '') return undefined;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0)
    throw new Error(`${name}: expected a non-negative integer, got ${JSON.stringify(v)}`);
  return n;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      port: { type: 'string' },
      host: { type: 'string' },
      model: { type: 'string' },
      'context-size': { type: 'string' },
      parallel: { type: 'string' },
      contexts: { type: 'string' },
      help: { type: 'boolean' },
    },
  });
  if (values.help) {
    console.log(
      'usage: node --import tsx infra/llm-server.ts [--port 8765] [--host 127.0.0.1] [--model file.gguf] [--context-size 8192] [--parallel 4] [--contexts 2]',
    );
    return;
  }
  const int = (flag: string, v: string | undefined) => {
    if (v === undefined) return undefined;
    if (!/^\d+$/.test(v)) throw new Error(`--${flag}: expected a non-negative integer, got ${JSON.stringify(v)}`);
    return Number(v);
  };
  const server = await startLlmServer({
    port: int('port', values.port),
    host: values.host,
    modelPath: values.model,
    contextSize: int('context-size', values['context-size']),
    parallel: int('parallel', values.parallel),
    contexts: int('contexts', values.contexts),
  });
  console.log(server.baseURL);
  const stop = () => {
    server.close().then(
      () => process.exit(0),
      (e) => {
        console.error(`llm-server: ${e instanceof Error ? e.message : e}`);
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  // node-llama-cpp can reject from inside its sampler, outside any request's promise chain; one
  // stuck request (its client times out and retries) is better than losing the stack's only LLM.
  process.on('unhandledRejection', (e) =>
    console.error(`llm-server: unhandled rejection: ${e instanceof Error ? e.message : e}`),
  );
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  main().catch((e) => {
    console.error(`llm-server: ${e instanceof Error ? e.message : e}`);
    process.exit(1);
  });
}
