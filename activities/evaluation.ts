import { Stage1ResultSchema } from '../core/capability.js';
import { mapLimit } from '../core/concurrency.js';
import type { Config } from '../core/config.js';
import {
  EVALUATION_SEED_OFFSET,
  EvalEpisodeSchema,
  EvaluationSummarySchema,
  VariantSpecSchema,
  compareIds,
  promptOnlySuffix,
  summarizeEvaluation,
  type EvalEpisode,
  type VariantSpec,
} from '../core/evaluation.js';
import type { Environment } from '../envs/environment.js';
import { openEnvironment, type OpenDeps } from '../envs/registry.js';
import type { ArtifactStore } from '../store/artifact-store.js';
import type { ArtifactRef } from '../core/artifact-ref.js';
import { openStore } from '../store/index.js';
import { runKeys } from '../store/keys.js';
import { heartbeat } from '../infra/activity-context.js';
import { createLlm, envLlm, type LlmFactory } from '../llm/client.js';
import { runEpisodes } from '../agent/rollout.js';
import { startPolicyServer, type PolicyServer } from '../llm/policy-server.js';
import type { FitGateResult } from './training.js';

/**
 * Evaluation of agent variants on the target's held-out (test-split) tasks. One stored record per
 * (variant, task, trial), written when the episode ends, so a retried or resumed activity redoes
 * nothing that finished. Greedy (temperature 0) unless the config asks for trials at a temperature.
 */

export interface EvaluationDeps {
  openStore(config: Config['store']): ArtifactStore | Promise<ArtifactStore>;
  openEnvironment(envConfig: Config['env'], deps: OpenDeps): Promise<Environment>;
  startPolicyServer(
    config: Config,
    variant: { name: string; adapterUri?: string; gateUri?: string },
    shares?: number,
  ): Promise<PolicyServer>;
  createLlm: LlmFactory;
}

const defaultDeps: EvaluationDeps = {
  openStore,
  openEnvironment,
  startPolicyServer,
  createLlm,
};

/** Bad input (a non-test task, an unknown variant field): Temporal must not retry it. */
export class InvalidInput extends Error {
  override name = 'InvalidInput';
}

/** A held-out task: a fixed task id, or a seed of a generator env. */
export interface EvalTask {
  taskId?: string;
  seed?: number;
}

export interface EvaluationStageInput {
  runId: string;
  config: Config;
  /** The stage-4 gate, when one was fitted: the TRACE agent is the base with it. */
  gate?: Pick<FitGateResult, 'gateUri'>;
  capabilities?: { name: string; status: string; adapter?: ArtifactRef }[];
}

export interface EvaluationPlan {
  split: string;
  tasks: EvalTask[];
  variants: VariantSpec[];
  notes: string[];
  /** Trained agents (gate, adapters) that no configured endpoint serves; evaluateRun can serve them itself. */
  unserved: { gateUri?: string; adapters: { capability: string; uri: string }[]; notes: string[] };
}

export interface EvaluationStageResult {
  split: string;
  tasks: number;
  variants: VariantResult[];
  notes: string[];
}

export interface VariantResult {
  name: string;
  kind: VariantSpec['kind'];
  ref: ArtifactRef;
  passRate: number | null;
  n: number;
}

const taskLabel = (t: EvalTask) => t.taskId ?? `seed-${t.seed}`;

/** The env as the variant's agent sees it: the prompt-only baseline gets its system prompt suffix. */
function withPromptSuffix(env: Environment, suffix: string | undefined): Environment {
  if (!suffix) return env;
  return {
    info: env.info,
    tools: () => env.tools(),
    systemPrompt: () => env.systemPrompt() + suffix,
    listTasks: () => env.listTasks(),
    reset: (req, opts) => env.reset(req, opts),
  };
}

/**
 * The config whose policy role serves this variant, with evaluation.concurrency requests in flight
 * (the role's client bounds them: the trainer's server batches only what arrives together).
 */
function variantConfig(config: Config, v: VariantSpec): Config {
  const policy = {
    ...config.llm.policy,
    concurrency: config.evaluation.concurrency ?? config.llm.policy.concurrency,
    ...(v.baseURL ? { baseURL: v.baseURL } : {}),
    ...(v.model ? { model: v.model } : {}),
  };
  return { ...config, llm: { ...config.llm, policy } };
}

export function createEvaluationActivities(deps: EvaluationDeps = defaultDeps) {
  /**
   * The held-out tasks: the env's test split only (never the split rollouts and selection used),
   * capped by evaluation.maxTasks (default env.maxTasks) in a stable id order. A seeded generator
   * env is evaluated on seeds disjoint from the rollout seeds.
   */
  async function listEvaluationTasks(input: {
    config: Config;
  }): Promise<{ split: string; tasks: EvalTask[]; note?: string }> {
    const { config } = input;
    const cap = config.evaluation.maxTasks ?? config.env.maxTasks;
    const env = await deps.openEnvironment(config.env, { config, llm: envLlm(config, deps.createLlm) });
    try {
      const all = await env.listTasks();
      if (all.length === 0) {
        const n = cap ?? 8;
        return {
          split: 'held-out seeds',
          tasks: Array.from({ length: n }, (_, i) => ({ seed: EVALUATION_SEED_OFFSET + i })),
        };
      }
      const split = config.env.testSplit;
      if (!all.some((t) => t.split !== undefined)) {
        throw new InvalidInput(
          `env.testSplit: ${config.env.name} has no task splits, so no task is held out from rollouts; evaluation refuses to score on training tasks`,
        );
      }
      const test = all.filter((t) => t.split === split).sort((a, b) => compareIds(a.id, b.id));
      if (test.length === 0)
        throw new InvalidInput(`env.testSplit: no tasks in split '${split}' of ${config.env.name}`);
      if (split === config.env.trainSplit)
        throw new InvalidInput(`env.testSplit: equals env.trainSplit ('${split}'); evaluation must use held-out tasks`);
      const tasks = test.slice(0, cap ?? test.length).map((t) => ({ taskId: t.id }));
      return {
        split,
        tasks,
        ...(tasks.length < test.length ? { note: `${tasks.length} of ${test.length} held-out tasks (capped)` } : {}),
      };
    } finally {
      await env.close?.();
    }
  }

  /** Rejects any task that is not held out: the test split must never be mixed with training. */
  async function checkHeldOut(env: Environment, config: Config, tasks: readonly EvalTask[]): Promise<void> {
    const all = await env.listTasks();
    if (all.length === 0) {
      const bad = tasks.find((t) => t.seed === undefined || t.seed < EVALUATION_SEED_OFFSET);
      if (bad) throw new InvalidInput(`tasks: ${taskLabel(bad)} is not a held-out seed (≥ ${EVALUATION_SEED_OFFSET})`);
      return;
    }
    const test = new Set(all.filter((t) => t.split === config.env.testSplit).map((t) => t.id));
    const bad = tasks.find((t) => t.taskId === undefined || !test.has(t.taskId));
    if (bad)
      throw new InvalidInput(
        `tasks: ${taskLabel(bad)} is not in the test split '${config.env.testSplit}' of ${config.env.name}`,
      );
  }

  async function loadEpisodes(store: ArtifactStore, runId: string, variant: string): Promise<EvalEpisode[]> {
    const out: EvalEpisode[] = [];
    for (const k of await store.list(runKeys.evaluationEpisodes(runId, variant)))
      out.push(EvalEpisodeSchema.parse(await store.getJson(k)));
    return out;
  }

  async function writeSummary(
    store: ArtifactStore,
    config: Config,
    runId: string,
    variant: VariantSpec,
    split: string,
    episodes: EvalEpisode[],
  ) {
    const summary = summarizeEvaluation(
      variant,
      split,
      config.evaluation.trials,
      config.evaluation.temperature,
      episodes,
    );
    const ref = await store.put(
      runKeys.evaluationSummary(runId, variant.name),
      JSON.stringify(EvaluationSummarySchema.parse(summary), null, 2),
    );
    return { ref, summary };
  }

  /**
   * One fan-out unit: every trial of the given held-out tasks for one variant. Finished episodes
   * (stored records) are skipped; the rest run with the policy role's concurrency. Returns the
   * summary over every episode of this variant stored so far in the run.
   */
  async function evaluateVariant(input: {
    config: Config;
    runId: string;
    variant: VariantSpec;
    tasks: EvalTask[];
    split?: string;
  }): Promise<VariantResult> {
    const { config, runId, tasks } = input;
    const parsed = VariantSpecSchema.safeParse(input.variant);
    if (!parsed.success)
      throw new InvalidInput(`variant.${parsed.error.issues[0].path.join('.')}: ${parsed.error.issues[0].message}`);
    const variant = parsed.data;
    const store = await deps.openStore(config.store);
    const { trials, temperature } = config.evaluation;
    const items = tasks.flatMap((task) => Array.from({ length: trials }, (_, trial) => ({ task, trial })));
    const pending: typeof items = [];
    for (const it of items)
      if (!(await store.stat(runKeys.evaluationEpisode(runId, variant.name, it.task, it.trial)))) pending.push(it);
    let done = items.length - pending.length;
    heartbeat({ variant: variant.name, done, total: items.length });
    const infraErrors: string[] = [];
    if (pending.length > 0) {
      const vconfig = variantConfig(config, variant);
      const base = await deps.openEnvironment(config.env, { config, llm: envLlm(config, deps.createLlm) });
      try {
        await checkHeldOut(base, config, tasks);
        const env = withPromptSuffix(base, variant.systemPromptSuffix);
        const llm = deps.createLlm(vconfig, 'policy');
        await runEpisodes({
          env,
          llm,
          tasks: pending.map((p) => ({ ...p.task, trial: p.trial })),
          concurrency: vconfig.llm.policy.concurrency,
          maxSteps: config.rollouts.maxSteps,
          maxErrors: config.rollouts.maxErrors,
          timeoutMs: config.rollouts.episodeTimeoutMs,
          temperature,
          onEpisode: async (traj, j) => {
            const { task, trial } = pending[j];
            if (traj.termination === 'error') {
              // An infrastructure failure says nothing about the agent: not stored, so a retry redoes it.
              infraErrors.push(
                `${taskLabel(task)} t${trial}: ${String(traj.rewardInfo.details?.runnerNote ?? traj.rewardInfo.details?.evaluateError ?? 'error')}`,
              );
              return;
            }
            const trajRef = await store.put(
              runKeys.evaluationTrajectory(runId, variant.name, task, trial),
              JSON.stringify(traj),
            );
            const episode: EvalEpisode = {
              variant: variant.name,
              domain: traj.env,
              taskId: traj.taskId,
              trial,
              success: traj.success,
              reward: traj.reward,
              termination: traj.termination,
              steps: traj.steps,
              usage: traj.usage,
              durationMs: traj.durationMs,
              model: traj.model,
              temperature,
              trajectoryUri: trajRef.uri,
              ...taskCategories(traj.rewardInfo.details),
            };
            // The episode record is written last: its presence is what marks the item finished.
            await store.put(runKeys.evaluationEpisode(runId, variant.name, task, trial), JSON.stringify(episode));
            done++;
            heartbeat({ variant: variant.name, done, total: items.length });
          },
        });
      } finally {
        await base.close?.();
      }
      if (infraErrors.length) {
        throw new Error(
          `${infraErrors.length} evaluation episode(s) of ${variant.name} ended by infrastructure errors (finished ones are kept): ${infraErrors[0]}`,
        );
      }
    }
    const split = input.split ?? config.env.testSplit;
    const { ref, summary } = await writeSummary(
      store,
      config,
      runId,
      variant,
      split,
      await loadEpisodes(store, runId, variant.name),
    );
    return {
      name: variant.name,
      kind: variant.kind,
      ref,
      passRate: summary.overall.passRate.estimate,
      n: summary.overall.episodes,
    };
  }

  /** The variants this run evaluates, with the reason for each one it cannot. */
  async function planVariants(
    config: Config,
    runId: string,
    store: ArtifactStore,
  ): Promise<{ variants: VariantSpec[]; notes: string[] }> {
    // A configured base variant (e.g. the base served by the same backend as the TRACE agent, for a
    // like-for-like comparison) replaces the default one on the policy endpoint; the prompt-only
    // baseline runs on the base's endpoint.
    const configured = config.evaluation.variants;
    const bases = configured.filter((v) => v.kind === 'base');
    if (bases.length > 1)
      throw new InvalidInput(
        `evaluation.variants: more than one base variant (${bases.map((b) => b.name).join(', ')})`,
      );
    const base: VariantSpec = bases[0] ?? { name: 'base', kind: 'base' };
    const variants: VariantSpec[] = [base];
    const notes: string[] = [];
    if (config.evaluation.promptOnly) {
      const stage1Ref = await store.stat(runKeys.stage1(runId));
      const selected = stage1Ref ? Stage1ResultSchema.parse(await store.getJson(stage1Ref)).selected : [];
      // The capabilities TRACE trains: those selected and those the config requests.
      const requested = config.analysis.requestedCapabilities.filter((r) => !selected.some((s) => s.name === r.name));
      const described = [...selected, ...requested];
      if (described.length > 0) {
        variants.push({
          ...base,
          name: 'prompt_only',
          kind: 'prompt_only',
          systemPromptSuffix: promptOnlySuffix(described),
        });
        if (requested.length)
          notes.push(
            `prompt-only baseline describes the capabilities requested by config: ${requested.map((r) => r.name).join(', ')}`,
          );
      } else {
        notes.push('prompt-only baseline not evaluated: no capability was selected or requested');
      }
    }
    for (const v of configured.filter((x) => x.kind !== 'base')) {
      if (variants.some((x) => x.name === v.name))
        throw new InvalidInput(`evaluation.variants: duplicate variant name '${v.name}'`);
      variants.push(v);
    }
    return { variants, notes };
  }

  /**
   * What the evaluation stage runs: the held-out tasks, the variants (base, prompt-only when
   * configured, configured ones) and notes on variants that need a serving endpoint this
   * deployment lacks. No held-out tasks is a note for the report, not a failed run.
   */
  async function planEvaluation(input: EvaluationStageInput): Promise<EvaluationPlan> {
    const { runId, config } = input;
    const store = await deps.openStore(config.store);
    let listed: Awaited<ReturnType<typeof listEvaluationTasks>>;
    try {
      listed = await listEvaluationTasks({ config });
    } catch (e) {
      if (e instanceof InvalidInput) {
        return {
          split: config.env.testSplit,
          tasks: [],
          variants: [],
          notes: [`evaluation skipped: ${e.message}`],
          unserved: { adapters: [], notes: [] },
        };
      }
      throw e;
    }
    const { split, tasks, note } = listed;
    const { variants, notes } = await planVariants(config, runId, store);
    if (note) notes.push(note);
    const unserved: EvaluationPlan['unserved'] = { adapters: [], notes: [] };
    if (input.gate && !variants.some((v) => v.kind === 'trace')) {
      unserved.gateUri = input.gate.gateUri;
      unserved.notes.push(
        'TRACE agent (base + gate) not evaluated: no serving endpoint for it is configured (evaluation.variants)',
      );
    }
    const trained = (input.capabilities ?? []).flatMap((c) =>
      c.adapter ? [{ capability: c.name, uri: c.adapter.uri }] : [],
    );
    if (config.evaluation.singleAdapters && trained.length > 0 && !variants.some((v) => v.kind === 'adapter')) {
      unserved.adapters = trained;
      unserved.notes.push(
        `single adapters (${trained.map((c) => c.capability).join(', ')}) not evaluated: no serving endpoint for them is configured`,
      );
    }
    return { split, tasks, variants, notes, unserved };
  }

  /**
   * The whole evaluation stage in one activity (variants one after another, each task's result
   * stored as it finishes). workflows/evaluation.ts runs the same plan fanned out across workers.
   */
  async function evaluateRun(input: EvaluationStageInput): Promise<EvaluationStageResult> {
    const { runId, config } = input;
    const plan = await planEvaluation(input);
    const { split, tasks, unserved } = plan;
    const servers: PolicyServer[] = [];
    try {
      // Trained agents without an endpoint become variants this activity serves itself.
      let variants: VariantSpec[] = [
        ...plan.variants,
        ...(unserved.gateUri ? [{ name: 'trace', kind: 'trace' as const, gateUri: unserved.gateUri }] : []),
        // The adapter ref names a file of the PEFT directory; the server loads the directory.
        ...unserved.adapters.map((a) => ({
          name: `adapter-${a.capability}`,
          kind: 'adapter' as const,
          capability: a.capability,
          adapterUri: a.uri.slice(0, a.uri.lastIndexOf('/')),
        })),
      ];
      const needsServer = (v: VariantSpec) => !v.baseURL && (v.gateUri !== undefined || v.adapterUri !== undefined);
      let notes = [...plan.notes, ...unserved.notes];
      if (tasks.length > 0 && variants.some(needsServer)) {
        // The base (and the prompt-only baseline on it) is served by the same trainer server unless
        // configured otherwise, so every variant is evaluated through one backend. The servers start
        // together and share the CPU cores with the variants evaluated at once.
        const serveBase = variants.some((v) => v.kind === 'base' && !v.baseURL);
        const toServe = [
          ...(serveBase ? [{ name: 'base', kind: 'base' as const }] : []),
          ...variants.filter(needsServer),
        ];
        const shares = Math.min(config.evaluation.parallelVariants, toServe.length);
        // Loading a model can outlast a heartbeat timeout: keep the activity alive meanwhile.
        const keepalive = setInterval(() => heartbeat({ starting: toServe.map((v) => v.name) }), 2_000);
        let started: { baseURL: string; model: string }[];
        try {
          const settled = await Promise.allSettled(
            toServe.map(async (v) => {
              const s = await deps.startPolicyServer(
                config,
                { name: v.name, adapterUri: v.adapterUri, gateUri: v.gateUri },
                shares,
              );
              servers.push(s);
              return { baseURL: s.baseURL, model: s.model };
            }),
          );
          const failed = settled.find((r) => r.status === 'rejected');
          if (failed) throw failed.reason;
          started = settled.map((r) => (r as PromiseFulfilledResult<{ baseURL: string; model: string }>).value);
        } finally {
          clearInterval(keepalive);
        }
        const base = serveBase ? started[0] : undefined;
        let next = serveBase ? 1 : 0;
        variants = variants.map((v) => {
          if (needsServer(v)) return { ...v, ...started[next++] };
          if (base && !v.baseURL && (v.kind === 'base' || v.kind === 'prompt_only')) return { ...v, ...base };
          return v;
        });
        notes = [
          ...plan.notes,
          'trained agents and the base served by python -m trace_trainer serve (one backend for every variant)',
        ];
      }
      const results = await mapLimit(variants, config.evaluation.parallelVariants, (variant) =>
        evaluateVariant({ config, runId, variant, tasks, split }),
      );
      return { split, tasks: tasks.length, variants: results, notes };
    } finally {
      for (const s of servers) await s.close();
    }
  }

  return { listEvaluationTasks, planEvaluation, evaluateVariant, evaluateRun };
}

const defaults = createEvaluationActivities();
export const { listEvaluationTasks, planEvaluation, evaluateVariant, evaluateRun } = defaults;

/** The task's categories when the env's reward details name them (ToolSandbox's `categories`). */
function taskCategories(details: Record<string, unknown> | undefined): { categories?: string[] } {
  const c = details?.categories;
  return Array.isArray(c) && c.length > 0 && c.every((x) => typeof x === 'string') ? { categories: c } : {};
}
