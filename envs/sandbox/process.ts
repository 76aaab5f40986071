import type { ResultPromise } from 'execa';
import type { ProtocolResponse } from '../protocol/handler.js';
import type { ProtocolTransport } from '../protocol/client.js';
import { ErrorBodySchema } from '../protocol/schemas.js';
import type { ResolvedLimits } from './isolation.js';

export type SandboxReason =
  | 'compile' // the module did not bundle
  | 'timeout' // wall-clock or CPU limit
  | 'memory'
  | 'permission' // file system, process or API access the sandbox forbids
  | 'network'
  | 'output_limit'
  | 'disk' // scratch space exhausted
  | 'crash' // the process died (or the module's default export is not an Environment)
  | 'env_error' // the environment threw an ordinary exception; the sandbox is still usable
  | 'protocol' // the child broke the stdio protocol
  | 'closed';

/** Why generated code was stopped or refused; `reason` is machine-readable, the message says what happened. */
export class SandboxError extends Error {
  override name = 'SandboxError';
  constructor(
    readonly reason: SandboxReason,
    message: string,
  ) {
    super(`sandbox ${reason}: ${message}`);
  }
}

const STDERR_TAIL = 4096;
/** Answers whose error type says the child is no longer trustworthy are fatal: we kill it. */
const ERROR_REASONS: Record<string, { reason: SandboxReason; fatal: boolean }> = {
  permission_denied: { reason: 'permission', fatal: false },
  network_denied: { reason: 'network', fatal: false },
  out_of_memory: { reason: 'memory', fatal: true },
  disk_limit: { reason: 'disk', fatal: false },
  internal: { reason: 'env_error', fatal: false },
};

type Pending = { resolve: (r: ProtocolResponse) => void; reject: (e: Error) => void; timer: NodeJS.Timeout };

/**
 * The worker's side of a sandboxed env process: JSON lines over stdio, per-request wall clock,
 * output caps, and a clear reason for every way the child can stop.
 */
export class SandboxProcess implements ProtocolTransport {
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private stdoutBuf = '';
  private stderrBytes = 0;
  private stderrTail = '';
  private failure?: SandboxError;
  private readonly exited: Promise<void>;

  constructor(
    private readonly child: ResultPromise,
    private readonly limits: ResolvedLimits,
  ) {
    child.stdout!.setEncoding('utf8');
    child.stdout!.on('data', (chunk: string) => this.onStdout(chunk));
    child.stderr!.on('data', (chunk: Buffer) => this.onStderr(chunk));
    child.stdin!.on('error', () => {}); // EPIPE after the child died; the exit handler reports why
    this.exited = child.then(
      (r) => this.onExit(r.exitCode, r.signal),
      (err: { exitCode?: number; signal?: string }) => this.onExit(err.exitCode, err.signal),
    );
  }

  /** The last few KiB the module wrote to stderr/console (for repair feedback to the generator). */
  get logs(): string {
    return this.stderrTail;
  }

  get dead(): SandboxError | undefined {
    return this.failure;
  }

  request(method: string, path: string, body?: unknown, timeoutMs = this.limits.wallMs): Promise<ProtocolResponse> {
    if (this.failure) return Promise.reject(this.failure);
    const id = this.nextId++;
    let line: string;
    try {
      line = JSON.stringify({ id, method, path, body }) + '\n';
    } catch (err) {
      return Promise.reject(new SandboxError('protocol', `${method} ${path}: request is not JSON-serializable: ${(err as Error).message}`));
    }
    return new Promise<ProtocolResponse>((resolve, reject) => {
      const timer = setTimeout(
        () => this.fail('timeout', `${method} ${path} did not answer within ${timeoutMs} ms; process killed`),
        timeoutMs,
      );
      this.pending.set(id, { resolve, reject, timer });
      this.child.stdin!.write(line);
    }).then((res) => this.checked(res));
  }

  private checked(res: ProtocolResponse): ProtocolResponse {
    if (res.status === 200) return res;
    const parsed = ErrorBodySchema.safeParse(res.body);
    const type = parsed.success ? parsed.data.error.type : 'protocol';
    const message = parsed.success ? parsed.data.error.message : `status ${res.status} without an error body`;
    const mapped = ERROR_REASONS[type] ?? { reason: 'protocol' as const, fatal: false };
    if (mapped.fatal) this.fail(mapped.reason, message);
    throw new SandboxError(mapped.reason, message);
  }

  private onStdout(chunk: string) {
    this.stdoutBuf += chunk;
    let nl: number;
    while ((nl = this.stdoutBuf.indexOf('\n')) >= 0) {
      const line = this.stdoutBuf.slice(0, nl);
      this.stdoutBuf = this.stdoutBuf.slice(nl + 1);
      this.onLine(line);
    }
    if (this.stdoutBuf.length > this.limits.outputBytes) {
      this.fail('output_limit', `a response exceeded ${this.limits.outputBytes} bytes`);
    }
  }

  private onLine(line: string) {
    if (line.length > this.limits.outputBytes) return this.fail('output_limit', `a response exceeded ${this.limits.outputBytes} bytes`);
    let msg: { id?: unknown; status?: unknown; body?: unknown };
    try {
      msg = JSON.parse(line);
    } catch {
      return this.fail('protocol', `non-protocol output on stdout: ${line.slice(0, 120)}`);
    }
    const p = typeof msg.id === 'number' ? this.pending.get(msg.id) : undefined;
    if (!p || typeof msg.status !== 'number') return this.fail('protocol', `unexpected message on stdout: ${line.slice(0, 120)}`);
    this.pending.delete(msg.id as number);
    clearTimeout(p.timer);
    p.resolve({ status: msg.status, body: msg.body });
  }

  private onStderr(chunk: Buffer) {
    this.stderrBytes += chunk.length;
    this.stderrTail = (this.stderrTail + chunk.toString('utf8')).slice(-STDERR_TAIL);
    if (this.stderrBytes > this.limits.outputBytes) {
      this.fail('output_limit', `wrote more than ${this.limits.outputBytes} bytes of logs`);
    }
  }

  private onExit(code: number | undefined, signal: string | undefined) {
    if (this.failure) return this.rejectAll(this.failure);
    const tail = this.stderrTail;
    const last = tail.trim().split('\n').filter((l) => l.trim() && !/^\s+at /.test(l)).slice(-3).join(' | ');
    const how = signal ? `killed by ${signal}` : `exited with code ${code}`;
    if (/heap out of memory|Allocation failed|allocation failed|Fatal process out of memory/i.test(tail)) {
      this.failWith(new SandboxError('memory', `${how}: ran out of memory (limit ${this.limits.memoryMb} MiB)`));
    } else if (signal === 'SIGXCPU') {
      this.failWith(new SandboxError('timeout', `${how}: CPU limit of ${this.limits.cpuSeconds} s reached`));
    } else if (signal === 'SIGXFSZ') {
      this.failWith(new SandboxError('disk', `${how}: file size limit reached`));
    } else if (/ERR_ACCESS_DENIED/.test(tail)) {
      this.failWith(new SandboxError('permission', `${how}: ${last}`));
    } else {
      this.failWith(new SandboxError('crash', `${how}${last ? `: ${last}` : ''}`));
    }
  }

  private fail(reason: SandboxReason, message: string) {
    if (this.failure) return;
    this.child.kill('SIGKILL');
    this.failWith(new SandboxError(reason, message));
  }

  private failWith(err: SandboxError) {
    this.failure ??= err;
    this.rejectAll(this.failure);
  }

  private rejectAll(err: SandboxError) {
    for (const [id, p] of this.pending) {
      clearTimeout(p.timer);
      p.reject(err);
      this.pending.delete(id);
    }
  }

  /** Asks the child to exit (stdin EOF), then kills it if it lingers. */
  async close(graceMs = 1000): Promise<void> {
    if (!this.failure) this.failure = new SandboxError('closed', 'the sandboxed environment was closed');
    this.rejectAll(this.failure);
    this.child.stdin!.end();
    const timer = setTimeout(() => this.child.kill('SIGKILL'), graceMs);
    await this.exited;
    clearTimeout(timer);
  }
}
