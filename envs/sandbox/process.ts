import { createHmac, timingSafeEqual } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import type { ResultPromise } from 'execa';
import type { ProtocolResponse } from '../protocol/handler.js';
import type { ProtocolTransport } from '../protocol/client.js';
import { tooComplex } from '../protocol/json-limits.js';
import { ErrorBodySchema } from '../protocol/schemas.js';
import type { SandboxCgroup } from './cgroup.js';
import { MAC_HEX } from './framing.js';
import { CGROUP_HEADROOM, type ResolvedLimits } from './isolation.js';

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
  | 'isolation' // refused to start: the isolation level here is too weak and was not allowed
  | 'nondeterministic' // a seed's instance changed between resets
  | 'cancelled' // the caller's signal aborted (e.g. the activity was cancelled)
  | 'closed';

/**
 * Why generated code was stopped or refused; `reason` is machine-readable, the message says what
 * happened, and `limit` names the limit that fired (a `limits` key), if one did.
 */
export class SandboxError extends Error {
  override name = 'SandboxError';
  constructor(
    readonly reason: SandboxReason,
    message: string,
    readonly limit?: keyof ResolvedLimits,
  ) {
    // Whatever path a module's text took into the message, the reason is one bounded line (rerun
    // 53b: a crash's stderr and an observation's call id each still reached the trainer whole).
    super(`sandbox ${reason}: ${oneLine(message, MAX_MESSAGE_CHARS)}`);
  }
}
/** A reason's own words plus one or two pieces of the module's text, each cut to MAX_REASON_CHARS. */
const MAX_MESSAGE_CHARS = 1_200;

/** How a limit is named in messages: its option or config path and its value. */
export type LimitNamer = (limit: keyof ResolvedLimits) => string;

const STDERR_TAIL = 4096;
/** How long a process past its logs limit has to die of something else first (onStderr). */
const LAST_WORDS_MS = 1000;
/** Deepest nesting of arrays/objects a response may have; checked before JSON.parse sees it. */
export const MAX_RESPONSE_DEPTH = 64;
/**
 * Most values (array elements, object members) a response may hold, counted before JSON.parse: 4 MiB
 * of small keys in a tool list took ~0.9 s to parse and copy on the worker's event loop, time that
 * other sandboxes' wall clocks ran through (rerun 14). A τ² observation holds a few hundred.
 */
export const MAX_RESPONSE_VALUES = 100_000;

/**
 * A module's text (its thrown error) in a reason: one line, at most MAX_REASON_CHARS. 4 MiB of a
 * thrown error, newlines and all, reached the trainer's failure whole (rerun 51b).
 */
export function oneLine(text: string, maxChars = MAX_REASON_CHARS): string {
  // Escaping only lengthens, so nothing past the first maxChars + 1 characters is ever shown: the
  // rest is not escaped (2 M newlines in a thrown error held the worker 0.3-0.45 s a request: rerun 72f).
  const line = text
    .slice(0, maxChars + 1)
    .replace(
      /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g,
      (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
    );
  return line.length > maxChars ? `${cutText(line, maxChars)}… (${text.length} characters)` : wellFormed(line);
}

/**
 * `text`'s first `maxChars` UTF-16 units, not ending in half a pair, and with no half pair of its
 * own: the generator's repair prompt and the trainer's tokenizer take only whole characters
 * (rerun 54b: a cut through an emoji made the tokenizer raise).
 */
export function cutText(text: string, maxChars: number): string {
  const end = maxChars > 0 && /[\ud800-\udbff]/.test(text[maxChars - 1] ?? '') ? maxChars - 1 : maxChars;
  return wellFormed(text.slice(0, end));
}
const wellFormed = (text: string) =>
  text.replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, '\ufffd');
const MAX_REASON_CHARS = 500;

/**
 * Answers whose error type says the child is no longer trustworthy are fatal: we kill it. A limit
 * the child ran into is named with its value and unit, as the worker's own limits are.
 */
const ERROR_REASONS: Record<string, { reason: SandboxReason; fatal: boolean; limit?: [keyof ResolvedLimits, string] }> =
  {
    permission_denied: { reason: 'permission', fatal: false },
    network_denied: { reason: 'network', fatal: false },
    out_of_memory: { reason: 'memory', fatal: true, limit: ['memoryMb', 'MiB'] },
    disk_limit: { reason: 'disk', fatal: false, limit: ['diskMb', 'MiB'] },
    file_limit: { reason: 'disk', fatal: false, limit: ['maxFiles', 'files'] },
    internal: { reason: 'env_error', fatal: false },
  };

/** Signals each process; whether any took it (one gone or not ours to signal is skipped). */
function signalEach(pids: number[], signal: NodeJS.Signals): boolean {
  let any = false;
  for (const pid of pids) {
    try {
      process.kill(pid, signal);
      any = true;
    } catch {
      // gone (it is exiting), or not ours to signal: a stop then leaves it running
    }
  }
  return any;
}

/** A /proc file's text, or '' where the process is gone or /proc hides it. */
function procText(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return '';
  }
}

/** A /proc directory's entries, or none where the process is gone or /proc hides it. */
function procList(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

const signalName = (n: number) => Object.entries(os.constants.signals).find(([, v]) => v === n)?.[0];

/** A frame of a stack, or a stack's header, as Node and V8 print them. */
const STACK_LINE = /^\s+at |^\s*\d+: |^\s*(-----|<---).*(-----|--->)\s*$/;
/** How often a running process's data segment is read (it sat at the limit 20-80 ms before it died: rerun 67b). */
const DATA_SAMPLE_MS = 10;
/** Samples between listings of the tree: a listing reads two files a process (rerun 87b: 48 forks cost 0.2 of a core). */
const TREE_EVERY = 10;
/** Processes a sample reads: the first in the tree each time (the runner's chain down to node), then the rest in turn. */
const SAMPLE_FIRST = 3;
const SAMPLE_ROTATING = 5;
/** A native death with this share of the data limit in use (or of memoryMb resident) was the memory limit. */
const NEAR_LIMIT = 0.9;
/** Rounds of reading the tree and stopping what is new (a process forks at most once per round). */
const MAX_FREEZE_ROUNDS = 8;
const VM_DATA = /^VmData:\s+(\d+) kB/m;
const VM_RSS = /^VmRSS:\s+(\d+) kB/m;
/** How Node's report of a fatal error begins: the runner's lines begin with their MAC's hex. */
const REPORT_START = Buffer.from('{"header":{"reportVersion":');
/** Bytes of the report kept: its header's event and trigger come first. */
const REPORT_HEAD_BYTES = 4096;
/** The report's first fields: its version, the event (Node's words) and the trigger. */
const REPORT_HEADER = /^\{"header":\{"reportVersion":\d+,"event":("(?:[^"\\]|\\.)*"),"trigger":"(\w+)"/;

/**
 * What Node reported as the process died of a fatal error (`--report-on-fatalerror`): V8's
 * out-of-memory (trigger `OOMError`) or another fatal error. Node writes the report to fd 1
 * (`--report-filename=stdout`), which only Node and the runner write, so the module cannot make one
 * up; its stderr can be: the module prints there, and so does Node on its behalf (its source line
 * and function names in Node's stacks and in an exception in Node's promise-rejection callback:
 * reruns 14, 15, 70b, 71b, 72b), so no reason is read there.
 */
function fatalReport(head: string | undefined): { trigger: string; event: string } | undefined {
  const m = head === undefined ? null : REPORT_HEADER.exec(head);
  return m ? { trigger: m[2], event: String(JSON.parse(m[1])) } : undefined;
}

type Pending = { resolve: (r: ProtocolResponse) => void; reject: (e: Error) => void; timer: NodeJS.Timeout };

/**
 * The worker's side of a sandboxed env process: JSON lines over stdio, per-request wall clock,
 * output caps, and a clear reason for every way the child can stop.
 */
export class SandboxProcess implements ProtocolTransport {
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  /**
   * The bytes of the stdout line not yet ended, copied into one buffer that doubles as it fills,
   * and how many: a list of the chunks as read kept one object and its pooled buffer per chunk, and
   * a module writing a byte at a time grew the worker's heap by 67 MiB for 2.5 MB (rerun 41b).
   */
  private stdoutTail = Buffer.alloc(0);
  private stdoutPending = 0;
  /** Bytes read from stdout so far (a request's wall clock waits while more keep arriving). */
  private stdoutBytes = 0;
  private stderrBytes = 0;
  private stderrTail = '';
  /** Set once stderr passed outputBytes: the limit's failure, a moment later (onStderr). */
  private logsFull?: NodeJS.Timeout;
  /** Set once Node's report began on stdout: the check that the process died (awaitDeath). */
  private deathTimer?: NodeJS.Timeout;
  /** The first bytes of Node's report of a fatal error, once it began on stdout; stdout is read no further. */
  private reportHead?: string;
  private failure?: SandboxError;
  private readonly exited: Promise<void>;
  /** Time requests have kept the sandbox busy (at least one pending), excluding the current stretch. */
  private busyMs = 0;
  private busySince = 0;
  private budgetTimer?: NodeJS.Timeout;
  private frozen = false;
  private frozenPids?: number[];
  /** The most CPU seconds the tree was seen to have used: what counts once /proc no longer shows it. */
  private cpuSeen = 0;
  private dataSampler?: NodeJS.Timeout;
  private dataSeen = 0;
  private residentSeen = 0;
  /** The tree as the memory sample last listed it, samples taken since, and where its turn through the rest is. */
  private sampled = { pids: [] as number[], count: 0, next: 0 };
  /**
   * Called at each answer, the process's CPU read: the env checks its totals over every live
   * process there (each process's own limits cannot see the others'). At each answer, not only
   * where the process stops between requests: a caller keeping a request pending on every process
   * had none stop, and 5.4 s spent of a 3 s total (rerun 43b).
   */
  onAnswered?: () => void;

  /**
   * `key` is the session key, which the child's runner reads as the first stdin line before the
   * module loads; every response line carries its HMAC, so a line the module writes itself is refused.
   */
  constructor(
    private readonly child: ResultPromise,
    private readonly limits: ResolvedLimits,
    private readonly key: Buffer,
    private readonly named: LimitNamer,
    private readonly o: {
      /** Busy time earlier processes of the same env already used: `budgetMs` is a total over them all. */
      spentMs?: number;
      /** The CPU seconds its RLIMIT_CPU allows: all of them are spent when it dies by SIGXCPU. */
      cpuLimit?: number;
      /** Its RLIMIT_DATA in bytes (0: none): a native death near it is the memory limit. */
      dataLimit?: number;
      /** The cgroup the process joined before it ran (cgroup.ts): its stop, CPU count, memory limit and kill. */
      cgroup?: SandboxCgroup;
    } = {},
  ) {
    this.busyMs = o.spentMs ?? 0;
    if (o.dataLimit) {
      this.dataSampler = setInterval(() => this.sampleData(), DATA_SAMPLE_MS);
      this.dataSampler.unref();
    }
    child.stdout!.on('data', (chunk: Buffer) => this.onStdout(chunk));
    child.stderr!.on('data', (chunk: Buffer) => this.onStderr(chunk));
    child.stdin!.on('error', () => {}); // EPIPE after the child died; the exit handler reports why
    child.stdin!.write(key.toString('hex') + '\n');
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

  /** Busy time this process's requests have taken so far (earlier processes' `spentMs` not included). */
  get ownBusyMs(): number {
    return this.busyMs - (this.o.spentMs ?? 0) + (this.pending.size ? performance.now() - this.busySince : 0);
  }

  /**
   * CPU seconds the process tree has used so far (user + system, from its cgroup, else /proc), so that a successor
   * process gets only what is left of `cpuSeconds`. Once the tree is gone, what was last seen of it
   * (read at each answer and before the kill at close), or all its RLIMIT_CPU where
   * that killed it: read after the death, /proc said 0 (rerun 42b counted 0 s of 8.5 s).
   */
  cpuSeconds(): number {
    this.cpuSeen = Math.max(this.cpuSeen, this.cpuNow());
    return this.cpuSeen;
  }

  private cpuNow(): number {
    const counted = this.o.cgroup?.cpuSeconds();
    if (counted !== undefined) return counted;
    let ticks = 0;
    for (const pid of this.treePids()) {
      const stat = procText(`/proc/${pid}/stat`);
      if (!stat) continue;
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      // utime, stime and the same of its children it has reaped (fields 14-17 of proc(5)): a process
      // native code forks is counted after it ends too (rerun 72x).
      ticks += Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14]);
    }
    return ticks / 100; // USER_HZ is 100 on Linux
  }

  /**
   * The process the worker started and all its descendants, breadth first, so the runner's chain
   * down to node comes first (from /proc; just the first where /proc cannot say).
   */
  private treePids(): number[] {
    const pids = this.child.pid === undefined ? [] : [this.child.pid];
    // Each thread's children on their own: one thread that ended meanwhile hides none of the others' (rerun 88b).
    for (let i = 0; i < pids.length; i++)
      for (const task of procList(`/proc/${pids[i]}/task`))
        pids.push(...procText(`/proc/${pids[i]}/task/${task}/children`).split(' ').filter(Boolean).map(Number));
    return pids;
  }

  /**
   * Between requests the sandbox is stopped, so no module code runs while nothing is asked of it:
   * no loop driven by real events (file I/O, a wait on another thread) can count through the
   * worker's idle gaps, which is where a training process differs from validation's. Its timers
   * are virtual (virtual-time.ts) and its clocks frozen, so once it goes on nothing shows how long
   * it was stopped. With a cgroup its freezer stops the whole tree at once, forks included, and no
   * signal undoes it. Without one, SIGSTOP to each process: JavaScript can start no process, but
   * native code can fork (rerun 72x), so the tree is read at every stop, and again after each round
   * of stops, until no process is new (a stopped process forks no more; SIGCONT is refused by the
   * seccomp filter where the kernel does not send it itself: reruns 72z, 73b). A tree still
   * growing after a few rounds is killed.
   */
  private freeze() {
    if (this.failure || this.frozen) return;
    if (this.o.cgroup?.has('freeze')) {
      this.frozen = this.freezeCgroup(true);
      return;
    }
    const seen = new Set<number>();
    let fresh = this.treePids();
    for (let round = 0; fresh.length && round < MAX_FREEZE_ROUNDS; round++) {
      for (const pid of fresh) seen.add(pid);
      this.frozen = signalEach(fresh, 'SIGSTOP') || this.frozen;
      fresh = this.treePids().filter((pid) => !seen.has(pid));
    }
    this.frozenPids = [...seen];
    if (fresh.length)
      this.fail('permission', `its processes kept forking while it was stopped between requests (${fresh.length} new)`);
  }

  private thaw() {
    if (!this.frozen) return;
    this.frozen = false;
    if (this.o.cgroup?.has('freeze')) this.freezeCgroup(false);
    else signalEach(this.frozenPids ?? [], 'SIGCONT');
  }

  /** Freezes or thaws the cgroup; a cgroup that refuses fails the sandbox (its stop is not what it should be). */
  private freezeCgroup(on: boolean): boolean {
    try {
      this.o.cgroup!.freeze(on);
      return on;
    } catch (err) {
      this.fail('isolation', `its cgroup could not be ${on ? 'frozen' : 'thawed'}: ${(err as Error).message}`);
      return false;
    }
  }

  /** Whether the process is stopped now (between requests). */
  get stopped(): boolean {
    return this.frozen;
  }

  /**
   * `limit`: the wall clock this request runs under (start-up has its own). An aborted `signal`
   * rejects at once, but the request stays pending: the child answers requests in turn and cannot drop
   * one, so its late answer is read and discarded, still under `limit` and the busy budget. Killing
   * the whole process is SandboxOptions.signal's job, since other episodes may share it.
   */
  request(
    method: string,
    path: string,
    body?: unknown,
    opts: { signal?: AbortSignal; limit?: 'wallMs' | 'startMs' } = {},
  ): Promise<ProtocolResponse> {
    const { signal, limit = 'wallMs' } = opts;
    if (this.failure) return Promise.reject(this.failure);
    if (signal?.aborted) return Promise.reject(signal.reason);
    const id = this.nextId++;
    let line: string;
    try {
      line = JSON.stringify({ id, method, path, body });
    } catch (err) {
      return Promise.reject(
        new SandboxError('protocol', `${method} ${path}: request is not JSON-serializable: ${(err as Error).message}`),
      );
    }
    const answered = new Promise<ProtocolResponse>((resolve, reject) => {
      // A late timer may be the worker's own stall (a long parse, a busy machine), with the answer
      // already in the pipe: it is read first, and only a request still unanswered once stdout has
      // gone quiet fails (an honest sandbox had been killed during another's parse: rerun 14).
      let seen = -1;
      const expire = () => {
        if (!this.pending.has(id) || this.failure) return;
        if (this.stdoutBytes !== seen) {
          seen = this.stdoutBytes;
          return void setImmediate(expire);
        }
        this.fail(
          'timeout',
          `${method} ${path} did not answer in time (${this.named(limit)} ms); process killed`,
          limit,
        );
      };
      const timer = setTimeout(expire, this.limits[limit]);
      if (!this.pending.size) this.startBusy();
      this.pending.set(id, { resolve, reject, timer });
      this.thaw();
      // Signed too (apart from answers: `request ` first), so the runner serves only the worker's
      // lines: a module that closed fd 0 and opened a file of its own there had the runner serve
      // requests it wrote (red-team rerun 8).
      this.child.stdin!.write(`${createHmac('sha256', this.key).update(`request ${line}`).digest('hex')} ${line}\n`);
    });
    if (!signal) return answered.then((res) => this.checked(res));
    return new Promise<ProtocolResponse>((resolve, reject) => {
      const onAbort = () => reject(signal.reason);
      signal.addEventListener('abort', onAbort, { once: true });
      answered
        .then((res) => this.checked(res))
        .then(resolve, reject)
        .finally(() => signal.removeEventListener('abort', onAbort));
    });
  }

  private checked(res: ProtocolResponse): ProtocolResponse {
    if (res.status === 200) return res;
    const parsed = ErrorBodySchema.safeParse(res.body);
    const type = parsed.success ? parsed.data.error.type : 'protocol';
    const message = parsed.success ? oneLine(parsed.data.error.message) : `status ${res.status} without an error body`;
    // The runner's own refusal of an answer too long to send (the message is the worker's, as for one it counts).
    if (type === 'output_limit') {
      this.fail('output_limit', `a response exceeded ${this.named('outputBytes')} bytes`, 'outputBytes');
      throw this.failure;
    }
    // An own entry only: `__proto__` read Object.prototype, and the error had no reason (rerun 72i).
    const mapped = Object.hasOwn(ERROR_REASONS, type)
      ? ERROR_REASONS[type]
      : { reason: 'protocol' as const, fatal: false };
    const [limit, unit] = mapped.limit ?? [];
    const named = limit ? `${message} (${this.named(limit)} ${unit})` : message;
    if (mapped.fatal) this.fail(mapped.reason, named, limit);
    throw new SandboxError(mapped.reason, named, limit);
  }

  /**
   * Splits stdout into lines as bytes: `outputBytes` counts bytes (a decoded string's length counts
   * UTF-16 units, and 4 Mi euro signs, 12 MiB, had passed a 4 MiB limit: red-team rerun 11).
   */
  private onStdout(chunk: Buffer) {
    this.stdoutBytes += chunk.length;
    if (this.reportHead !== undefined) return; // Node is dying: the rest is its report
    const tooLong = () =>
      this.fail('output_limit', `a response exceeded ${this.named('outputBytes')} bytes`, 'outputBytes');
    let start = 0;
    for (let nl = chunk.indexOf(0x0a); nl >= 0 && !this.failure; nl = chunk.indexOf(0x0a, start)) {
      const end = chunk.subarray(start, nl);
      const line = this.stdoutPending ? Buffer.concat([this.stdoutTail.subarray(0, this.stdoutPending), end]) : end;
      this.dropTail();
      start = nl + 1;
      if (this.takeReport(line)) return this.awaitDeath();
      if (line.length > this.limits.outputBytes) return tooLong();
      this.onLine(line.toString('utf8'));
    }
    if (this.failure) return this.dropTail();
    const rest = chunk.subarray(start);
    if (this.stdoutPending + rest.length > this.limits.outputBytes) {
      // A report is the module's size (its stack, its heap): kept in part, never past a limit.
      const head = Buffer.concat([
        this.stdoutTail.subarray(0, this.stdoutPending),
        rest.subarray(0, REPORT_HEAD_BYTES),
      ]);
      this.dropTail();
      return this.takeReport(head) ? this.awaitDeath() : tooLong();
    }
    if (this.stdoutPending + rest.length > this.stdoutTail.length) {
      const grown = Buffer.allocUnsafe(Math.max(2 * this.stdoutTail.length, this.stdoutPending + rest.length, 4096));
      this.stdoutTail.copy(grown, 0, 0, this.stdoutPending);
      this.stdoutTail = grown;
    }
    rest.copy(this.stdoutTail, this.stdoutPending);
    this.stdoutPending += rest.length;
  }

  /**
   * Takes a line (or the start of one) that begins as Node's report of a fatal error does, the one
   * line on stdout the runner does not sign: Node writes it to the fd it holds, as it dies. Written
   * to a file it opened then, it was lost wherever the module had every descriptor in use, and
   * V8's out-of-memory read as a crash (reruns 76a-79a).
   */
  private takeReport(bytes: Buffer): boolean {
    if (!bytes.subarray(0, REPORT_START.length).equals(REPORT_START)) return false;
    this.reportHead = bytes.toString('utf8', 0, Math.min(bytes.length, REPORT_HEAD_BYTES));
    return true;
  }

  /**
   * After Node's report only its death is to come: stdout is read no further (rerun 86b: native
   * code wrote a report's first line, then a flood the worker read on at 0.75 of a core until a
   * wall clock), and what the worker would fail meanwhile waits for it. A process alive
   * LAST_WORDS_MS later was no Node dying.
   */
  private awaitDeath() {
    this.child.stdout!.pause();
    this.child.once?.('exit', () => this.child.stdout!.resume()); // its end lets the exit be seen
    this.deathTimer = setTimeout(() => {
      this.child.stdout!.resume();
      if (this.hasExited()) return;
      this.kill();
      this.failWith(new SandboxError('protocol', "Node's fatal-error report on stdout, and the process lived on"));
    }, LAST_WORDS_MS);
  }

  /** Whether the process has ended (its streams may still be paused, so onExit has not run). */
  private hasExited(): boolean {
    return this.child.exitCode !== null || this.child.signalCode !== null;
  }

  /** Forgets the line not yet ended, and the buffer that held it where it grew past a few KiB. */
  private dropTail() {
    this.stdoutPending = 0;
    if (this.stdoutTail.length > 4096) this.stdoutTail = Buffer.alloc(0);
  }

  private onLine(line: string) {
    if (this.logsFull) return; // past its logs limit: failing
    const mac = Buffer.from(line.slice(0, MAC_HEX), 'hex');
    const json = line.slice(MAC_HEX + 1);
    const expected = createHmac('sha256', this.key).update(json).digest();
    if (line[MAC_HEX] !== ' ' || mac.length !== expected.length || !timingSafeEqual(mac, expected)) {
      return this.fail('protocol', `a line on stdout that the sandbox runner did not write: ${line.slice(0, 120)}`);
    }
    const complex = tooComplex(json, MAX_RESPONSE_DEPTH, MAX_RESPONSE_VALUES);
    if (complex) return this.fail('protocol', `a response ${complex}`);
    let msg: { id?: unknown; status?: unknown; body?: unknown; exit?: unknown; message?: unknown };
    try {
      msg = JSON.parse(json);
    } catch {
      return this.fail('protocol', `a runner line that is not JSON: ${json.slice(0, 120)}`);
    }
    // The runner's notice of the module's own exit (Node's exit may hang on the runner's read of fd 0).
    if (typeof msg.exit === 'number')
      return this.fail('crash', `exited with code ${msg.exit}: ${oneLine(String(msg.message))}`);
    const p = typeof msg.id === 'number' ? this.pending.get(msg.id) : undefined;
    if (!p || typeof msg.status !== 'number')
      return this.fail('protocol', `unexpected message on stdout: ${line.slice(0, 120)}`);
    // One of its processes killed for the cgroup's memory limit: the sandbox as a whole reached it.
    if (this.o.cgroup?.oomKilled()) return this.exceeded(this.outOfMemory('the kernel killed one of its processes'));
    this.pending.delete(msg.id as number);
    clearTimeout(p.timer);
    if (!this.pending.size) {
      this.stopBusy();
      this.freeze();
    }
    this.cpuSeconds();
    this.onAnswered?.();
    p.resolve({ status: msg.status, body: msg.body });
  }

  /** The total budget runs only while a request is pending, so idle time between requests is free. */
  private startBusy() {
    this.busySince = performance.now();
    this.budgetTimer = setTimeout(
      () =>
        this.fail(
          'timeout',
          `requests kept the sandbox busy for its whole budget (${this.named('budgetMs')} ms in total); process killed`,
          'budgetMs',
        ),
      Math.max(0, this.limits.budgetMs - this.busyMs),
    );
  }

  private stopBusy() {
    clearTimeout(this.budgetTimer);
    this.busyMs += performance.now() - this.busySince;
  }

  private onStderr(chunk: Buffer) {
    this.stderrBytes += chunk.length;
    this.stderrTail = (this.stderrTail + chunk.toString('utf8')).slice(-STDERR_TAIL);
    // Named a moment later: a death under way writes last words of its own here, V8's and Node's
    // around its report (~1.6 KB, which the pipe holds), and is named by its cause (rerun 80a: with
    // the module's logs just under the limit, a real out-of-memory read as this one; 82a: a native
    // abort as this one). Meanwhile stderr is not read (rerun 81a: read on, a flood cost the worker
    // most of a core) and no answer is taken; any other limit that fires is this one, passed first
    // (81a: a request's wall clock).
    if (this.stderrBytes > this.limits.outputBytes && !this.logsFull) {
      this.child.stderr!.pause();
      this.logsFull = setTimeout(() => {
        this.child.stderr!.resume(); // its end, once the process is gone, lets the exit be seen
        if (this.hasExited() || this.deathTimer) return; // its exit, or awaitDeath, names it
        this.kill();
        this.failWith(this.logsOverLimit());
      }, LAST_WORDS_MS);
    }
  }

  private logsOverLimit() {
    return new SandboxError(
      'output_limit',
      `wrote more than ${this.named('outputBytes')} bytes of logs`,
      'outputBytes',
    );
  }

  /**
   * The most data segment (VmData, what RLIMIT_DATA counts) any process of the tree was seen to
   * use, read every few ms while it runs: node dies natively, not by V8's out-of-memory report,
   * when an allocation outside V8's heap fails at the limit (the collection it starts cannot get
   * memory either: SIGSEGV in 13 of 13 runs of 64 KiB buffers, rerun 67b), and a dead process's
   * use cannot be read. And the most resident memory (VmRSS): V8's heap at its limit where Node
   * wrote no report (rerun 72c, when the report was a file: every descriptor in use). What it
   * reads is bounded, so that native code's forks do not make the worker's CPU its own (rerun 87b):
   * once node is in it, the tree is listed every `TREE_EVERY` samples, and each reads node's chain
   * and a few others in turn.
   */
  private sampleData() {
    if (this.frozen || this.failure) return;
    const s = this.sampled;
    // Listed each time while shorter than the chain down to node (rerun 88a: a first listing of bwrap's two left node unread 100 ms).
    if (s.count++ % TREE_EVERY === 0 || s.pids.length < SAMPLE_FIRST) s.pids = this.treePids();
    const rest = s.pids.length - SAMPLE_FIRST;
    const picked = s.pids.slice(0, SAMPLE_FIRST);
    for (let i = 0; i < Math.min(SAMPLE_ROTATING, rest); i++) picked.push(s.pids[SAMPLE_FIRST + (s.next++ % rest)]);
    for (const pid of picked) {
      const status = procText(`/proc/${pid}/status`);
      const bytes = (field: RegExp) => Number(field.exec(status)?.[1] ?? 0) * 1024;
      this.dataSeen = Math.max(this.dataSeen, bytes(VM_DATA));
      this.residentSeen = Math.max(this.residentSeen, bytes(VM_RSS));
    }
  }

  private onExit(code: number | undefined, killedBy: string | undefined) {
    clearInterval(this.dataSampler);
    if (this.failure) return this.rejectAll(this.failure);
    // bwrap reports its child's death by signal N as exit code 128 + N.
    const signal = killedBy ?? (code !== undefined && code > 128 ? signalName(code - 128) : undefined);
    const tail = this.stderrTail;
    // Its last words, without stack frames, one line as thrown errors are (rerun 53b: 4 KB with
    // escapes): the module's or Node's, and only ever quoted, never read for the reason.
    const last = oneLine(
      tail
        .trim()
        .split('\n')
        .filter((l) => l.trim() && !STACK_LINE.test(l))
        .slice(-3)
        .join(' | '),
    );
    const how = signal ? `killed by ${signal}` : `exited with code ${code}`;
    if (this.reportHead === undefined) this.takeReport(this.stdoutTail.subarray(0, this.stdoutPending)); // no newline after it
    const report = signal ? fatalReport(this.reportHead) : undefined;
    // Past the logs limit, an exit (the module's own) is that limit; a death by signal, which
    // Node's last words announce (a module sends no signal), is named by its cause below (rerun
    // 82a: a native abort's 1 KB on stderr crossed it and read as output_limit).
    if (this.logsFull && !signal) return this.failWith(this.logsOverLimit());
    const mib = (n: number) => Math.round(n / 2 ** 20);
    const dataLimit = this.o.dataLimit ?? 0;
    if (signal === 'SIGXCPU') {
      this.cpuSeen = Math.max(this.cpuSeen, this.o.cpuLimit ?? 0);
      this.failWith(
        new SandboxError('timeout', `${how}: CPU time limit reached (${this.named('cpuSeconds')} s)`, 'cpuSeconds'),
      );
    } else if (signal === 'SIGXFSZ') {
      this.failWith(
        new SandboxError('disk', `${how}: file size limit reached (${this.named('diskMb')} MiB)`, 'diskMb'),
      );
    } else if (this.o.cgroup?.oomKilled()) {
      this.failWith(this.outOfMemory(how));
    } else if (this.o.cgroup?.pidsLimited()) {
      this.failWith(
        new SandboxError(
          'permission',
          `${how} after its cgroup refused a process or thread: process limit reached (${this.named('maxProcesses')})${last ? `; last output: ${last}` : ''}`,
          'maxProcesses',
        ),
      );
    } else if (signal === 'SIGKILL') {
      // Every limit the worker enforces sets the failure before it kills, so this one came from elsewhere.
      this.failWith(
        new SandboxError(
          'crash',
          `${how}, not by a sandbox wall clock: by the CPU hard limit (${this.named('cpuSeconds')} s + 1 s) or from outside the sandbox (e.g. the kernel's OOM killer when the machine runs short of memory)${last ? `; last output: ${last}` : ''}`,
        ),
      );
    } else if (report?.trigger === 'OOMError') {
      this.failWith(
        new SandboxError(
          'memory',
          `${how}: ran out of memory (${this.named('memoryMb')} MiB): ${oneLine(report.event, 300)}`,
          'memoryMb',
        ),
      );
    } else if (dataLimit && this.dataSeen >= NEAR_LIMIT * dataLimit) {
      this.failWith(
        new SandboxError(
          'memory',
          `${how} with ${mib(this.dataSeen)} MiB of its ${mib(dataLimit)} MiB data limit in use: ran out of memory outside V8's heap (${this.named('memoryMb')} MiB + 256 MiB)`,
          'memoryMb',
        ),
      );
    } else if (dataLimit && this.residentSeen >= NEAR_LIMIT * this.limits.memoryMb * 2 ** 20) {
      this.failWith(
        new SandboxError(
          'memory',
          `${how} with ${mib(this.residentSeen)} MiB resident: ran out of memory (${this.named('memoryMb')} MiB)`,
          'memoryMb',
        ),
      );
    } else if (report) {
      this.failWith(new SandboxError('crash', `${how}: a fatal error in Node: ${oneLine(report.event, 300)}`));
    } else {
      this.failWith(new SandboxError('crash', `${how}${last ? `: ${last}` : ''}`));
    }
  }

  private outOfMemory(how: string) {
    return new SandboxError(
      'memory',
      `${how}: the sandbox's processes used all the memory their cgroup allows, the kernel's for them included (${this.named('memoryMb')} MiB + ${CGROUP_HEADROOM})`,
      'memoryMb',
    );
  }

  /** Kills the process: every pending and later request rejects with SandboxError('cancelled'). */
  cancel(why: string) {
    this.fail('cancelled', why);
  }

  /** Kills the process for a limit the env enforces over all its processes (the CPU or busy time in total). */
  exceeded(err: SandboxError) {
    if (this.failure) return;
    this.kill();
    this.failWith(err);
  }

  private fail(reason: SandboxReason, message: string, limit?: keyof ResolvedLimits) {
    if (this.failure || (this.deathTimer && reason !== 'cancelled')) return; // a death under way names itself
    this.kill();
    if (this.logsFull && reason !== 'cancelled') this.failWith(this.logsOverLimit());
    else this.failWith(new SandboxError(reason, message, limit));
  }

  /**
   * Every process of the tree, not only the one started: the sandbox's init dies with it by a
   * parent-death signal, which native code that took the init over could clear (rerun 72x: the
   * sandbox outlived the kill, and `close()` waited for ever on its pipes). Killed itself, the
   * init takes its whole pid namespace with it. With a cgroup, every process it holds, in the
   * tree or not.
   */
  private kill() {
    const tree = this.treePids();
    this.child.kill('SIGKILL');
    signalEach(tree.slice(1), 'SIGKILL');
    this.o.cgroup?.kill();
  }

  private failWith(err: SandboxError) {
    clearTimeout(this.logsFull);
    clearTimeout(this.deathTimer);
    this.failure ??= err;
    this.rejectAll(this.failure);
  }

  private rejectAll(err: SandboxError) {
    if (this.pending.size) this.stopBusy();
    for (const [id, p] of this.pending) {
      clearTimeout(p.timer);
      p.reject(err);
      this.pending.delete(id);
    }
  }

  /**
   * Stops the process: killed as it is (stopped between requests, it runs nothing more), its CPU
   * read just before. Let see the end of its input first, a module ran for a second's grace on CPU
   * no reading counted (rerun 42b: 0.5 s per process).
   */
  async close(): Promise<void> {
    if (!this.failure) this.failure = new SandboxError('closed', 'the sandboxed environment was closed');
    this.rejectAll(this.failure);
    this.cpuSeconds();
    this.kill();
    await this.exited;
    await this.o.cgroup?.drained();
    this.cpuSeconds();
    await this.o.cgroup?.remove();
  }
}
