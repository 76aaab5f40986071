import readline from 'node:readline';
import type { Environment } from '../environment.js';
import { createProtocolHandler } from '../protocol/handler.js';
import type { ProtocolErrorType } from '../protocol/schemas.js';

/**
 * Runs inside the sandbox, bundled in front of the generated module. stdout carries only protocol
 * lines, so everything the module prints goes to stderr; this module is evaluated before the
 * generated one, so the redirection is in place before any of its code runs.
 */
const writeProtocol = process.stdout.write.bind(process.stdout);
process.stdout.write = process.stderr.write.bind(process.stderr) as typeof process.stdout.write;

const NETWORK_CODES = new Set(['ECONNREFUSED', 'ENETUNREACH', 'EHOSTUNREACH', 'EAI_AGAIN', 'ENOTFOUND', 'EADDRNOTAVAIL']);

function classify(err: unknown): { status: number; type: ProtocolErrorType; message?: string } | undefined {
  const e = (err ?? {}) as { code?: unknown; permission?: unknown; resource?: unknown; message?: unknown };
  const code = e.code;
  if (code === 'ERR_ACCESS_DENIED') {
    // Node's own message does not say what was refused; its error fields do.
    const what = [e.permission, e.resource].filter((x) => typeof x === 'string' && x).join(' ');
    return { status: 500, type: 'permission_denied', message: `${String(e.message)}${what ? ` (${what})` : ''}` };
  }
  if (code === 'EACCES' || code === 'EPERM') return { status: 500, type: 'permission_denied' };
  if (typeof code === 'string' && NETWORK_CODES.has(code)) return { status: 500, type: 'network_denied' };
  if (code === 'EFBIG' || code === 'ENOSPC' || code === 'EDQUOT') return { status: 500, type: 'disk_limit' };
  if (err instanceof RangeError && /allocation failed|out of memory/i.test(err.message)) return { status: 500, type: 'out_of_memory' };
  return undefined;
}

const REQUIRED = ['tools', 'systemPrompt', 'listTasks', 'reset'] as const;

export function runSandboxChild(mod: unknown): void {
  const env = mod as Environment;
  const missing = env && typeof env === 'object' ? REQUIRED.filter((k) => typeof env[k] !== 'function') : REQUIRED;
  if (missing.length || typeof env.info !== 'object') {
    process.stderr.write(`sandbox: the module's default export is not an Environment (missing ${missing.length ? missing.join(', ') : 'info'})\n`);
    process.exit(3);
  }
  // The parent owns episode lifetime; it closes the whole process rather than sweeping idle episodes.
  const handler = createProtocolHandler(env, { idleTimeoutMs: 2 ** 31 - 1, classifyError: classify });
  const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  lines.on('line', async (line) => {
    let id: unknown = null;
    let reply: { status: number; body: unknown };
    try {
      const req = JSON.parse(line) as { id: unknown; method: string; path: string; body?: unknown };
      id = req.id;
      reply = await handler.handle(req);
    } catch (err) {
      reply = { status: 400, body: { error: { type: 'bad_request', message: `sandbox: bad request line: ${(err as Error).message}` } } };
    }
    let out: string;
    try {
      out = JSON.stringify({ id, ...reply });
    } catch (err) {
      out = JSON.stringify({ id, status: 500, body: { error: { type: 'internal', message: `response is not JSON-serializable: ${(err as Error).message}` } } });
    }
    writeProtocol(out + '\n');
  });
  lines.on('close', () => process.exit(0));
}
