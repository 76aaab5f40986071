import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Environment } from '../environment.js';
import { createProtocolHandler, errorBody, type ProtocolHandlerOptions, type ProtocolResponse } from './handler.js';
import { tooComplex } from './json-limits.js';

/** Deepest nesting of a request body: a message with tool calls is five levels. */
const MAX_BODY_DEPTH = 64;

export interface ServeOptions extends ProtocolHandlerOptions {
  /** 0 (default) picks an ephemeral port. */
  port?: number;
  /** Default 127.0.0.1: loopback only unless asked otherwise. */
  host?: string;
  /** Request bodies larger than this are refused with 413 (default 16 MiB). */
  maxBodyBytes?: number;
}

export interface ServedEnvironment {
  url: string;
  close(): Promise<void>;
}

/** Exposes any Environment over the env HTTP protocol (envs/protocol/README.md). */
export async function serveEnvironment(env: Environment, opts: ServeOptions = {}): Promise<ServedEnvironment> {
  const handler = createProtocolHandler(env, opts);
  const maxBody = opts.maxBodyBytes ?? 16 * 1024 * 1024;

  const server = http.createServer((req, res) => {
    // A client that goes away before its answer (aborted, timed out) aborts the env's work on it.
    const gone = new AbortController();
    res.on('close', () => {
      if (!res.writableFinished)
        gone.abort(new Error(`${req.method} ${req.url}: the client closed the connection before the answer`));
    });
    respond(req, gone.signal).then(
      (r) => send(res, r),
      (err) => send(res, { status: 500, body: errorBody('internal', String(err)) }),
    );
  });

  async function respond(req: http.IncomingMessage, signal: AbortSignal): Promise<ProtocolResponse> {
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of req as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > maxBody)
        return { status: 413, body: errorBody('payload_too_large', `request body exceeds ${maxBody} bytes`) };
      chunks.push(chunk);
    }
    let body: unknown;
    if (size > 0) {
      const text = Buffer.concat(chunks).toString('utf8');
      // A request is a few levels deep; 8 M levels within the size limit held the event loop 5 s (rerun 62b).
      const complex = tooComplex(text, MAX_BODY_DEPTH, Infinity);
      if (complex) return { status: 400, body: errorBody('bad_request', `request body ${complex}`) };
      try {
        body = JSON.parse(text);
      } catch (err) {
        return {
          status: 400,
          body: errorBody('bad_request', `request body is not valid JSON: ${(err as Error).message}`),
        };
      }
    }
    return handler.handle({ method: req.method ?? 'GET', path, body, signal });
  }

  function send(res: http.ServerResponse, r: ProtocolResponse) {
    if (res.headersSent || res.destroyed) return;
    let payload: string;
    try {
      payload = JSON.stringify(r.body);
    } catch (err) {
      r = {
        status: 500,
        body: errorBody('internal', `environment returned a value that is not JSON: ${(err as Error).message}`),
      };
      payload = JSON.stringify(r.body);
    }
    // A refused upload may still be streaming in; close the connection rather than drain it.
    const headers: http.OutgoingHttpHeaders = {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(payload),
    };
    if (r.status === 413) headers.connection = 'close';
    res.writeHead(r.status, headers).end(payload);
  }

  const host = opts.host ?? '127.0.0.1';
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const urlHost = host.includes(':') ? `[${host}]` : host;
  return {
    url: `http://${urlHost}:${port}`,
    async close() {
      await handler.close();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}
