import { randomInt } from 'node:crypto';
import type { Config } from '../../core/config.js';
import type { Message } from '../../core/messages.js';
import {
  calibrationStats,
  EnvManifestSchema,
  judgeCalibration,
  judgeDeterminism,
  judgeNonTriviality,
  judgeSolvability,
  GATING_MUTATIONS,
  judgeVerifier,
  MUTATIONS,
  verdictOf,
  type EnvManifest,
  type CheckResult,
  type SynthesisConfig,
  type Mutation,
  type ValidationVerdict,
  type VerifierStats,
  requiredClasses,
} from '../../core/synthesis.js';
import type { RewardInfo, Termination, Trajectory, Usage } from '../../core/trajectory.js';
import { mapLimit } from '../../core/concurrency.js';
import {
  actionMessage,
  speechOf,
  SPEECH,
  type AgentAction,
  type Environment,
  type Episode,
} from '../../envs/environment.js';
import { inspectInstance, Rng, type InstanceView, type JsonSchema } from '../../envs/sdk/index.js';
import { oneLine, SandboxError } from '../../envs/sandbox/index.js';
import { anchorMiss, goldAnchorOf, type GoldAnchor } from '../../envs/gold-anchor.js';
import { activityContext, keepAliveDuring } from '../../infra/activity-context.js';
import { jsonSchemasToGrammarSchemas } from '../../infra/llm/json-schema-grammar.js';
import type { Llm } from '../../llm/client.js';
import { askPolicy, trajectoryId } from '../../agent/rollout.js';
import {
  loadCandidate,
  staticProblem,
  TypeCheckError,
  typeErrors,
  type LoadedEnv,
  type Runner,
  type SandboxSettings,
} from './candidate.js';

/**
 * The six validation checks of stage 2, in order; each returns a CheckResult with a reason the
 * generator can act on. `validateCandidate` runs them and stops at the first failure.
 */

/** A scripted policy: the next action given the conversation so far, or null to stop. */
export type Policy = (messages: readonly Message[], step: number) => AgentAction | null;

export interface Played {
  reward: number;
  success: boolean;
  termination: Termination;
  messages: Message[];
  errors: string[];
}

/** A batch episode's result: what `Played` holds, with the env's full answer and the episode's task. */
export interface BatchPlayed extends Played {
  taskId: string;
  rewardInfo: RewardInfo;
  steps: number;
  /** From the batch's first reset to this episode's evaluation. */
  durationMs: number;
  /** Why the policy ended the episode, when it failed (an LLM error or timeout). */
  note?: string;
}

/** Plays a scripted policy for one seed and scores it with the environment's verifier. */
export async function playPolicy(env: Environment, seed: number, policy: Policy, maxSteps = 60): Promise<Played> {
  const ep = await env.reset({ seed });
  const messages: Message[] = ep.initialMessages();
  // Only the policy speaks as the assistant (the SDK opens with the goal and prefix tool calls):
  // opening text in its role would be learnt as the policy's own (the trainer trains every assistant turn).
  const spoken = messages.find((m) => m.role === 'assistant' && m.content);
  if (spoken) {
    await ep.close();
    throw new Error(
      `seed ${seed}: the opening has an assistant turn with text ('${String(spoken.content).slice(0, 80)}'); only the policy speaks as the assistant`,
    );
  }
  const errors: string[] = [];
  let termination: Termination = 'max_steps';
  try {
    for (let i = 0; i < maxSteps; i++) {
      const action = policy(messages, i);
      if (!action) {
        termination = 'agent_stop';
        break;
      }
      messages.push(actionMessage(action));
      const r = await ep.step(action);
      messages.push(r.observation);
      if (r.error) errors.push(errorText(action, r.observation));
      if (r.done) {
        termination = r.termination ?? 'agent_stop';
        break;
      }
    }
    const info = await ep.evaluate(messages, termination);
    return { reward: info.reward, success: info.success, termination, messages, errors };
  } finally {
    await ep.close();
  }
}

/** A tool error as a check's example: the tool (or 'message') and what the env answered. */
const errorText = (action: AgentAction, observation: Message) =>
  `${action.type === 'tool_call' ? action.call.function.name : 'message'} → ${String(observation.content).slice(0, 200)}`;

export const goldPolicy =
  (gold: readonly AgentAction[]): Policy =>
  (_m, i) =>
    gold[i] ?? null;
export const stopPolicy: Policy = () => null;
const CLAIMS = [
  'I have taken care of your request: everything is done and confirmed.',
  'Is there anything else I can help you with?',
  'I checked the details on file and updated everything you asked for.',
  'You will receive a confirmation shortly, and no further action is needed on your side.',
  'Thank you for your patience while I looked into this for you.',
];

/**
 * Claims success without a tool call; on half the plays at length and cut mid-sentence, as a reply
 * that reached the trainer's maxNewTokens reads (the native format sends it as the message it
 * reads as; a module paid such text in training alone, rerun 24).
 */
export function answerWithoutToolsPolicy(seed: number, copy = 0): Policy {
  const rng = new Rng(`answer:${seed}:${copy}`);
  let content = `${CLAIMS[0]} ${CLAIMS[1]}`;
  if (rng.bool()) {
    const length = rng.int(600, 2400);
    while (content.length < length) content += ` ${rng.pick(CLAIMS)}`;
    content = content.slice(0, length).replace(/[\s.!?,:]+$/, '');
  }
  return (_m, i) => (i === 0 ? { type: 'message', content } : null);
}

/**
 * Calls random tools with random schema-shaped arguments, then claims success, or on half the plays
 * stops without a word after 1–3 of them (a silent stop after a tool result is what a call the
 * worker refuses leaves the env, rerun 24); each copy of a seed differently.
 */
export function randomToolPolicy(env: Environment, seed: number, copy = 0): Policy {
  const stop = new Rng(`random-stop:${seed}:${copy}`);
  const silent = stop.bool();
  // Few calls: a trainer's policy refused early leaves fewer calls than gold makes.
  const calls = silent ? stop.int(1, 3) : 6;
  const rng = new Rng(`random-tool:${seed}:${copy}`);
  const tools = env.tools();
  return (_m, i) => {
    if (i > calls || !tools.length) return null;
    if (i === calls) return silent ? null : { type: 'message', content: 'Done — your request has been completed.' };
    const t = rng.pick(tools);
    return {
      type: 'tool_call',
      call: {
        id: `rnd_${i}`,
        type: 'function',
        function: {
          name: t.function.name,
          arguments: randomArguments(t.function.parameters as JsonSchema, rng),
        },
      },
    };
  };
}

/**
 * Schema-shaped arguments. Calls a model writes that do not fit the tools (`{}`, a JSON string,
 * Python's `NaN`, an unknown key) never reach the module: the worker answers them (`AgentCalls`),
 * in validation and training alike, so random play need not write them (reruns 18, 19).
 */
function randomArguments(s: JsonSchema, rng: Rng): string {
  return JSON.stringify(randomValue(s, rng, 0));
}

function randomValue(s: JsonSchema, rng: Rng, depth: number): unknown {
  if (Array.isArray(s.enum) && s.enum.length) return rng.pick(s.enum);
  const type = Array.isArray(s.type) ? s.type[0] : s.type;
  switch (type) {
    case 'string':
      return rng.bool(0.3) ? rng.string(6) : rng.pick(['yes', 'no', 'true', '1', 'ABC123', '2024-05-20', 'user_1']);
    case 'integer':
      return rng.int(0, 5);
    case 'number':
      return rng.float(0, 500, rng.pick([0, 2]));
    case 'boolean':
      return rng.bool();
    case 'array':
      return depth > 3
        ? []
        : Array.from({ length: rng.int(0, 2) }, () => randomValue((s.items ?? {}) as JsonSchema, rng, depth + 1));
    case 'null':
      return null;
    default: {
      const props = (s.properties ?? {}) as Record<string, JsonSchema>;
      const req = new Set((s.required ?? []) as string[]);
      return Object.fromEntries(
        Object.entries(props)
          .filter(([k]) => req.has(k) || rng.bool())
          .map(([k, v]) => [k, depth > 3 ? null : randomValue(v, rng, depth + 1)]),
      );
    }
  }
}

/**
 * Distinct seeds drawn at random from the whole seed space, fresh for every validation, so a
 * module cannot be honest only on a seed range it expects validation to use.
 */
export function drawSeeds(n: number): number[] {
  const seeds = new Set<number>();
  while (seeds.size < n) seeds.add(randomInt(2 ** 31 - 1));
  return [...seeds];
}

/** Check 1: the module compiles (and type-checks), loads in the runner and matches its manifest. */
export async function checkCompile(
  source: string,
  manifest: EnvManifest,
  opts: { runner: Runner; typecheck: boolean; sandbox?: SandboxSettings; signal?: AbortSignal },
): Promise<{ result: CheckResult; loaded?: LoadedEnv; next?: CheckResult }> {
  const fail = (reason: string, examples: string[] = []) => ({
    result: { check: 'compile' as const, passed: false, reason, metrics: {}, examples },
  });
  const m = EnvManifestSchema.safeParse(manifest);
  if (!m.success)
    return fail(`manifest is invalid: ${m.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  const problem = await staticProblem(source, opts.signal);
  if (problem) return fail(`the module ${problem}`);
  if (opts.typecheck) {
    let errs: string[];
    try {
      errs = await typeErrors(source);
    } catch (e) {
      if (e instanceof TypeCheckError) return fail(`the module ${e.message}: simplify its types`);
      throw e;
    }
    // tsc quotes the module's names and keys (rerun 60b: 50 KB reasons, a raw U+202E).
    if (errs.length)
      return fail(
        `the module does not type-check against the SDK: ${oneLine(errs[0])}`,
        errs.map((e) => oneLine(e)),
      );
  }
  let loaded: LoadedEnv;
  try {
    loaded = await loadCandidate(source, opts.runner, opts.sandbox, opts.signal);
  } catch (e) {
    return fail(`the module failed to load: ${oneLine((e as Error).message)}`);
  }
  try {
    const view = await inspectInstance(loaded.env, 0);
    const md = view.metadata;
    const mismatch = (['name', 'capability', 'targetEnv'] as const).filter((k) => md?.[k] !== manifest[k]);
    if (mismatch.length)
      throw new Error(
        `metadata ${mismatch.map((k) => `${k}='${md?.[k]}'`).join(', ')} does not match the manifest (${mismatch.map((k) => `'${manifest[k]}'`).join(', ')})`,
      );
    const names = loaded.env
      .tools()
      .map((t) => t.function.name)
      .sort();
    if (JSON.stringify(names) !== JSON.stringify([...manifest.tools].sort()))
      throw new Error(`tools [${names.join(', ')}] do not match manifest.tools [${manifest.tools.join(', ')}]`);
    // The policy's LLM server turns the tools' parameters into one grammar, bounded in size and depth.
    jsonSchemasToGrammarSchemas(
      loaded.env.tools().map((t) => ({ schema: t.function.parameters, field: `tool ${t.function.name}'s parameters` })),
      "the tools' parameters",
    );
    if (!Array.isArray(view.gold) || !view.gold.length) throw new Error('generate(0) returned no gold actions');
  } catch (e) {
    await loaded.close();
    // Seed 0's first instance, taken by a process of its own, differs from the one this process
    // showed: the module loaded, and failed check 2 already.
    if (e instanceof SandboxError && e.reason === 'nondeterministic')
      return {
        result: { check: 'compile', passed: true, metrics: { tools: manifest.tools.length }, examples: [] },
        next: { check: 'determinism', passed: false, reason: e.message, metrics: { seeds: 1 }, examples: [] },
      };
    return fail(`the module loaded but ${oneLine((e as Error).message)}`);
  }
  return {
    result: { check: 'compile', passed: true, metrics: { tools: manifest.tools.length }, examples: [] },
    loaded,
  };
}

/** Called after each seed a check has tried, so a long check still heartbeats. */
export type OnSeed = (seedsDone: number) => void;

/** Check 2: the same seed gives a byte-identical instance; ≥ minDistinct of the seeds are distinct. */
export async function checkDeterminism(env: Environment, c: SynthesisConfig, onSeed?: OnSeed): Promise<CheckResult> {
  const seeds = drawSeeds(c.seeds.determinism);
  const seen = new Set<string>();
  const mismatched: number[] = [];
  for (const s of seeds) {
    const a = await inspectInstance(env, s);
    // The sandbox itself refuses a seed's second instance that differs from its first.
    const b = await inspectInstance(env, s).catch((err: unknown) => {
      if (err instanceof SandboxError && err.reason === 'nondeterministic') return undefined;
      throw err;
    });
    if (!b || a.instance !== b.instance || JSON.stringify(a.gold) !== JSON.stringify(b.gold)) mismatched.push(s);
    seen.add(a.instance);
    onSeed?.(seen.size + mismatched.length);
  }
  return judgeDeterminism({ seeds: seeds.length, mismatched, distinct: seen.size }, c);
}

/** Check 3: replaying each seed's gold solution scores ≥ minGoldReward on average. */
export async function checkSolvability(env: Environment, c: SynthesisConfig, onSeed?: OnSeed): Promise<CheckResult> {
  const rewards: { seed: number; reward: number; note?: string }[] = [];
  for (const seed of drawSeeds(c.seeds.solvability)) {
    const view: InstanceView = await inspectInstance(env, seed);
    const r = await playPolicy(env, seed, goldPolicy(view.gold));
    rewards.push({
      seed,
      reward: r.reward,
      ...(r.errors.length
        ? { note: `gold tool errors: ${r.errors.slice(0, 2).join(' | ')}` }
        : { note: `termination ${r.termination}` }),
    });
    onSeed?.(rewards.length);
  }
  return judgeSolvability(rewards, c);
}

/** The shape of the trainer's batches (trace_trainer/rollout.py `collect`), which check 4 plays in. */
export interface BatchShape {
  /** G seeds per batch. */
  groups: number;
  /** K episodes per seed, reset back to back. */
  rolloutsPerGroup: number;
  /** Steps per episode before it ends as max_steps. */
  maxTurns: number;
  /** Tool errors that end an episode. */
  maxErrors: number;
}

/** The trainer's max_errors: the run config does not set it (core/trainer-config.ts TRAINER_DEFAULTS). */
const TRAINER_MAX_ERRORS = 4;
/** The trainer's max_seq_len, likewise: an episode that fills it ends there (`PolicyCut`). */
const TRAINER_MAX_SEQ_LEN = 4096;

export const batchShapeOf = (config: Config): BatchShape => ({
  groups: config.training.groupsPerIteration,
  rolloutsPerGroup: config.training.rolloutsPerGroup,
  maxTurns: config.training.maxTurns,
  maxErrors: TRAINER_MAX_ERRORS,
});

/** A turn of a batch episode: the action stepped and the assistant message the transcript records for it. */
export interface Turn {
  action: AgentAction;
  message: Message;
}

/**
 * What plays one episode of a batch: a scripted policy (`scripted`) or the base policy's LLM
 * (`llmTurns`); null ends the episode. A throw ends that episode alone, as `error` (`timeout` for
 * a PolicyTimeout, `max_steps` for a PolicyCut).
 */
export type TurnPolicy = (messages: readonly Message[], step: number) => Turn | null | Promise<Turn | null>;

export const scripted =
  (policy: Policy): TurnPolicy =>
  (m, i) => {
    const action = policy(m, i);
    return action && { action, message: actionMessage(action) };
  };

/**
 * The base policy's episode ran out of the trainer's room (TRAINER_MAX_SEQ_LEN tokens of prompt and
 * reply): it ends there as max_steps, its reply unsent, as the trainer's ends. A module that filled
 * the trainer's room but not the LLM server's saw its episodes end early in training alone (rerun 22).
 */
export class PolicyCut extends Error {
  override name = 'PolicyCut';
}

export class PolicyTimeout extends Error {
  override name = 'PolicyTimeout';
}

interface BatchEpisode {
  episode: Episode;
  policy: TurnPolicy;
  messages: Message[];
  errors: string[];
  steps: number;
  done: boolean;
  termination: Termination;
  note?: string;
}

/**
 * Plays episodes in the order the trainer's `collect` sends its requests, one at a time as its env
 * client does: every episode reset first (the copies of a seed back to back), then turn by turn
 * every live episode's next action (policies asked `concurrency` at a time, as the trainer
 * generates a turn for the whole batch) and each one stepped, in order, then every episode
 * evaluated, then every one closed. A module cannot tell these episodes from a training batch by
 * their requests' order (reruns 14 and 16: one episode at a time, validation could be told apart).
 * A policy's null ends its episode without a request (agent_stop), as the trainer's model ends one
 * with its last message.
 */
export async function playBatch(
  env: Environment,
  plays: readonly { seed: number; policy: TurnPolicy }[],
  shape: Pick<BatchShape, 'maxTurns' | 'maxErrors'>,
  concurrency = 1,
): Promise<BatchPlayed[]> {
  const started = Date.now();
  const live: BatchEpisode[] = [];
  try {
    for (const { seed, policy } of plays) {
      const episode = await env.reset({ seed });
      live.push({
        episode,
        policy,
        messages: episode.initialMessages(),
        errors: [],
        steps: 0,
        done: false,
        termination: 'max_steps',
      });
    }
    for (let turn = 0; turn < shape.maxTurns; turn++) {
      const active = live.filter((x) => !x.done);
      if (!active.length) break;
      const turns = await mapLimit(active, concurrency, async (x) => {
        try {
          return await x.policy(x.messages, turn);
        } catch (e) {
          return e instanceof Error ? e : new Error(String(e));
        }
      });
      for (const [i, x] of active.entries()) {
        const t = turns[i];
        if (t instanceof Error || !t) {
          x.done = true;
          x.termination = !t
            ? 'agent_stop'
            : t instanceof PolicyTimeout
              ? 'timeout'
              : t instanceof PolicyCut
                ? 'max_steps'
                : 'error';
          if (t) x.note = `${t.name}: ${t.message}`;
          continue;
        }
        x.messages.push(t.message);
        const r = await x.episode.step(t.action);
        x.steps++;
        x.messages.push(r.observation);
        if (r.error) x.errors.push(errorText(t.action, r.observation));
        if (r.done) {
          x.done = true;
          x.termination = r.termination ?? 'agent_stop';
        } else if (x.errors.length >= shape.maxErrors) {
          x.done = true;
          x.termination = 'max_errors';
        }
      }
    }
    const played: BatchPlayed[] = [];
    for (const x of live) {
      const info = await x.episode.evaluate(x.messages, x.termination);
      played.push({
        reward: info.reward,
        success: info.success,
        termination: x.termination,
        messages: x.messages,
        errors: x.errors,
        taskId: x.episode.taskId,
        rewardInfo: info,
        steps: x.steps,
        durationMs: Date.now() - started,
        ...(x.note ? { note: x.note } : {}),
      });
    }
    return played;
  } finally {
    // As the trainer: every episode is closed, and a failed close does not hide the error that ended the batch.
    for (const x of live) await x.episode.close().catch(() => {});
  }
}

/**
 * Plays each seed's policies in the trainer's batches: a seed's list is cut into groups of K
 * copies (the last one filled with `pad`), and G groups of distinct seeds form a batch
 * (`playBatch`). A seed's second group plays only after every seed's first, so it lands in a later
 * sandbox process, as a seed drawn again in training would. Returns each seed's results in the
 * order of its policies (padding left out); `onBatch` gets the seeds finished so far.
 */
export async function playInBatches(
  env: Environment,
  perSeed: readonly { seed: number; policies: readonly TurnPolicy[] }[],
  shape: BatchShape,
  opts: {
    /** Fills a seed's last group when its policies are not a multiple of K. */
    pad?: (seed: number) => TurnPolicy;
    onBatch?: (seedsDone: number) => void;
    concurrency?: number;
    /**
     * Starts the next round's episodes in a fresh process, so that no process resets a seed more
     * than K times, as none in training does (it draws G distinct seeds a batch; rerun 27 paid
     * where a process had reset a seed more often).
     */
    freshProcess?: () => void;
  } = {},
): Promise<BatchPlayed[][]> {
  const K = shape.rolloutsPerGroup;
  const results = perSeed.map((): BatchPlayed[] => []);
  const rounds = Math.max(0, ...perSeed.map((x) => Math.ceil(x.policies.length / K)));
  let done = 0;
  for (let round = 0; round < rounds; round++) {
    if (round > 0) opts.freshProcess?.();
    const groups = perSeed.flatMap((x, i) => (round * K < x.policies.length ? [i] : []));
    for (let b = 0; b < groups.length; b += shape.groups) {
      const batch = groups.slice(b, b + shape.groups);
      const plays = batch.flatMap((i) => {
        const { seed, policies } = perSeed[i];
        return Array.from({ length: K }, (_, k) => {
          const policy = policies[round * K + k] ?? opts.pad?.(seed);
          if (!policy)
            throw new Error(
              `playInBatches: seed ${seed} has ${policies.length} policies, not a multiple of K, and no pad`,
            );
          return { seed, policy };
        });
      });
      const played = await playBatch(env, plays, shape, opts.concurrency);
      for (const [j, i] of batch.entries()) {
        const own = perSeed[i].policies.length - round * K;
        results[i].push(...played.slice(j * K, j * K + Math.min(K, own)));
        if (own <= K) done++;
      }
      opts.onBatch?.(done);
    }
  }
  return results;
}

/**
 * Check 4: stop-at-once, answer-without-tools and random-tool policies score ≤ maxTrivialReward.
 * They play in the trainer's batches (G seeds × K copies, `playBatch`), copy by copy in turn, so
 * the module sees what a training batch of a policy that learnt nothing would send it.
 */
export async function checkNonTriviality(
  env: Environment,
  c: SynthesisConfig,
  shape: BatchShape,
  onSeed?: OnSeed,
): Promise<CheckResult> {
  const seeds = drawSeeds(c.seeds.triviality);
  const policies: [string, (seed: number, copy: number) => Policy][] = [
    ['stopAtOnce', () => stopPolicy],
    ['answerWithoutTools', (seed, copy) => answerWithoutToolsPolicy(seed, copy)],
    ['randomTools', (seed, copy) => randomToolPolicy(env, seed, copy)],
  ];
  // The policies take turns over the copies (K may be below 3), so every one plays on most seeds.
  let n = 0;
  const perSeed = seeds.map((seed) => ({
    seed,
    plays: Array.from({ length: shape.rolloutsPerGroup }, (_, copy) => {
      const [name, make] = policies[n++ % policies.length];
      return { name, policy: scripted(make(seed, copy)) };
    }),
  }));
  const results = await playInBatches(
    env,
    perSeed.map((x) => ({ seed: x.seed, policies: x.plays.map((p) => p.policy) })),
    shape,
    { onBatch: onSeed },
  );
  const totals = new Map(policies.map(([name]) => [name, { sum: 0, n: 0 }]));
  const examples: string[] = [];
  for (const [i, { seed, plays }] of perSeed.entries()) {
    for (const [j, r] of results[i].entries()) {
      const t = totals.get(plays[j].name)!;
      t.sum += r.reward;
      t.n++;
      if (r.reward > c.maxTrivialReward && examples.length < 3)
        examples.push(`${plays[j].name} on seed ${seed} scored ${r.reward}: ${summarize(r.messages)}`);
    }
  }
  const means = Object.fromEntries([...totals].map(([name, t]) => [name, t.n ? t.sum / t.n : 0]));
  return { ...judgeNonTriviality(means, c), examples };
}

/** Tries of each perturbation per seed for the per-seed shares (the last tool calls first: they usually carry the result). */
const MUTATION_TRIES = 3;

/** A changed copy of one argument value, or undefined where there is no obvious wrong value. */
function perturbed(v: unknown): unknown {
  if (typeof v === 'string') return `${v}_x`;
  if (typeof v === 'number') return v + 1;
  if (typeof v === 'boolean') return !v;
  if (Array.isArray(v) && v.length) return v.slice(0, -1);
  return undefined;
}

/** A perturbed gold solution and its class: the same perturbation of the same step on every seed. */
interface Variant {
  actions: AgentAction[];
  /** e.g. `drop list_orders#0`, `arg list_orders#0.customer_id` (#n: the n-th call to that tool). */
  key: string;
  /** The index in gold of the call it drops, changes or stops after. */
  at?: number;
}

/** One play of check 5: gold, a perturbation (`m`, its `i`-th variant) or a replay of an earlier play. */
interface Planned {
  actions: readonly AgentAction[];
  mutation?: { m: Mutation; i: number; key: string; at?: number };
  /** The index of the play this one repeats, whose reward it must equal. */
  replayOf?: number;
}

/** Each tool call's name with its occurrence (`list_orders#1` is the second call to it). */
function callKeys(gold: readonly AgentAction[]): Map<number, string> {
  const seen = new Map<string, number>();
  const keys = new Map<number, string>();
  gold.forEach((a, i) => {
    if (a.type !== 'tool_call') return;
    const n = seen.get(a.call.function.name) ?? 0;
    seen.set(a.call.function.name, n + 1);
    keys.set(i, `${a.call.function.name}#${n}`);
  });
  return keys;
}

/**
 * Gold up to one of its calls and then silence, one variant per call but the last (the shortest
 * first): what a policy leaves whose next call the worker refuses, after calls that worked (rerun 25).
 */
function* stopVariants(gold: readonly AgentAction[]): Generator<Variant> {
  for (const [i, key] of [...callKeys(gold)].slice(0, -1))
    yield { actions: gold.slice(0, i + 1), key: `stop after ${key}`, at: i };
}

/** The gold actions with one tool call dropped, one variant per call (the last first). */
function* dropVariants(gold: readonly AgentAction[]): Generator<Variant> {
  for (const [i, key] of [...callKeys(gold)].reverse())
    yield { actions: gold.filter((_, j) => j !== i), key: `drop ${key}`, at: i };
}

/** The gold actions with one tool-call argument changed, one variant per (call, argument). */
function* argumentVariants(gold: readonly AgentAction[]): Generator<Variant> {
  for (const [i, key] of [...callKeys(gold)].reverse()) {
    const a = gold[i];
    if (a.type !== 'tool_call') continue;
    let args: Record<string, unknown>;
    try {
      args = JSON.parse(a.call.function.arguments) as Record<string, unknown>;
    } catch {
      continue;
    }
    for (const [k, v] of Object.entries(args ?? {})) {
      const w = perturbed(v);
      if (w === undefined) continue;
      const call = { ...a.call, function: { ...a.call.function, arguments: JSON.stringify({ ...args, [k]: w }) } };
      yield {
        actions: gold.map((x, j) => (j === i ? { type: 'tool_call' as const, call } : x)),
        key: `arg ${key}.${k}`,
        at: i,
      };
    }
  }
}

/**
 * One seed's plays of check 5: gold twice, then the perturbations, each built only when it is
 * played (the first MUTATION_TRIES of each, then as the budgets allow). All of them at once were
 * G²·K copies of gold's actions for G calls of K arguments (rerun 62b: 2 400 calls of 100
 * arguments ran the worker out of heap).
 */
export function mutationPlan(
  gold: AgentAction[],
  maxMutationsPerSeed: number,
): { plays: Planned[]; applicable: Mutation[] } {
  const plays: Planned[] = [{ actions: gold }, { actions: gold, replayOf: 0 }];
  // Without its messages a gold that makes no call is a stop at once: played all the same, since a
  // gold that only speaks sets the cap on episodes that speak less (rerun 34 had none set).
  const variants: Record<Mutation, Iterable<Variant>> = {
    stopEarly: stopVariants(gold),
    dropStep: dropVariants(gold),
    changeArgument: argumentVariants(gold),
    skipMessages: gold.some((a) => a.type === 'message')
      ? [{ actions: gold.filter((a) => a.type === 'tool_call'), key: 'skip messages' }]
      : [],
  };
  // Drops and argument changes share one budget; stops have their own (rerun 26: they used it up first).
  const budgets = { stops: maxMutationsPerSeed, perturbations: maxMutationsPerSeed };
  const applicable: Mutation[] = [];
  for (const m of MUTATIONS) {
    const budget = m === 'stopEarly' ? 'stops' : 'perturbations';
    let i = 0;
    for (const v of variants[m]) {
      // The per-seed share looks at the first MUTATION_TRIES; the classes, at every one played.
      if (i >= MUTATION_TRIES && (m === 'skipMessages' || budgets[budget] <= 0)) break;
      if (m !== 'skipMessages') budgets[budget]--;
      plays.push({ actions: v.actions, mutation: { m, i, key: v.key, at: v.at } });
      if (i === 0) plays.push({ actions: v.actions, replayOf: plays.length - 1 });
      i++;
    }
    if (i > 0) applicable.push(m);
  }
  return { plays, applicable };
}

/**
 * Check 5: the verifier rewards the capability, not a fingerprint of validation. The gold solution
 * replayed identically must score the same (evaluate() is a function of the trajectory), and gold
 * perturbed — a tool call dropped, an argument changed, the messages skipped — must score lower on
 * ≥ minMutationDetection of the seeds. Then every drop and every argument change is played on
 * every seed (at most maxMutationsPerSeed), and each perturbation class (the same step dropped,
 * the same argument changed) that scores lower on most seeds must do so on all but
 * maxMutationEscapes of its plays in total: an honest verifier is a function of the trajectory, so
 * a step it requires is required on every seed, while reward noise (or a count-based cheat, which
 * is noise to this check) lets some of them through. Gold stopped without a word after one of its
 * calls must not score as high as gold where dropping a later call, or the messages, scores lower:
 * a stop after calls that worked is what a refused call leaves in training. Every play goes
 * through the trainer's batches (`playShuffled`: a seed's plays as its copies, in random order,
 * on half the seeds with the stops in groups of their own), so a module keyed on the order of
 * requests rewards there what it would reward in training.
 */
export async function checkVerifier(
  env: Environment,
  c: SynthesisConfig,
  shape: BatchShape,
  onSeed?: OnSeed,
  freshProcess?: () => void,
): Promise<CheckResult> {
  const seeds = drawSeeds(c.seeds.verifier);
  const stats: VerifierStats = {
    seeds: seeds.length,
    replayMismatched: [],
    mutations: {
      stopEarly: { applicable: 0, lower: 0 },
      dropStep: { applicable: 0, lower: 0 },
      changeArgument: { applicable: 0, lower: 0 },
      skipMessages: { applicable: 0, lower: 0 },
    },
    classes: {},
    paidStops: [],
    silentEndings: [],
    silentEndingsBelowGold: 0,
    missingCalls: [],
    goldSpeech: 0,
  };
  // Each seed's plays, gold first. The first trajectory of each kind (gold, then each perturbation)
  // is played twice: a verifier that is honest on gold but random elsewhere shows up only on the others.
  const plans: { seed: number; gold: AgentAction[]; plays: Planned[]; applicable: Mutation[] }[] = [];
  const golds: AgentAction[][] = [];
  const anchors: (GoldAnchor | undefined)[] = [];
  for (const seed of seeds) {
    const view = await inspectInstance(env, seed);
    golds.push(view.gold);
    anchors.push(goldAnchorOf(view));
  }
  for (const gold of golds)
    stats.goldSpeech = Math.max(stats.goldSpeech, SPEECH.indexOf(speechOf(gold.map(actionMessage))));
  // Gold is played whole even where it is longer than the trainer's turns (then no policy can learn it whole).
  const turns = Math.max(shape.maxTurns, ...golds.map((g) => g.length));
  for (const [n, seed] of seeds.entries())
    plans.push({ seed, gold: golds[n], ...mutationPlan(golds[n], c.maxMutationsPerSeed) });
  const { results, copies } = await playShuffled(env, plans, { ...shape, maxTurns: turns }, onSeed, freshProcess);
  const examples: string[] = [];
  const escapes: { key: string; text: string }[] = [];
  for (const [n, { seed, gold, plays, applicable }] of plans.entries()) {
    const rewards = results[n].map((r) => r.reward);
    const reward = rewards[0];
    if (
      plays.some((x, j) => x.replayOf !== undefined && rewards[j] !== rewards[x.replayOf]) ||
      copies.some((x) => x.plan === n && x.reward !== rewards[x.of])
    )
      stats.replayMismatched.push(seed);
    // Lower by the margin at least: a perturbation 0.01 below gold still pays what it skips (rerun 27).
    const isLower = (r: number) => r <= reward - c.mutationMargin + 1e-9;
    const lower = new Set<Mutation>();
    for (const [j, { mutation }] of plays.entries()) {
      if (!mutation) continue;
      // Each play's anchor check is the module's gold against the play: the worker's other work
      // goes on between them (rerun 64b: 8.4 s in one block for two seeds).
      await new Promise((resolve) => setImmediate(resolve));
      const scoredLower = isLower(rewards[j]);
      if (scoredLower && mutation.i < MUTATION_TRIES) lower.add(mutation.m);
      if (mutation.m === 'skipMessages') {
        if (speechOf(gold.map(actionMessage)) !== 'silent') {
          stats.silentEndings.push(rewards[j]);
          if (rewards[j] < reward - 1e-9) stats.silentEndingsBelowGold++;
        }
        continue;
      }
      const anchor = anchors[n];
      if (!anchor || anchorMiss(anchor, plays[j].actions.map(actionMessage))?.part === 'calls')
        stats.missingCalls.push(rewards[j]);
      const cls = (stats.classes[mutation.key] ??= { played: 0, lower: 0 });
      cls.played++;
      if (scoredLower) cls.lower++;
      else escapes.push({ key: mutation.key, text: `seed ${seed}: ${mutation.key} scored ${reward}, as high as gold` });
    }
    const paidStop = paidStopOf(gold, plays, rewards, isLower, c);
    if (paidStop) stats.paidStops.push(`seed ${seed}: ${paidStop}`);
    for (const m of applicable) {
      stats.mutations[m].applicable++;
      if (lower.has(m)) stats.mutations[m].lower++;
      else if (GATING_MUTATIONS.includes(m) && examples.length < 3)
        examples.push(`seed ${seed}: ${m} scored as high as the gold solution (${reward})`);
    }
  }
  const result = judgeVerifier(stats, c);
  if (!result.passed) examples.push(...stats.paidStops.slice(0, 3 - examples.length));
  if (!result.passed && examples.length < 3) {
    const required = new Set(requiredClasses(stats.classes));
    examples.push(
      ...escapes
        .filter((e) => required.has(e.key))
        .map((e) => e.text)
        .slice(0, 3 - examples.length),
    );
  }
  return { ...result, examples };
}

/**
 * Check 5's plays in the trainer's batches, each seed's in random order and, on half the seeds,
 * its stops apart, as its later groups: where a play sits and beside which others tells the module
 * nothing fixed (rerun 26 paid stops off gold's group, and off the third and fourth place of a
 * seed). Each part fills whole groups with copies of its own plays, which score as replays do.
 * Results in each plan's order, and the copies' rewards.
 */
async function playShuffled(
  env: Environment,
  plans: readonly { seed: number; plays: Planned[] }[],
  shape: BatchShape,
  onSeed?: OnSeed,
  freshProcess?: () => void,
): Promise<{ results: BatchPlayed[][]; copies: { plan: number; of: number; reward: number }[] }> {
  const K = shape.rolloutsPerGroup;
  const isStop = (plays: readonly Planned[], x: Planned) =>
    (x.replayOf !== undefined ? plays[x.replayOf] : x).mutation?.m === 'stopEarly';
  const orders = plans.map(({ plays }) => {
    const stops = plays.flatMap((x, j) => (isStop(plays, x) ? [j] : []));
    const rest = plays.flatMap((x, j) => (isStop(plays, x) ? [] : [j]));
    const parts = stops.length && randomInt(2) ? [rest, stops] : [[...rest, ...stops]];
    return parts.flatMap((part) => {
      const order = shuffle(part);
      for (let i = 0; order.length % K; i++) order.push(order[i]);
      return order;
    });
  });
  const played = await playInBatches(
    env,
    plans.map((p, n) => ({ seed: p.seed, policies: orders[n].map((j) => scripted(goldPolicy(p.plays[j].actions))) })),
    shape,
    { onBatch: onSeed, freshProcess },
  );
  const results = plans.map((p): BatchPlayed[] => new Array(p.plays.length));
  const copies: { plan: number; of: number; reward: number }[] = [];
  for (const [n, order] of orders.entries())
    for (const [t, j] of order.entries()) {
      if (results[n][j] === undefined) results[n][j] = played[n][t];
      else copies.push({ plan: n, of: j, reward: played[n][t].reward });
    }
  return { results, copies };
}

/** The items in random order (Fisher–Yates with the crypto generator). */
function shuffle<T>(items: readonly T[]): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = randomInt(i + 1);
    [out[i], out[j]] = [out[j], out[i]];
  }
  return out;
}

/**
 * A stop after gold's k-th call paid for what it skips, as text: it scored as high as gold while a
 * drop of a later call, or gold without its messages (every call, no word), scored lower; or it
 * scored more than gold without its messages by over the margin (that makes every call of gold's,
 * the stop's among them, so an honest verifier scores it at least as high; rerun 27 paid a stop
 * just below gold). A gold that makes no call, without its words, is a stop at once: paid more
 * than a trivial policy may be (maxTrivialReward, per seed), it pays doing nothing and sets the cap
 * on every episode that speaks less (rerun 35 paid it as gold; rerun 36 at gold - margin, 0.9).
 */
function paidStopOf(
  gold: readonly AgentAction[],
  plays: readonly Planned[],
  rewards: readonly number[],
  isLower: (reward: number) => boolean,
  c: { maxTrivialReward: number; mutationMargin: number },
): string | undefined {
  if (!gold.some((a) => a.type === 'tool_call')) {
    const atOnce = plays.findIndex((x, j) => x.mutation?.m === 'skipMessages' && rewards[j] > c.maxTrivialReward);
    return atOnce < 0
      ? undefined
      : `a stop at once scored ${rewards[atOnce]} (gold ${rewards[0]}; a trivial policy may score ${c.maxTrivialReward}), where gold makes no call and only speaks`;
  }
  const margin = c.mutationMargin;
  for (const [j, { mutation: stop }] of plays.entries()) {
    if (stop?.m !== 'stopEarly') continue;
    const more = (x: Planned) =>
      (x.mutation?.m === 'dropStep' && x.mutation.at! > stop.at!) || x.mutation?.m === 'skipMessages';
    // Above gold's calls without its messages: an error a dropped call causes may rightly cost more than a stop.
    const k = plays.findIndex(
      (x, n) =>
        more(x) &&
        (isLower(rewards[j])
          ? x.mutation?.m === 'skipMessages' && rewards[j] > rewards[n] + margin + 1e-9
          : isLower(rewards[n])),
    );
    if (k >= 0)
      return `${stop.key} scored ${rewards[j]} (gold ${rewards[0]}) while ${plays[k].mutation!.key}, which makes more of gold's calls, scored ${rewards[k]}`;
  }
  return undefined;
}

function summarize(messages: readonly Message[]): string {
  return messages
    .map(
      (m) =>
        `${m.role}: ${m.role === 'assistant' && m.tool_calls?.length ? m.tool_calls.map((t) => `${t.function.name}(${t.function.arguments})`).join(', ') : String(m.content).slice(0, 160)}`,
    )
    .join(' / ')
    .slice(0, 600);
}

/**
 * The base policy as the trainer samples it: one action per turn, the first tool call of a reply
 * (with its text) or else its text; an empty reply ends the episode, one cut at the trainer's
 * maxNewTokens is a PolicyCut. Each request may take
 * `timeoutMs` (then the episode ends as `timeout`); `usage` adds up what the episode's requests cost.
 */
function llmTurns(
  llm: Llm,
  env: Environment,
  opts: { temperature: number; maxTokens: number; timeoutMs: number; signal?: AbortSignal },
  usage: Usage & { model: string },
): TurnPolicy {
  return async (messages) => {
    const timeout = AbortSignal.timeout(opts.timeoutMs);
    let reply;
    try {
      reply = await askPolicy(
        llm,
        [{ role: 'system', content: env.systemPrompt() }, ...messages],
        env.tools(),
        opts.temperature,
        opts.signal ? AbortSignal.any([opts.signal, timeout]) : timeout,
        opts.maxTokens,
      );
    } catch (e) {
      if (timeout.aborted && !opts.signal?.aborted)
        throw new PolicyTimeout(`no reply within rollouts.episodeTimeoutMs = ${opts.timeoutMs} ms`);
      // The server's own room is past the trainer's: an episode it refuses ends as the trainer's would (rerun 23).
      if ((e as { code?: unknown }).code === 'context_length_exceeded') throw new PolicyCut((e as Error).message);
      throw e;
    }
    usage.calls++;
    usage.promptTokens += reply.usage.promptTokens;
    usage.completionTokens += reply.usage.completionTokens;
    usage.model = reply.model || usage.model;
    const used = reply.usage.promptTokens + reply.usage.completionTokens;
    if (used >= TRAINER_MAX_SEQ_LEN)
      throw new PolicyCut(`${used} tokens of prompt and reply; the trainer's episodes end at ${TRAINER_MAX_SEQ_LEN}`);
    // A reply its cap stopped is no action, as in the trainer's action format: its raw text as the
    // message, or an episode ended early in training alone, was a tell (reruns 19, 23).
    if (reply.truncated) throw new PolicyCut(`the reply reached training.maxNewTokens = ${opts.maxTokens}`);
    const [call] = reply.calls;
    if (call)
      return {
        action: { type: 'tool_call', call },
        message: { role: 'assistant', content: reply.content, tool_calls: [call] },
      };
    if (!reply.content?.trim()) return null;
    return {
      action: { type: 'message', content: reply.content },
      message: { role: 'assistant', content: reply.content },
    };
  };
}

/**
 * Check 6: the base policy plays `calibration.groups` seeds in the trainer's batches (K copies
 * each, `playInBatches`), as the trainer's first iteration plays them with an adapter that still
 * changes nothing, and must land in the calibration band with informative groups. A module cannot
 * fake the band here and pay otherwise in training: the requests come in the same order.
 */
export async function checkCalibration(
  env: Environment,
  config: Config,
  llm: Llm,
  onEpisode?: (done: number) => void,
): Promise<{ result: CheckResult; rollouts: Trajectory[] }> {
  const cal = config.synthesis.calibration;
  const shape: BatchShape = {
    ...batchShapeOf(config),
    rolloutsPerGroup: cal.rolloutsPerGroup ?? config.training.rolloutsPerGroup,
    maxTurns: cal.maxSteps ?? config.training.maxTurns,
  };
  const seeds = drawSeeds(cal.groups);
  const model = await llm.model();
  const usages = seeds.map(() =>
    Array.from({ length: shape.rolloutsPerGroup }, () => ({ promptTokens: 0, completionTokens: 0, calls: 0, model })),
  );
  const played = await keepAliveDuring((signal) =>
    playInBatches(
      env,
      seeds.map((seed, i) => ({
        seed,
        policies: usages[i].map((usage) =>
          llmTurns(
            llm,
            env,
            // The temperature GRPO will sample at: the informative share is only meaningful there; and
            // its cap on a reply, which cuts an episode as the trainer's cap does (rerun 23).
            {
              temperature: config.training.temperature,
              maxTokens: config.training.maxNewTokens,
              timeoutMs: config.rollouts.episodeTimeoutMs,
              signal,
            },
            usage,
          ),
        ),
      })),
      shape,
      { onBatch: (seedsDone) => onEpisode?.(seedsDone * shape.rolloutsPerGroup), concurrency: cal.concurrency },
    ),
  );
  const rollouts: Trajectory[] = seeds.flatMap((seed, i) =>
    played[i].map((r, trial) => {
      const { model: m, ...usage } = usages[i][trial];
      return {
        id: trajectoryId(env.info.name, { seed }, trial),
        env: env.info.name,
        taskId: r.taskId,
        seed,
        trial,
        model: m,
        messages: [{ role: 'system' as const, content: env.systemPrompt() }, ...r.messages],
        reward: r.reward,
        rewardInfo: r.note
          ? { ...r.rewardInfo, details: { ...r.rewardInfo.details, runnerNote: r.note } }
          : r.rewardInfo,
        success: r.success,
        termination: r.termination,
        usage,
        steps: r.steps,
        durationMs: r.durationMs,
      };
    }),
  );
  const groups = seeds.map((seed) => rollouts.filter((t) => t.seed === seed));
  const result = judgeCalibration(calibrationStats(groups), config.synthesis);
  const broken = rollouts
    .filter((t) => t.termination === 'error' || t.termination === 'timeout')
    .map((t) => `seed ${t.seed}: ${String(t.rewardInfo.details?.runnerNote ?? t.termination)}`);
  const examples = broken.length
    ? broken.slice(0, 3)
    : rollouts
        .filter((t) => t.reward === 0)
        .slice(0, 2)
        .map((t) => `seed ${t.seed} reward 0: ${summarize(t.messages.slice(1))}`);
  return { result: { ...result, examples: result.passed ? [] : examples }, rollouts };
}

export interface ValidateInput {
  source: string;
  manifest: EnvManifest;
  config: Config;
  /** The base policy for check 6 (calibration); without it check 6 is not run and the verdict says so. */
  policy?: Llm;
  /** Progress after each check, each seed a check tries and each calibration episode (activities heartbeat with it). */
  onProgress?: (details: Record<string, unknown>) => void;
  /**
   * Cancels validation (default: the current activity's cancellation): the sandbox is killed at
   * once and validateCandidate throws the signal's reason, so no verdict of a cancelled run is kept.
   */
  signal?: AbortSignal;
}

/** Runs checks 1–6 in order, stopping at the first failure. */
export async function validateCandidate(
  input: ValidateInput,
): Promise<{ verdict: ValidationVerdict; rollouts: Trajectory[] }> {
  const started = Date.now();
  const c = input.config.synthesis;
  const checks: CheckResult[] = [];
  let warnings: string[] = [];
  const signal = input.signal ?? activityContext()?.cancellationSignal;
  const done = () => {
    signal?.throwIfAborted(); // a check that failed because the sandbox was cancelled is no verdict
    return verdictOf(checks, Date.now() - started, warnings);
  };
  const compiled = await checkCompile(input.source, input.manifest, {
    runner: c.runner,
    typecheck: c.typecheck,
    sandbox: c.sandbox,
    signal,
  });
  checks.push(compiled.result, ...(compiled.next ? [compiled.next] : []));
  if (!compiled.loaded) return { verdict: done(), rollouts: [] };
  const { env } = compiled.loaded;
  if (compiled.loaded.warning) warnings = [compiled.loaded.warning];
  let rollouts: Trajectory[] = [];
  try {
    const seedDone =
      (check: CheckResult['check']): OnSeed =>
      (seeds) =>
        input.onProgress?.({ check, seeds });
    const steps: [CheckResult['check'], () => Promise<CheckResult>][] = [
      ['determinism', () => checkDeterminism(env, c, seedDone('determinism'))],
      ['solvability', () => checkSolvability(env, c, seedDone('solvability'))],
      ['non_triviality', () => checkNonTriviality(env, c, batchShapeOf(input.config), seedDone('non_triviality'))],
      [
        'verifier',
        () => checkVerifier(env, c, batchShapeOf(input.config), seedDone('verifier'), compiled.loaded?.freshProcess),
      ],
    ];
    if (input.policy) {
      const policy = input.policy;
      steps.push([
        'calibration',
        async () => {
          const r = await checkCalibration(env, input.config, policy, (episodes) =>
            input.onProgress?.({ check: 'calibration', episodes }),
          );
          rollouts = r.rollouts;
          return r.result;
        },
      ]);
    }
    for (const [check, run] of steps) {
      // Each check starts in a fresh process, so calibration's processes hold only policy episodes,
      // as training's do, and a module counting per process sees the same counts there as here.
      compiled.loaded.freshProcess?.();
      const r = await run().catch((e: Error): CheckResult => ({
        check,
        passed: false,
        reason: `the environment crashed: ${oneLine(e.message)}`,
        metrics: {},
        examples: [],
      }));
      checks.push(r);
      input.onProgress?.({ check, passed: r.passed });
      if (!r.passed) break;
    }
    if (!input.policy && checks.every((g) => g.passed)) {
      checks.push({
        check: 'calibration',
        passed: false,
        reason: 'no base policy was given, so calibration was not run',
        metrics: {},
        examples: [],
      });
    }
  } finally {
    await compiled.loaded.close();
  }
  return { verdict: done(), rollouts };
}
