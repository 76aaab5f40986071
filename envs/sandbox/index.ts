import { createHash, randomBytes } from 'node:crypto';
import { chmod, rm } from 'node:fs/promises';
import path from 'node:path';
import { execa } from 'execa';
import type { z } from 'zod';
import { SandboxLimitsSchema, type SandboxLimits } from '../../core/sandbox.js';
import type { Message, ToolSchema } from '../../core/messages.js';
import type { RewardInfo } from '../../core/trajectory.js';
import {
  type Speech,
  type AgentAction,
  type EnvInfo,
  type Environment,
  type Episode,
  type RequestOptions,
  type ResetRequest,
  type StepResult,
  type TaskRef,
} from '../environment.js';
import { EnvProtocolError, RemoteEnvironment } from '../protocol/client.js';
import { ABNORMAL, INSPECT_PREFIX, inspectInstance, type InstanceView } from '../sdk/define.js';
import { describeZodError, type InfoResponse } from '../protocol/schemas.js';
import { BundleError, bundleEnvModule } from './bundle.js';
import { SESSION_KEY_BYTES } from './framing.js';
import {
  allocateUid,
  inheritableFds,
  dataLimitBytes,
  isolationIfAvailable,
  makeSandboxDir,
  cgroupMemoryBytes,
  sandboxCommand,
  sandboxIsolation,
  type IsolationLevel,
  type ResolvedLimits,
  type SandboxIsolation,
} from './isolation.js';
import { AgentCalls } from './agent-calls.js';
import { anchorMiss, goldAnchorOf, type AnchorMiss, type GoldAnchor } from '../gold-anchor.js';
import { callSchemaFault, lengthBounds, MAX_ENV_LITERAL_CHARS, MAX_LENGTH_BOUNDS } from '../sdk/schema.js';
import { MAX_RESPONSE_DEPTH, MAX_RESPONSE_VALUES, oneLine, SandboxError, SandboxProcess } from './process.js';
import { tooComplex } from '../protocol/json-limits.js';
import { cgroupSupport, SandboxCgroup } from './cgroup.js';

export { oneLine, SandboxError, type SandboxReason } from './process.js';
export { sandboxIsolation, type IsolationLevel, type SandboxIsolation } from './isolation.js';
export { BundleError, checkSyntax, enumDeclaration } from './bundle.js';

export { SandboxLimitsSchema, type SandboxLimits };

export const DEFAULT_LIMITS: ResolvedLimits = {
  wallMs: 10_000,
  startMs: 60_000,
  budgetMs: 3_600_000,
  memoryMb: 512,
  outputBytes: 4 * 1024 * 1024,
  cpuSeconds: 600,
  maxProcesses: 64,
  diskMb: 64,
  maxFiles: 4096,
  episodesPerProcess: 32,
  idleRetireMs: 5_000,
};

export interface SandboxOptions {
  /** TypeScript source of an env module (`export default` an Environment; may import '#env-sdk'). */
  source?: string;
  /** …or the path of such a module. */
  modulePath?: string;
  limits?: SandboxLimits;
  /** Default: the strongest level that works here. Naming a level fails if it does not work. */
  isolation?: IsolationLevel;
  /**
   * Run at a level without both network and file-system namespaces (anything but `bwrap`);
   * refused unless set, since generated code could then reach host sockets or files.
   */
  allowWeakIsolation?: boolean;
  /**
   * Episodes by seed alone (a generated env): the env lists no tasks whatever the module says, and
   * a reset by task id other than an inspection is refused. Validation plays seeds; a module that
   * listed tasks had training play them, and paid only there (rerun 28).
   */
  seedsOnly?: boolean;
  /**
   * Training's hold on what a module pays for trajectories no validation play makes (reruns 29–36):
   * an episode that lacks one of its seed's gold calls is paid at most `callsCap`; one that makes
   * them all but speaks less than gold, or leaves out a number or an instance value gold's words
   * say, at most `wordsCap` (`envs/gold-anchor.ts`). Gold is held to speak at least as
   * `goldSpeech`, the most any of check 5's golds did. Training sets the three from check 5
   * (`missingCallCap`, `silentEndingCap`, `goldSpeech`): the least validation saw gold's
   * perturbations of each kind paid.
   */
  goldAnchor?: { callsCap: number; wordsCap: number; goldSpeech: Speech };
  /** Where `limits` come from in the caller's config, for messages (e.g. 'synthesis.sandbox'); default 'limits'. */
  configPath?: string;
  /**
   * Aborting it (e.g. an activity's cancellation signal) kills the process at once: the request in
   * flight, and every later one, rejects with SandboxError('cancelled') instead of running on.
   */
  signal?: AbortSignal;
}

/** Isolation without network and file-system namespaces: generated code could reach the host. */
export const isWeak = (iso: SandboxIsolation) => !iso.networkBlocked || !iso.filesystemNamespace;

/** One sandbox process: its own bundle, scratch dir and module instance. */
class SandboxGeneration extends RemoteEnvironment {
  /** Episodes begun here (resets, forks); at `episodesPerProcess` the process takes no new ones. */
  started = 0;
  /** Episodes begun here and not yet closed (a reset in flight included). */
  openEpisodes = 0;
  retired = false;
  idleTimer?: NodeJS.Timeout;

  constructor(
    readonly proc: SandboxProcess,
    described: Awaited<ReturnType<typeof RemoteEnvironment.describe>>,
    readonly dir: string,
    private readonly unlisten: () => void,
  ) {
    super(proc, described, 'sandbox');
  }

  /** After the process has stopped, its episodes are gone: closing them succeeds. */
  override episodeGone(err: unknown): boolean {
    return super.episodeGone(err) || this.proc.dead !== undefined;
  }

  /** An answer that breaks the Environment interface is the module's bug: report it as such. */
  override async call<S extends z.ZodType>(
    method: string,
    p: string,
    body: unknown,
    schema: S,
    opts?: RequestOptions,
  ): Promise<z.infer<S>> {
    let out: z.infer<S>;
    try {
      out = await super.call(method, p, body, schema, opts);
    } catch (err) {
      if (err instanceof EnvProtocolError) throw new SandboxError('env_error', oneLine(err.message));
      throw err;
    }
    const fault =
      method !== 'POST'
        ? undefined
        : p.endsWith('/step')
          ? observationFault((body as { action: AgentAction }).action, (out as StepResult).observation)
          : p.endsWith('/evaluate')
            ? rewardFault(out as RewardInfo)
            : undefined;
    if (fault) throw new SandboxError('env_error', fault);
    return out;
  }

  /** Stops the process and deletes its dir; returns the CPU seconds it used. */
  async shutdown(): Promise<number> {
    clearTimeout(this.idleTimer);
    this.unlisten();
    await this.proc.close();
    await rm(this.dir, { recursive: true, force: true });
    return this.proc.cpuSeconds();
  }
}

const describe = (g: SandboxGeneration) => JSON.stringify([g.info, g.tools(), g.systemPrompt()]);

type StartContext = {
  opts: SandboxOptions;
  limits: ResolvedLimits;
  isolation: SandboxIsolation;
  named: (k: keyof ResolvedLimits) => string;
};

/** The env's processes used `seconds` of CPU in all, its whole `cpuSeconds`. */
const cpuSpent = (seconds: number, named: StartContext['named']) =>
  new SandboxError(
    'timeout',
    `the env's processes used ${seconds.toFixed(1)} s of CPU in all: CPU time limit reached (${named('cpuSeconds')} s)`,
    'cpuSeconds',
  );

/** Why a caller's signal was aborted, for the reason. */
const cause = (signal: AbortSignal) => oneLine(String(signal.reason?.message ?? signal.reason ?? 'aborted'));

/** Bundles the module and starts one sandbox process; `spent` is what earlier processes used of the totals. */
async function startGeneration(
  ctx: StartContext,
  spent: { busyMs: number; cpuSeconds: number },
  /** Given the CPU a process used where its start failed (it never joins the env's processes). */
  charge: (cpuSeconds: number) => void,
): Promise<SandboxGeneration> {
  const { opts, limits, isolation, named } = ctx;
  if (spent.cpuSeconds >= limits.cpuSeconds) throw cpuSpent(spent.cpuSeconds, named);
  const uid = isolation.dedicatedUid ? allocateUid() : undefined;
  const { root, runDir } = await makeSandboxDir(uid);
  try {
    const bundle = path.join(runDir, 'env.mjs');
    try {
      await bundleEnvModule(
        opts.source !== undefined ? { source: opts.source } : { modulePath: opts.modulePath! },
        bundle,
        opts.signal,
      );
    } catch (err) {
      if (opts.signal?.aborted)
        throw new SandboxError('cancelled', `cancelled by the caller while compiling (${cause(opts.signal)})`);
      if (err instanceof BundleError) throw new SandboxError('compile', err.message);
      throw err;
    }
    await chmod(bundle, 0o444);
    // RLIMIT_CPU is per process: a successor gets what is left, so cpuSeconds bounds the env's whole
    // life; none is started once it is spent (a floor of 1 s let processes run on: rerun 42b).
    const cpuLeft = Math.ceil(limits.cpuSeconds - spent.cpuSeconds);
    const cgroup = isolation.cgroup.length
      ? await SandboxCgroup.create(await cgroupSupport(), {
          memoryBytes: cgroupMemoryBytes(limits),
          pids: limits.maxProcesses,
        }).catch((err: Error) => {
          throw new SandboxError('isolation', `could not make the sandbox's cgroup: ${err.message}`);
        })
      : undefined;
    const cmd = sandboxCommand(isolation.level, {
      runDir,
      entry: 'env.mjs',
      limits: { ...limits, cpuSeconds: cpuLeft },
      uid,
      prlimit: isolation.rlimits,
      fileCountLimit: isolation.fileCountLimit,
      closeFds: inheritableFds(),
      cgroupGate: cgroup !== undefined,
      pidsCgroup: cgroup?.has('pids'),
    });
    const child = execa(cmd.file, cmd.args, {
      cwd: runDir,
      env: {},
      extendEnv: false,
      uid: cmd.uid,
      gid: cmd.gid,
      stdin: 'pipe',
      stdout: 'pipe',
      stderr: 'pipe',
      buffer: false,
      reject: false,
      cleanup: true,
    });
    if (cgroup) {
      try {
        cgroup.join(child.pid!);
      } catch (err) {
        child.kill('SIGKILL');
        await child;
        await cgroup.remove();
        throw new SandboxError('isolation', `could not move the sandbox into its cgroup: ${(err as Error).message}`);
      }
      child.stdin!.write('\n'); // the command's gate: it runs on, inside
    }
    const proc = new SandboxProcess(child, limits, randomBytes(SESSION_KEY_BYTES), named, {
      spentMs: spent.busyMs,
      cpuLimit: cpuLeft,
      dataLimit: isolation.rlimits ? dataLimitBytes(limits) : 0,
      cgroup,
    });
    const onAbort = () => proc.cancel(`cancelled by the caller (${cause(opts.signal!)}); process killed`);
    if (opts.signal?.aborted) onAbort();
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    const unlisten = () => opts.signal?.removeEventListener('abort', onAbort);
    let described;
    try {
      described = await RemoteEnvironment.describe(
        { request: (m, p, b) => proc.request(m, p, b, { limit: 'startMs' }) },
        'sandbox',
      );
      // The fault quotes the module's schema: one line (rerun 52b: 53 KB over 3 000 lines).
      const bad = toolsFault(described.tools) ?? infoFault(described);
      if (bad) throw new SandboxError('env_error', oneLine(bad));
    } catch (err) {
      unlisten();
      await proc.close();
      charge(proc.cpuSeconds());
      throw err instanceof SandboxError ? err : new SandboxError('protocol', (err as Error).message);
    }
    return new SandboxGeneration(proc, described, root, unlisten);
  } catch (err) {
    await rm(root, { recursive: true, force: true });
    throw err;
  }
}

/** Tool names as OpenAI-compatible servers accept them (and as chat templates print them verbatim). */
const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;
/** Tools one env may offer (τ²'s domains have 4–16, ToolSandbox 24): a list of 16,000 stalled the worker (rerun 15). */
export const MAX_TOOLS = 256;

/**
 * Why an episode's own tools are refused: each must be one of the env's tools, parameters and all.
 * The policies (the trainer's, validation's) are shown the env's tools, and the worker checks calls
 * against the episode's: looser ones let wrongly typed calls through in training only (rerun 21).
 */
function looserTools(episode: readonly ToolSchema[], env: readonly ToolSchema[]): string | undefined {
  const shown = new Map(env.map((t) => [t.function.name, JSON.stringify(t.function.parameters)]));
  for (const t of episode)
    if (shown.get(t.function.name) !== JSON.stringify(t.function.parameters))
      return `tool ${t.function.name} is not one of the env's tools with the same parameters`;
  return undefined;
}

/**
 * Why a generated env's tool list is refused, if it is: a name a chat template would print
 * verbatim (a newline and template tokens, a right-to-left override, a homoglyph of another
 * tool's name, 5000 characters: red-team rerun 3) or the same name twice, which the policy could
 * not tell apart, or more than MAX_TOOLS tools; or parameters the worker cannot check calls
 * against (`callSchemaFault`). Linear: a quadratic duplicate search over 16,000
 * names stalled the worker's event loop for 2 s (rerun 15).
 */
export function toolsFault(tools: readonly ToolSchema[]): string | undefined {
  if (tools.length > MAX_TOOLS) return `${tools.length} tools; an env may offer at most ${MAX_TOOLS}`;
  const seen = new Set<string>();
  const together = { chars: 0, nodes: 0 };
  let described = 0;
  for (const { function: f } of tools) {
    if (!TOOL_NAME.test(f.name))
      return `tool name ${JSON.stringify(f.name.slice(0, 80))} is not 1–64 characters of A-Z, a-z, 0-9, _ and -`;
    if (seen.has(f.name)) return `two tools are named '${f.name}'`;
    seen.add(f.name);
    // The native format puts the description in the prompt, whose tokenizer raises on half a UTF-16 pair (rerun 46b).
    if (f.description !== undefined && /\p{Cs}/u.test(f.description))
      return `tool ${f.name}: its description holds a lone surrogate (half a UTF-16 pair), which the trainer's tokenizer cannot take`;
    const bad = callSchemaFault(f.parameters, `tool ${f.name}: parameters`, together);
    if (bad) return bad;
    // Both prompt formats render every description and parameters schema in every prompt (rerun 55b:
    // 3.5 MB of descriptions took the trainer 1.5 s per episode to tokenize; rerun 72j: 3.9 MB in
    // the parameters' own descriptions). The built-in targets come to 1–11 KB.
    described += Buffer.byteLength(f.description ?? '') + Buffer.byteLength(JSON.stringify(f.parameters) ?? '');
    if (described > MAX_OBSERVATION_BYTES)
      return `the tools' descriptions and parameters come to more than ${MAX_OBSERVATION_BYTES} bytes (at tool ${f.name}); the prompt renders them all`;
  }
  if (together.chars > MAX_ENV_LITERAL_CHARS)
    return `the tools' enum and const values and property names come to ${together.chars} bytes; at most ${MAX_ENV_LITERAL_CHARS} (the trainer's grammar compiles long ones slowly)`;
  const lengths = new Set<string>();
  for (const { function: f } of tools) lengthBounds(f.parameters, lengths);
  if (lengths.size > MAX_LENGTH_BOUNDS)
    return `the tools bound string lengths ${lengths.size} different ways; at most ${MAX_LENGTH_BOUNDS} (the trainer's grammar compiles each apart, ~0.7 s apiece)`;
  return undefined;
}

/**
 * An Environment running in isolated child processes; every failure is a SandboxError.
 *
 * A process serves at most `episodesPerProcess` episodes; the next reset goes to a fresh process
 * (started by that reset; the old one finishes its open episodes and is then closed), and so does
 * the next reset after a process was idle for `idleRetireMs`. Validation
 * and training run with the same limits, so no process in training lives longer, counted in
 * episodes, than the processes validation watched: a module that keeps count in memory or in scratch
 * files (a "sleeper" turning dishonest after validation) cannot count past what was validated.
 */
export class SandboxedEnvironment implements Environment {
  readonly info: EnvInfo;
  /** The process new episodes go to; started lazily, by the first reset that needs it. */
  private active?: Promise<SandboxGeneration>;
  private activeGen: SandboxGeneration;
  private readonly live = new Set<SandboxGeneration>();
  /** Busy time and CPU of the processes already closed (the limits are totals over all of them). */
  private readonly spent = { busyMs: 0, cpuSeconds: 0 };
  /**
   * The failure that ended a process other than by the env's own close, kept once the process is
   * gone: a module that died at the close of its process's last episode had the env carry on in a
   * fresh process, its failure and CPU forgotten (rerun 42b).
   */
  private fatal?: SandboxError;
  private closing?: Promise<void>;
  /** Sandbox processes started so far. */
  processesStarted = 1;
  /** What the first process described (info, tools, system prompt); every later one must match. */
  private readonly description: string;

  private constructor(
    first: SandboxGeneration,
    private readonly ctx: StartContext,
  ) {
    this.info = first.info;
    this.description = describe(first);
    this.activeGen = first;
    this.active = Promise.resolve(first);
    this.adopt(first);
    // The first process starts before any reset (to describe the env) and may wait long for one
    // (a trainer loading its model): idle time there must not age it either.
    this.idleRetire(first);
  }

  get isolation(): SandboxIsolation {
    return this.ctx.isolation;
  }

  /** @internal */
  static async start(opts: SandboxOptions): Promise<SandboxedEnvironment> {
    if ((opts.source === undefined) === (opts.modulePath === undefined)) {
      throw new Error('startSandboxedEnv: give exactly one of source or modulePath');
    }
    const where = opts.configPath ?? 'limits';
    const parsed = SandboxLimitsSchema.safeParse(opts.limits ?? {});
    if (!parsed.success) throw new Error(describeZodError(parsed.error, `startSandboxedEnv: ${where}`));
    const limits: ResolvedLimits = { ...DEFAULT_LIMITS, ...parsed.data };
    const named = (k: keyof ResolvedLimits) => `${where}.${k} = ${limits[k]}`;
    const isolation = opts.isolation ? await isolationIfAvailable(opts.isolation) : await sandboxIsolation();
    if (!isolation) throw new Error(`startSandboxedEnv: isolation '${opts.isolation}' does not work on this machine`);
    if (isWeak(isolation) && !opts.allowWeakIsolation) {
      throw new SandboxError(
        'isolation',
        `isolation level '${isolation.level}' lacks ${isolation.networkBlocked ? 'a file-system namespace' : 'network and file-system namespaces'}, so generated code could reach the host; install bubblewrap, or allow it explicitly (config synthesis.sandbox.allowWeakIsolation: true; option allowWeakIsolation)`,
      );
    }
    const ctx = { opts, limits, isolation, named };
    // A first process that fails to start fails the start: there is no env yet to charge its CPU to.
    return new SandboxedEnvironment(await startGeneration(ctx, { busyMs: 0, cpuSeconds: 0 }, () => {}), ctx);
  }

  tools(): ToolSchema[] {
    return this.activeGen.tools();
  }

  systemPrompt(): string {
    return this.activeGen.systemPrompt();
  }

  async listTasks(): Promise<TaskRef[]> {
    return this.ctx.opts.seedsOnly ? [] : (await this.current()).listTasks();
  }

  /** Fingerprint of each seed's first instance (its opening messages and inspection view), taken by the inspector. */
  private readonly instances = new Map<number, Promise<string>>();
  /** The process that takes each seed's first instance and serves no episode (`firstInstance`). */
  private inspector?: Promise<SandboxGeneration>;
  private inspectorGen?: SandboxGeneration;

  /**
   * Every reset of a seed re-checks that seed's instance against its first one, in whichever process
   * it ran, so a module whose instances drift after validation (on the n-th call, with the clock, per
   * process) is stopped wherever it runs — training and evaluation included.
   */
  async reset(req: ResetRequest, opts?: RequestOptions): Promise<Episode> {
    if (this.ctx.opts.seedsOnly && 'taskId' in req) {
      if (!req.taskId.startsWith(INSPECT_PREFIX))
        throw new SandboxError('env_error', `task '${req.taskId}': a generated env's episodes are reset by seed alone`);
      return this.inspection(req.taskId, opts);
    }
    return (await this.start(req, opts)).episode;
  }

  /**
   * A generated env's inspection is the one its seeded reset takes (that episode then closed): every
   * view of a seed the module gives follows a seeded reset of it and passes the seed's fingerprint.
   * A module showed gold without its words only to the inspections after seeded resets, which say
   * whether an episode speaks less than gold, and the real gold to validation's own (rerun 31).
   */
  private async inspection(taskId: string, opts?: RequestOptions): Promise<Episode> {
    const seed = Number(taskId.slice(INSPECT_PREFIX.length));
    if (!Number.isSafeInteger(seed))
      throw new SandboxError('env_error', `task '${taskId}': an inspection names a seed (${INSPECT_PREFIX}<seed>)`);
    const { episode, view } = await this.start({ seed }, opts);
    await episode.close();
    if (!view)
      throw new SandboxError(
        'env_error',
        `seed ${seed}: the module cannot be inspected (build it with defineEnvironment)`,
      );
    const content = JSON.stringify(view);
    const refused = () => Promise.reject(new SandboxError('env_error', `episode ${taskId} is an inspection`));
    return {
      id: taskId,
      taskId,
      initialMessages: () => [{ role: 'system', content }],
      step: refused,
      evaluate: refused,
      fork: refused,
      close: async () => {},
    };
  }

  private async start(
    req: ResetRequest,
    opts?: RequestOptions,
  ): Promise<{ episode: Episode; view: InstanceView | null }> {
    const gen = await this.taking(() => this.current());
    let ep: Episode | undefined;
    try {
      ep = await gen.reset(req, opts);
      // Every trajectory stores its task id (rerun 54b: 3 MB of one made 192 MB of calibration rollouts).
      const badTaskId = taskIdFault(ep.taskId);
      if (badTaskId)
        throw new SandboxError('env_error', `${'seed' in req ? `seed ${req.seed}` : 'reset'}: ${badTaskId}`);
      const badTools = ep.tools && (toolsFault(ep.tools()) ?? looserTools(ep.tools(), gen.tools()));
      if (badTools) throw new SandboxError('env_error', `episode tools: ${oneLine(badTools)}`);
      const opening = Buffer.byteLength(JSON.stringify(ep.initialMessages()));
      if (opening > MAX_OPENING_BYTES)
        throw new SandboxError('env_error', `the opening is ${opening} bytes; at most ${MAX_OPENING_BYTES}`);
      // A generated env's: a module served as it is may open as its target does (τ²'s agent greets
      // first); an inspection episode opens with the seed's view, for the worker alone.
      const badOpening = this.ctx.opts.seedsOnly && 'seed' in req ? openingFault(ep.initialMessages()) : undefined;
      if (badOpening && 'seed' in req) throw new SandboxError('env_error', `seed ${req.seed}: ${badOpening}`);
      let view: InstanceView | null = null;
      let anchor: GoldAnchor | undefined;
      if ('seed' in req) {
        const first = await this.firstInstance(req.seed, opts);
        let hash: string;
        ({ hash, view } = await instanceOf(gen, req.seed, ep));
        if (first !== hash) {
          throw new SandboxError(
            'nondeterministic',
            `seed ${req.seed} gave a different instance than on its first reset (fingerprint ${hash}, first ${first}); generate(seed) must depend on the seed alone`,
          );
        }
        anchor = goldAnchorOf(view);
      }
      return { episode: this.tracked(gen, ep, anchor), view };
    } catch (err) {
      await ep?.close().catch(() => {});
      this.release(gen);
      throw err;
    }
  }

  /**
   * The fingerprint of a seed's first instance, taken once by the inspector: a process that resets
   * each new seed, takes its view, closes it, and serves no episode. Every later reset of the seed,
   * in any process, must give the same, so the gold that holds training's episodes (`goldAnchor`) is
   * the one a process shows that has evaluated nothing, as in validation: a module showed a silent
   * gold once its process had evaluated an episode unlike gold (rerun 32).
   */
  private firstInstance(seed: number, opts?: RequestOptions): Promise<string> {
    let first = this.instances.get(seed);
    if (!first) {
      const taking = this.inspect(seed, opts);
      this.instances.set(seed, taking);
      // A failed or cancelled inspection leaves the seed to the next reset.
      taking.catch(() => this.instances.get(seed) === taking && this.instances.delete(seed));
      first = taking;
    }
    return first;
  }

  private async inspect(seed: number, opts?: RequestOptions): Promise<string> {
    const gen = await this.taking(() => {
      if (!this.inspector) {
        const starting = this.startProcess();
        this.inspector = starting;
        starting.then(
          (g) => (this.inspectorGen = g),
          () => this.inspector === starting && (this.inspector = undefined),
        );
      }
      return this.inspector;
    });
    let ep: Episode | undefined;
    try {
      ep = await gen.reset({ seed }, opts);
      return (await instanceOf(gen, seed, ep)).hash;
    } finally {
      await ep?.close().catch(() => {});
      this.release(gen);
    }
  }

  /** Starts the next episode in a fresh process (validation calls it between checks); no-op on an unused one. */
  recycle(): void {
    if (this.activeGen.started > 0) this.retire(this.activeGen);
  }

  /**
   * The process that begins the next episode, counted against its `episodesPerProcess`. Resets
   * made at once all wait for the same process: those past its last episode take its successor
   * (six at once all went to one process).
   */
  private async taking(next: () => Promise<SandboxGeneration>): Promise<SandboxGeneration> {
    let gen = await next();
    while (gen.retired) gen = await next();
    clearTimeout(gen.idleTimer);
    gen.openEpisodes++;
    if (++gen.started >= this.ctx.limits.episodesPerProcess) this.retire(gen);
    return gen;
  }

  /** The process new episodes go to; a fatal failure of any process fails the env, as one process would. */
  private current(): Promise<SandboxGeneration> {
    if (this.closing) return Promise.reject(new SandboxError('closed', 'the sandboxed environment was closed'));
    if (this.fatal) return Promise.reject(this.fatal);
    for (const g of this.live) {
      const dead = g.proc.dead;
      if (dead && dead.reason !== 'closed') return Promise.reject(dead);
    }
    this.active ??= this.successor();
    return this.active;
  }

  private retire(gen: SandboxGeneration) {
    if (gen.retired) return;
    gen.retired = true;
    // The successor starts with the reset that needs it, not now: a process started early would
    // sit idle (e.g. through a trainer's gradient step) and a module could tell its age from timers.
    if (this.activeGen === gen) this.active = undefined;
    if (this.inspectorGen === gen) this.inspector = this.inspectorGen = undefined;
    if (gen.openEpisodes === 0) void this.shutdown(gen);
  }

  private async successor(): Promise<SandboxGeneration> {
    const gen = await this.startProcess();
    this.activeGen = gen;
    return gen;
  }

  /** A fresh process of the module, which must describe the env as the first one did. */
  private async startProcess(): Promise<SandboxGeneration> {
    const busyMs = this.spent.busyMs + [...this.live].reduce((t, g) => t + g.proc.ownBusyMs, 0);
    const cpuSeconds = this.spent.cpuSeconds + [...this.live].reduce((t, g) => t + g.proc.cpuSeconds(), 0);
    if (this.fatal) throw this.fatal;
    // A start that fails fails the env, its CPU counted: a module failing only some starts (the
    // inspector's, retried at the next seed) spent CPU no total held (rerun 43b).
    const failed = (err: unknown) => {
      if (err instanceof SandboxError && err.reason !== 'closed') this.fatal ??= err;
      return err;
    };
    const gen = await startGeneration(this.ctx, { busyMs, cpuSeconds }, (s) => (this.spent.cpuSeconds += s)).catch(
      (err: unknown) => Promise.reject(failed(err)),
    );
    this.processesStarted++;
    if (this.closing || describe(gen) !== this.description) {
      const cpu = await gen.shutdown();
      this.spent.cpuSeconds += cpu;
      throw failed(
        this.closing
          ? new SandboxError('closed', 'the sandboxed environment was closed')
          : new SandboxError(
              'nondeterministic',
              'a fresh sandbox process of the module described a different environment (info, tools or system prompt) than the first one; they must not depend on chance',
            ),
      );
    }
    this.adopt(gen);
    return gen;
  }

  /** Counts `gen` among the live processes, whose CPU and busy time the env's totals hold together. */
  private adopt(gen: SandboxGeneration) {
    this.live.add(gen);
    gen.proc.onAnswered = () => this.checkTotals();
  }

  /**
   * The env's limits over all its processes, checked whenever one stops between requests: each
   * process is given what was left at its start, so two alive together (a retiring one and its
   * successor, the inspector) could each spend all of it (rerun 42b: 4.97 s of a 3 s cpuSeconds).
   */
  private checkTotals() {
    const live = [...this.live];
    const cpu = this.spent.cpuSeconds + live.reduce((t, g) => t + g.proc.cpuSeconds(), 0);
    const busy = this.spent.busyMs + live.reduce((t, g) => t + g.proc.ownBusyMs, 0);
    const { cpuSeconds, budgetMs } = this.ctx.limits;
    if (cpu > cpuSeconds) this.fatal ??= cpuSpent(cpu, this.ctx.named);
    else if (busy > budgetMs)
      this.fatal ??= new SandboxError(
        'timeout',
        `requests kept the env's processes busy for ${Math.round(busy)} ms in all, past its budget (${this.ctx.named('budgetMs')} ms)`,
        'budgetMs',
      );
    if (this.fatal) for (const g of live) g.proc.exceeded(this.fatal);
  }

  private release(gen: SandboxGeneration) {
    if (--gen.openEpisodes > 0) return;
    if (gen.retired) void this.shutdown(gen);
    else this.idleRetire(gen);
  }

  private idleRetire(gen: SandboxGeneration) {
    gen.idleTimer = setTimeout(() => gen.openEpisodes === 0 && this.retire(gen), this.ctx.limits.idleRetireMs).unref();
  }

  private async shutdown(gen: SandboxGeneration): Promise<void> {
    if (!this.live.delete(gen)) return;
    const dead = gen.proc.dead;
    if (dead && dead.reason !== 'closed') this.fatal ??= dead;
    this.spent.busyMs += gen.proc.ownBusyMs;
    // Counted as it leaves `live`, and the rest once it is gone, each added after its own read:
    // `spent += await …` read `spent` before the wait, and of shutdowns that overlapped only the
    // last one's CPU was kept (rerun 43b: 3.05 s counted of 9.17 s).
    const seen = gen.proc.cpuSeconds();
    this.spent.cpuSeconds += seen;
    const cpu = await gen.shutdown().catch(() => seen);
    this.spent.cpuSeconds += Math.max(0, cpu - seen);
  }

  /**
   * Wraps an episode of `gen` so that its close (and forks, which stay in its process) are counted,
   * and the env sees the agent's tool calls made the same whoever plays, and only those that fit its
   * tools (`AgentCalls`).
   */
  private tracked(
    gen: SandboxGeneration,
    ep: Episode,
    /** What the seed's gold solution holds the episode to (`goldAnchor`); none where the module showed no gold. */
    anchor: GoldAnchor | undefined,
    calls = new AgentCalls(ep.initialMessages(), ep.tools?.() ?? gen.tools()),
    /** The first call of the agent's that did not fit: it ended the episode (and its forks), which then scores 0. */
    refusedBefore?: string,
  ): Episode {
    let closed = false;
    let refused = refusedBefore;
    const out: Episode = {
      id: ep.id,
      taskId: ep.taskId,
      initialMessages: () => ep.initialMessages(),
      step: async (action, o) => {
        // The episode ended at the refusal: nothing more reaches the env (rerun 24).
        if (refused !== undefined) return AgentCalls.ended(action);
        if (action.type === 'tool_call') {
          const fault = calls.fault(action.call);
          if (fault) {
            refused ??= fault;
            return AgentCalls.refusal(action.call, fault);
          }
        }
        const r = await ep.step(calls.action(action), o);
        return { ...r, observation: calls.observation(r.observation) };
      },
      evaluate: async (messages, termination, o) => {
        // The env still evaluates what it saw (an episode left out told training apart, rerun 22).
        const info = await ep.evaluate(calls.messages(messages), termination, o);
        if (refused) return { reward: 0, components: {}, success: false, details: { refused } };
        // A generated env's episode that ended abnormally scores 0, as the SDK's own evaluate scores it:
        // each such ending after gold's calls was one validation never played (rerun 29 paid max_steps, max_errors).
        if (this.ctx.opts.seedsOnly && ABNORMAL.includes(termination))
          return { reward: 0, components: {}, success: false, details: { termination } };
        const held = this.ctx.opts.goldAnchor;
        // The agent's part alone: the opening is the module's (an instance's prefix may make gold's calls).
        const agent = messages.slice(ep.initialMessages().length);
        const miss = held && (anchor ? anchorMiss(anchor, agent, held.goldSpeech) : NO_GOLD);
        if (!held || !miss) return info;
        const cap = !anchor
          ? Math.min(held.callsCap, held.wordsCap)
          : held[miss.part === 'calls' ? 'callsCap' : 'wordsCap'];
        if (info.reward > cap)
          return {
            reward: cap,
            components: {},
            success: false,
            details: { goldAnchor: miss.what, moduleReward: info.reward },
          };
        return info;
      },
      fork: async () => {
        gen.openEpisodes++;
        // A fork stays in its process, which then takes no new reset past its last (rerun 72j: 1 reset
        // and 10 forks, then another reset, all in one process of episodesPerProcess 4).
        if (++gen.started >= this.ctx.limits.episodesPerProcess) this.retire(gen);
        try {
          return this.tracked(gen, await ep.fork(), anchor, calls.copy(), refused);
        } catch (err) {
          this.release(gen);
          throw err;
        }
      },
      close: async () => {
        if (closed) return;
        closed = true;
        try {
          await ep.close();
        } finally {
          this.release(gen);
        }
      },
    };
    if (ep.tools) out.tools = () => ep.tools!();
    return out;
  }

  /** The tail (4 KiB) of what the module logged (its newest process); console output goes here, never to the protocol. */
  logs(): string {
    return this.activeGen.proc.logs;
  }

  /** @internal The host dirs of the processes alive now (tests check that close removes them). */
  processDirs(): string[] {
    return [...this.live].map((g) => g.dir);
  }

  /** Stops every process and deletes their sandbox dirs; the env is unusable afterwards. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      await Promise.all([this.active?.catch(() => {}), this.inspector?.catch(() => {})]);
      await Promise.all([...this.live].map((g) => this.shutdown(g)));
    })();
    return this.closing;
  }
}

/** Where a seed's view holds no gold solution, an episode is held to the least of the caps. */
const NO_GOLD: AnchorMiss = { part: 'calls', what: 'its seed showed no gold solution' };

/** A seeded episode's fingerprint (its opening messages and its seed's inspection view) and the view. */
async function instanceOf(
  gen: SandboxGeneration,
  seed: number,
  ep: Episode,
): Promise<{ hash: string; view: InstanceView | null }> {
  // Modules not built with the SDK's defineEnvironment cannot be inspected; their opening messages still count.
  // The view is text inside an answer, which the answer's own scan does not read: 5 000 levels
  // overflowed the worker's stack at every seeded reset (rerun 49b).
  const check = (text: string) => {
    const fault = tooComplex(text, MAX_RESPONSE_DEPTH, MAX_RESPONSE_VALUES);
    if (fault) throw new SandboxError('env_error', `seed ${seed}: its instance view ${fault}`);
  };
  // A process that died meanwhile (closing the inspection timed out: rerun 55b) fails with its own
  // reason, not the inspection's plain error.
  const view = await inspectInstance(gen, seed, check).catch((err: unknown) =>
    err instanceof SandboxError ? Promise.reject(err) : gen.proc.dead ? Promise.reject(gen.proc.dead) : null,
  );
  const hash = createHash('sha256')
    .update(JSON.stringify([ep.initialMessages(), view]))
    .digest('hex')
    .slice(0, 16);
  return { hash, view };
}

/**
 * What is wrong with a generated env's answer to an action, if anything. Only the policy speaks as
 * the assistant: an observation in its role (or the system's) would put env-written text, even tool
 * calls, into the transcript as the policy's own turn, which the trainer then learns from
 * (conversation_ids masks every assistant turn in). A tool call is answered by its own tool message,
 * a message by the user.
 */
export function observationFault(action: AgentAction, obs: Message): string | undefined {
  const size = Buffer.byteLength(JSON.stringify(obs));
  if (size > MAX_OBSERVATION_BYTES)
    return `the observation is ${size} bytes; at most ${MAX_OBSERVATION_BYTES} (the policy reads it, the trainer stores it)`;
  if (action.type === 'tool_call') {
    if (obs.role !== 'tool')
      return `the observation of tool call ${action.call.id} has role '${obs.role}'; a tool call is answered by a 'tool' message`;
    if (obs.tool_call_id !== action.call.id)
      return `the observation answers tool call '${oneLine(obs.tool_call_id, 64)}', not the call made ('${action.call.id}')`;
  } else if (obs.role !== 'user')
    return `the observation of a message has role '${obs.role}'; a message is answered by the 'user'`;
  return undefined;
}

/**
 * What is wrong with what a module says of itself, if anything. Its name and system prompt go into
 * every trajectory the env produces (rerun 53b: a 1.9 M-character name made one validation's
 * calibration rollouts 122 MiB); the bounds are far above the built-in targets' (names under 40
 * characters, τ²'s policies 8 KB as the system prompt).
 */
export function infoFault({ info, systemPrompt }: InfoResponse): string | undefined {
  for (const key of ['name', 'capability', 'targetEnv'] as const) {
    const v = info[key];
    if (v !== undefined && v.length > MAX_INFO_NAME_CHARS)
      return `info.${key} is ${v.length} characters; at most ${MAX_INFO_NAME_CHARS}`;
    // Names go into reasons, reports and the generator's repair prompt (rerun 62b: a newline and ESC).
    if (v !== undefined && CONTROL.test(v)) return `info.${key} '${oneLine(v)}' holds a control character`;
  }
  for (const [key, v] of [
    ['info.description', info.description],
    ['systemPrompt', systemPrompt],
  ] as const) {
    const bytes = Buffer.byteLength(v);
    if (bytes > MAX_OBSERVATION_BYTES) return `${key} is ${bytes} bytes; at most ${MAX_OBSERVATION_BYTES}`;
  }
  return undefined;
}
/** What is wrong with an episode's task id, if anything: an identifier, one line, not prose. */
export function taskIdFault(taskId: string): string | undefined {
  if (taskId.length > MAX_TASK_ID_CHARS)
    return `the episode's taskId is ${taskId.length} characters; at most ${MAX_TASK_ID_CHARS}`;
  if (CONTROL.test(taskId)) return `the episode's taskId '${oneLine(taskId)}' holds a control character`;
  return undefined;
}
/** Control characters and line separators: none in an identifier. */
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/;
/** ToolSandbox's scenario names, the longest task ids of the built-in targets, are under 100. */
export const MAX_TASK_ID_CHARS = 256;

/** A name, capability or target env name: an identifier, not prose. */
export const MAX_INFO_NAME_CHARS = 128;

/**
 * What is wrong with a generated env's opening, if anything: it is the user's turn, then tool calls
 * with their results (an SDK instance's prefix; what validation plays). Chat templates render nothing else before the
 * policy's first turn: two user turns in a row made Mistral's raise in the trainer, where
 * validation's server took them (rerun 48b).
 */
export function openingFault(messages: readonly Message[]): string | undefined {
  if (messages[0]?.role !== 'user')
    return `the opening must begin with the user's turn, not '${messages[0]?.role ?? 'nothing'}'`;
  // The call of the last assistant message, until answered; one call a turn, each id once: two
  // calls in a turn, or one id twice, made Llama's and Mistral's templates raise (rerun 49b).
  let open: string | undefined;
  const ids = new Set<string>();
  for (const [i, m] of messages.entries()) {
    if (i === 0) continue;
    const call = m.role === 'assistant' && m.tool_calls?.length === 1 ? m.tool_calls[0] : undefined;
    const bad = call && openingCallFault(call.function.arguments);
    if (bad) return `opening message ${i}: the arguments of tool call ${call.id.slice(0, 64)}: ${bad}`;
    const id = call?.id;
    if (id !== undefined && open === undefined && !ids.has(id)) ids.add((open = id));
    else if (m.role === 'tool' && open !== undefined && m.tool_call_id === open) open = undefined;
    else
      return `opening message ${i} (${m.role}) is not one tool call after the last one's result, nor its result: an opening is the user's turn, then tool calls (one a turn, each id once) and their results`;
  }
  return open === undefined ? undefined : `the opening ends before the result of its tool call ${open.slice(0, 64)}`;
}

/**
 * Why an opening tool call's arguments are refused, if they are: the trainer renders them parsed
 * (a JSON object) and Python's `json` raised on 1 000 levels and on an integer of 4 301 digits,
 * so training stopped at the prompt (rerun 50b).
 */
function openingCallFault(args: string): string | undefined {
  const complex = tooComplex(args, MAX_RESPONSE_DEPTH, MAX_RESPONSE_VALUES);
  if (complex) return complex;
  // Counted in one pass: the regex /\d{1000}/ retried from each digit, 77-142 ms on a 62 KB opening of
  // 999-digit runs, at every seeded reset (rerun 72k).
  for (let i = 0, run = 0; i < args.length; i++) {
    const c = args.charCodeAt(i);
    run = c >= 0x30 && c <= 0x39 ? run + 1 : 0;
    if (run >= 1000) return 'a number of 1 000 digits or more';
  }
  try {
    const parsed: unknown = JSON.parse(args);
    return parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed) ? undefined : 'not a JSON object';
  } catch {
    return 'not JSON';
  }
}

/**
 * Rewards of a generated env lie in [0, 1], as the checks' thresholds (gold ≥ minGoldReward,
 * trivial ≤ maxTrivialReward, the calibration band) and success (≥ 0.99) assume: a verifier scoring
 * rare successes 10 and the rest 0 would otherwise put a policy that almost never succeeds in the band.
 */
export function rewardFault(r: RewardInfo): string | undefined {
  if (!(r.reward >= 0 && r.reward <= 1)) return `evaluate returned reward ${r.reward}, outside [0, 1]`;
  // All of it (components too: rerun 18 padded those once details were capped).
  const size = Buffer.byteLength(JSON.stringify(r));
  return size > MAX_REWARD_INFO_BYTES
    ? `evaluate returned ${size} bytes (components, details); at most ${MAX_REWARD_INFO_BYTES} (they are stored with every trajectory)`
    : undefined;
}

/**
 * What one answer of a generated env may hold where the trainer stores it with every trajectory:
 * 4 MiB responses (`outputBytes`) padded only in training wrote 792 MB of trajectories per
 * iteration (rerun 17). 64 KiB of observation is already ~16k tokens, past any context the
 * trainer samples in.
 */
export const MAX_OBSERVATION_BYTES = 64 * 1024;
export const MAX_REWARD_INFO_BYTES = 64 * 1024;
/** An episode's opening (its initial messages), stored with every trajectory too. */
export const MAX_OPENING_BYTES = 64 * 1024;

/**
 * Bundles a generated env module (resolving `#env-sdk`) and runs it in an isolated child process
 * that speaks the env protocol over stdio. See envs/sandbox/README.md for what is enforced.
 */
export function startSandboxedEnv(opts: SandboxOptions): Promise<SandboxedEnvironment> {
  return SandboxedEnvironment.start(opts);
}
