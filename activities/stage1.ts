import { createHash } from 'node:crypto';
import {
  CapabilityDictionarySchema,
  discoveryOutputSchema,
  labelOutputSchema,
  PassLabelsSchema,
  Stage1ResultSchema,
  TrajectoryLabelsSchema,
  ItemFailureSchema,
  type Capability,
  type CapabilityDictionary,
  type DiscoveryOutput,
  type ItemFailure,
  type Outcome,
  type PassLabels,
  type SelectedCapability,
  type Stage1Result,
  type TrajectoryLabels,
} from '../core/capability.js';
import { capabilityStats, exampleFailures, type PassInput } from '../core/capability-stats.js';
import { compactTrajectory, truncate } from '../core/compaction.js';
import type { Config } from '../core/config.js';
import { DISCOVERY_SYSTEM, discoveryUser, LABELING_SYSTEM, labelingUser } from '../core/prompts/stage1.js';
import { TrajectorySchema, type Trajectory, type Usage } from '../core/trajectory.js';
import type { Environment } from '../envs/environment.js';
import { openEnvironment, type OpenDeps } from '../envs/registry.js';
import type { ArtifactStore } from '../store/artifact-store.js';
import { openStore } from '../store/index.js';
import { runKeys } from '../store/keys.js';
import type { ArtifactRef } from '../core/artifact-ref.js';
import { mapLimit } from '../core/concurrency.js';
import { activityContext, heartbeat, keepingAlive } from '../infra/activity-context.js';
import { addUsage, createLlm, envLlm, InvalidLlmOutputError, parseJsonReply, ZERO_USAGE } from '../llm/client.js';
import { runEpisodes, type TaskSpec } from '../agent/rollout.js';

/**
 * Stage 1 activities: plain async functions with small JSON inputs and outputs; bulk data lives in
 * the artifact store under runs/<runId>/. Each is idempotent (a finished artifact is returned as
 * is) and resumable (finished items are persisted one key each, so a killed worker redoes none).
 */

export interface Stage1Deps {
  openStore(config: Config['store']): ArtifactStore | Promise<ArtifactStore>;
  openEnvironment(envConfig: Config['env'], deps: OpenDeps): Promise<Environment>;
}

const defaultDeps: Stage1Deps = {
  openStore,
  openEnvironment,
};

/** The activity's cancellation signal (cancellation arrives through heartbeats), when in one. */
function cancellation(): AbortSignal | undefined {
  return activityContext()?.cancellationSignal;
}

/**
 * From this activity attempt on, episodes that ended in infrastructure errors are accepted into the
 * batch (recorded, left out of analysis) instead of failing it for another retry.
 */
const ACCEPT_ERRORED_FROM_ATTEMPT = 3;

export class RolloutInfrastructureError extends Error {
  override name = 'RolloutInfrastructureError';
}

const itemKey = (id: string) => createHash('sha256').update(id).digest('hex').slice(0, 24);

function toJsonl(items: unknown[]): string {
  return items.map((x) => JSON.stringify(x)).join('\n') + (items.length ? '\n' : '');
}

export async function loadTrajectories(store: ArtifactStore, refs: readonly ArtifactRef[]): Promise<Trajectory[]> {
  const out: Trajectory[] = [];
  for (const ref of refs) {
    const lines = (await store.getText(ref)).split('\n').filter((l) => l.trim());
    lines.forEach((line, i) => {
      const r = TrajectorySchema.safeParse(JSON.parse(line));
      if (!r.success) throw new Error(`${ref.uri}: line ${i + 1}: ${r.error.issues[0].path.join('.')}: ${r.error.issues[0].message}`);
      out.push(r.data);
    });
  }
  return out;
}

/** Trajectories ended by infrastructure errors say nothing about the policy: left out of analysis. */
const analysable = (t: Trajectory) => t.termination !== 'error';

function summarize(ts: readonly Trajectory[]) {
  return {
    count: ts.length,
    successes: ts.filter((t) => t.success).length,
    usage: ts.reduce((u, t) => addUsage(u, t.usage), ZERO_USAGE),
  };
}

// ── rollouts ────────────────────────────────────────────────────────────────────────────────────

export interface RolloutTask {
  taskId?: string;
  seed?: number;
  trial: number;
}

export function createStage1Activities(deps: Stage1Deps = defaultDeps) {
  async function listRolloutTasks(input: { config: Config }): Promise<RolloutTask[]> {
    const { config } = input;
    const env = await deps.openEnvironment(config.env, { config, llm: envLlm(config) });
    try {
      const all = await env.listTasks();
      const trials = config.rollouts.trialsPerTask;
      if (all.length === 0) {
        // A seeded generator env: tasks are seeds 0..maxTasks-1.
        const n = config.env.maxTasks ?? DEFAULT_SEEDED_TASKS;
        return Array.from({ length: n }, (_, s) => Array.from({ length: trials }, (_, trial) => ({ seed: s, trial }))).flat();
      }
      const hasSplits = all.some((t) => t.split !== undefined);
      const train = hasSplits ? all.filter((t) => t.split === config.env.trainSplit) : all;
      if (train.length === 0) throw new Error(`env.trainSplit: no tasks in split '${config.env.trainSplit}' of ${config.env.name}`);
      const chosen = train.slice(0, config.env.maxTasks ?? train.length);
      return chosen.flatMap((t) => Array.from({ length: trials }, (_, trial) => ({ taskId: t.id, trial })));
    } finally {
      await env.close?.();
    }
  }

  async function collectRolloutBatch(input: {
    config: Config;
    runId: string;
    batchIndex: number;
    tasks: RolloutTask[];
    /** Record episodes that ended in infrastructure errors instead of failing the batch (default: from attempt 3 on). */
    acceptErroredEpisodes?: boolean;
  }): Promise<{ ref: ArtifactRef; count: number; successes: number; usage: Usage }> {
    const { config, runId, batchIndex, tasks } = input;
    const store = await deps.openStore(config.store);
    const key = runKeys.rolloutBatch(runId, batchIndex);
    const existing = await store.stat(key);
    if (existing) return { ref: existing, ...summarize(await loadTrajectories(store, [existing])) };

    // Finished episodes are persisted one key each; an episode that ended in an infrastructure error
    // is not, so the next attempt redoes exactly those.
    const done = new Map<number, Trajectory>();
    for (const k of await store.list(runKeys.rolloutBatchParts(runId, batchIndex))) {
      const index = Number(/(\d+)\.json$/.exec(k)?.[1]);
      done.set(index, TrajectorySchema.parse(await store.getJson(k)));
    }
    const acceptErrored = input.acceptErroredEpisodes ?? (activityContext()?.info.attempt ?? 1) >= ACCEPT_ERRORED_FROM_ATTEMPT;
    const todo = tasks.map((t, i) => ({ t, i })).filter(({ i }) => !done.has(i));
    const errored = new Map<number, Trajectory>();
    heartbeat({ done: done.size, total: tasks.length });
    if (todo.length) {
      const env = await deps.openEnvironment(config.env, { config, llm: envLlm(config) });
      try {
        const llm = createLlm(config, 'policy');
        await runEpisodes({
          env,
          llm,
          tasks: todo.map(({ t }): TaskSpec => t),
          concurrency: config.llm.policy.concurrency,
          maxSteps: config.rollouts.maxSteps,
          maxErrors: config.rollouts.maxErrors,
          timeoutMs: config.rollouts.episodeTimeoutMs,
          temperature: config.rollouts.temperature,
          signal: cancellation(),
          onEpisode: async (traj, j) => {
            const index = todo[j].i;
            if (traj.termination === 'error' && !acceptErrored) {
              errored.set(index, traj);
              return;
            }
            await store.put(runKeys.rolloutBatchPart(runId, batchIndex, index), JSON.stringify(traj));
            done.set(index, traj);
            heartbeat({ done: done.size, total: tasks.length });
          },
        });
      } finally {
        await env.close?.();
      }
    }
    if (errored.size) {
      const first = [...errored.values()][0];
      throw new RolloutInfrastructureError(
        `batch ${batchIndex}: ${errored.size} of ${tasks.length} episodes ended in infrastructure errors (first: ${first.id}: ${String(first.rewardInfo.details?.runnerNote ?? 'unknown')}); finished episodes are kept for the retry`,
      );
    }
    const all = tasks.map((_, i) => done.get(i)!);
    const ref = await store.put(key, toJsonl(all));
    return { ref, ...summarize(all) };
  }

  // ── discovery ─────────────────────────────────────────────────────────────────────────────────

  async function discoverCapabilities(input: {
    config: Config;
    runId: string;
    rolloutRefs: ArtifactRef[];
  }): Promise<{ ref: ArtifactRef; capabilities: number }> {
    const { config, runId, rolloutRefs } = input;
    const store = await deps.openStore(config.store);
    const key = runKeys.dictionary(runId);
    const existing = await store.stat(key);
    if (existing) {
      const d = CapabilityDictionarySchema.parse(await store.getJson(existing));
      return { ref: existing, capabilities: d.capabilities.length };
    }
    const ts = (await loadTrajectories(store, rolloutRefs)).filter(analysable).sort(byId);
    const failures = ts.filter((t) => !t.success);
    const successes = ts.filter((t) => t.success);
    const llm = createLlm(config, 'analyst');
    let dictionary: CapabilityDictionary;
    if (failures.length === 0) {
      // Nothing to contrast: an empty dictionary, and selection reports why.
      dictionary = { capabilities: [], basedOn: { successes: [], failures: [] }, model: await llm.model() };
    } else {
      const shown = pickForDiscovery(failures, successes, config.analysis.maxTrajectoryChars);
      const policy = truncate(ts[0]?.messages.find((m) => m.role === 'system')?.content ?? '', POLICY_EXCERPT_CHARS);
      heartbeat({ stage: 'discovery' });
      const tools = toolNamesOf(ts);
      const warnings: string[] = [];
      let out: DiscoveryOutput;
      try {
        out = await llm.structured(
          [
            { role: 'system', content: DISCOVERY_SYSTEM },
            {
              role: 'user',
              content: discoveryUser({
                maxCapabilities: config.analysis.maxCapabilities,
                policy,
                failures: shown.failures.map((t) => compactTrajectory(t, shown.budget)),
                successes: shown.successes.map((t) => compactTrajectory(t, shown.budget)),
              }),
            },
          ],
          discoveryOutputSchema(tools),
          'capability_dictionary',
        );
      } catch (e) {
        // Sentence counts are the one rule a grammar-constrained small model cannot be held to: after
        // the repairs, output that breaks only that rule is kept, with a warning in the report.
        if (!(e instanceof InvalidLlmOutputError)) throw e;
        const lenient = discoveryOutputSchema(tools, { sentences: false }).safeParse(parseJsonReply(e.lastContent));
        if (!lenient.success) throw e;
        out = lenient.data;
        warnings.push(`kept the analyst's dictionary although ${e.lastError}`);
      }
      dictionary = {
        capabilities: canonicalDictionary(out.capabilities, config.analysis.maxCapabilities),
        basedOn: { successes: shown.successes.map((t) => t.id), failures: shown.failures.map((t) => t.id) },
        model: await llm.model(),
        ...(warnings.length ? { warnings } : {}),
      };
    }
    const ref = await store.put(key, JSON.stringify(dictionary, null, 2));
    return { ref, capabilities: dictionary.capabilities.length };
  }

  // ── labeling ──────────────────────────────────────────────────────────────────────────────────

  async function labelPass(input: {
    config: Config;
    runId: string;
    pass: number;
    rolloutRefs: ArtifactRef[];
    dictionaryRef: ArtifactRef;
  }): Promise<{ ref: ArtifactRef; labeled: number; failedItems: number }> {
    const { config, runId, pass, rolloutRefs, dictionaryRef } = input;
    const store = await deps.openStore(config.store);
    const key = runKeys.labelPass(runId, pass);
    const existing = await store.stat(key);
    if (existing) {
      const p = PassLabelsSchema.parse(await store.getJson(existing));
      return { ref: existing, labeled: p.items.length, failedItems: p.failedItems.length };
    }
    const dictionary = CapabilityDictionarySchema.parse(await store.getJson(dictionaryRef));
    const ts = (await loadTrajectories(store, rolloutRefs)).filter(analysable).sort(byId);
    const prefix = runKeys.labelPassItems(runId, pass);

    const finished = new Map<string, TrajectoryLabels | ItemFailure>();
    for (const k of await store.list(prefix)) {
      const raw = await store.getJson(k);
      const item = TrajectoryLabelsSchema.safeParse(raw);
      const rec = item.success ? item.data : ItemFailureSchema.parse(raw);
      finished.set(rec.trajectoryId, rec);
    }
    const todo = dictionary.capabilities.length ? ts.filter((t) => !finished.has(t.id)) : [];
    heartbeat({ pass, done: finished.size, total: ts.length });

    const llm = createLlm(config, 'analyst');
    const schema = labelOutputSchema(dictionary.capabilities);
    const temperature = llm.temperature ?? LABELING_TEMPERATURE;
    const settled = await mapLimit(todo, config.llm.analyst.concurrency, async (t) => {
      cancellation()?.throwIfAborted();
      let rec: TrajectoryLabels | ItemFailure;
      try {
        const out = await llm.structured(
          [
            { role: 'system', content: LABELING_SYSTEM },
            { role: 'user', content: labelingUser(dictionary.capabilities, compactTrajectory(t, config.analysis.maxTrajectoryChars)) },
          ],
          schema,
          'capability_labels',
          { temperature, seed: pass, signal: cancellation() },
        );
        rec = { trajectoryId: t.id, labels: out.labels };
      } catch (e) {
        // Transport failures (after the client's retries) fail the activity so Temporal retries it;
        // finished items stay persisted. Output that stays invalid after repair is this item's failure.
        if (!(e instanceof InvalidLlmOutputError)) return e as Error;
        rec = { trajectoryId: t.id, error: e.message };
      }
      await store.put(`${prefix}${itemKey(t.id)}.json`, JSON.stringify(rec));
      finished.set(t.id, rec);
      heartbeat({ pass, done: finished.size, total: ts.length });
      return undefined;
    });
    const transportError = settled.find((e) => e instanceof Error);
    if (transportError) throw transportError;

    const records = ts.flatMap((t) => (finished.has(t.id) ? [finished.get(t.id)!] : []));
    const result: PassLabels = {
      pass,
      items: records.filter((r): r is TrajectoryLabels => 'labels' in r),
      failedItems: records.filter((r): r is ItemFailure => 'error' in r),
      usage: llm.usage(),
    };
    const ref = await store.put(key, JSON.stringify(result));
    return { ref, labeled: result.items.length, failedItems: result.failedItems.length };
  }

  // ── selection ─────────────────────────────────────────────────────────────────────────────────

  async function selectCapabilities(input: {
    config: Config;
    runId: string;
    rolloutRefs: ArtifactRef[];
    dictionaryRef: ArtifactRef;
    passRefs: ArtifactRef[];
  }): Promise<{
    ref: ArtifactRef;
    selected: { name: string; description: string; meanDelta: number; meanCoverage: number; passesSelected: number }[];
    summary: string;
  }> {
    const { config, runId, rolloutRefs, dictionaryRef, passRefs } = input;
    const store = await deps.openStore(config.store);
    const dictionary = CapabilityDictionarySchema.parse(await store.getJson(dictionaryRef));
    const all = await loadTrajectories(store, rolloutRefs);
    const ts = all.filter(analysable);
    const outcomes: Outcome[] = ts.map((t) => ({ trajectoryId: t.id, success: t.success }));
    const passes: PassLabels[] = [];
    for (const r of passRefs) passes.push(PassLabelsSchema.parse(await store.getJson(r)));
    passes.sort((a, b) => a.pass - b.pass);
    const passInputs: PassInput[] = passes.map((p) => ({ pass: p.pass, items: p.items }));
    const thresholds = {
      delta: config.analysis.delta,
      coverage: config.analysis.coverage,
      minPassesSelected: config.analysis.minPassesSelected,
    };
    const stats = capabilityStats(dictionary.capabilities, outcomes, passInputs, thresholds);
    const describe = new Map(dictionary.capabilities.map((c) => [c.name, c.description]));
    const selected: SelectedCapability[] = stats
      .filter((s) => s.selected)
      .map((s) => ({
        name: s.name,
        description: describe.get(s.name)!,
        meanDelta: s.meanDelta!,
        meanCoverage: s.meanCoverage!,
        passesSelected: s.passesSelected,
        examples: exampleFailures(s.name, outcomes, passInputs, config.analysis.examplesPerCapability),
      }));
    const result: Stage1Result = {
      runId,
      env: config.env.name,
      thresholds: { ...thresholds, passes: config.analysis.passes },
      counts: {
        trajectories: ts.length,
        successes: outcomes.filter((o) => o.success).length,
        failures: outcomes.filter((o) => !o.success).length,
        errored: all.length - ts.length,
        labelFailures: passes.reduce((n, p) => n + p.failedItems.length, 0),
      },
      dictionary,
      rolloutRefs,
      dictionaryRef,
      passRefs,
      stats,
      selected,
      summary: '',
    };
    result.summary = stage1Summary(result, passes.length);
    const ref = await store.put(runKeys.stage1(runId), JSON.stringify(Stage1ResultSchema.parse(result), null, 2));
    return {
      ref,
      selected: selected.map(({ examples: _e, ...s }) => s),
      summary: result.summary,
    };
  }

  return {
    listRolloutTasks,
    collectRolloutBatch: keepingAlive(collectRolloutBatch),
    discoverCapabilities: keepingAlive(discoverCapabilities),
    labelPass: keepingAlive(labelPass),
    selectCapabilities,
  };
}

// ── helpers ─────────────────────────────────────────────────────────────────────────────────────

const MIN_DISCOVERY_ITEM_CHARS = 800;
/** Seeds rolled out on an env without fixed tasks when env.maxTasks is not set. */
const DEFAULT_SEEDED_TASKS = 8;
const POLICY_EXCERPT_CHARS = 2000;
/** Labeling passes must be independent samples: a role without a temperature labels at this one. */
const LABELING_TEMPERATURE = 0.7;

function toolNamesOf(ts: readonly Trajectory[]): string[] {
  const names = new Set<string>();
  for (const t of ts) for (const m of t.messages) if (m.role === 'assistant') for (const c of m.tool_calls ?? []) names.add(c.function.name);
  return [...names];
}

const byId = (a: Trajectory, b: Trajectory) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

/**
 * Which trajectories the discovery prompt shows: failures and successes interleaved two to one
 * (failures are what the dictionary must explain), each compacted to an equal share of the budget
 * (maxTrajectoryChars in all, so one discovery prompt fits the same context as one labeling prompt).
 */
export function pickForDiscovery(failures: Trajectory[], successes: Trajectory[], totalChars: number) {
  const order: Trajectory[] = [];
  let f = 0;
  let s = 0;
  while (f < failures.length || s < successes.length) {
    for (let k = 0; k < 2 && f < failures.length; k++) order.push(failures[f++]);
    if (s < successes.length) order.push(successes[s++]);
  }
  const n = Math.max(1, Math.min(order.length, Math.floor(totalChars / MIN_DISCOVERY_ITEM_CHARS)));
  const chosen = order.slice(0, n);
  return {
    failures: chosen.filter((t) => !t.success),
    successes: chosen.filter((t) => t.success),
    budget: Math.floor(totalChars / n),
  };
}

/** Dedupe by name (first wins, order = the analyst's ranking) and cap. */
export function canonicalDictionary(caps: readonly Capability[], max: number): Capability[] {
  const seen = new Set<string>();
  const out: Capability[] = [];
  for (const c of caps) {
    if (seen.has(c.name)) continue;
    seen.add(c.name);
    out.push({ name: c.name, description: c.description.trim() });
  }
  return out.slice(0, max);
}

const fmt = (x: number | null) => (x === null ? 'n/a' : x.toFixed(2));

export function stage1Summary(r: Stage1Result, passesRun: number): string {
  const c = r.counts;
  const lines = [
    `Stage 1 on ${r.env}: ${c.trajectories} trajectories (${c.successes} successes, ${c.failures} failures${c.errored ? `, ${c.errored} ended by infrastructure errors and left out` : ''}); ` +
      `${r.dictionary.capabilities.length} capabilities discovered; ${passesRun} of ${r.thresholds.passes} labeling passes` +
      `${c.labelFailures ? ` (${c.labelFailures} item labels failed after repair)` : ''}.`,
  ];
  for (const w of r.dictionary.warnings ?? []) lines.push(`Warning: ${w}.`);
  if (c.failures === 0) lines.push('No failed trajectories: nothing to contrast, so no capability can be selected.');
  if (c.successes === 0) lines.push('No successful trajectories: the contrastive gap Δ is undefined, so no capability can be selected.');
  const rule = `Δ ≥ ${r.thresholds.delta.toFixed(2)} and Cov ≥ ${r.thresholds.coverage.toFixed(2)} in ≥ ${r.thresholds.minPassesSelected} of ${r.thresholds.passes} passes`;
  lines.push(r.selected.length ? `Selected ${r.selected.length} (${rule}):` : `None selected (${rule}).`);
  for (const s of r.stats) {
    const mark = s.selected ? '✔' : ' ';
    lines.push(
      `${mark} ${s.name}: Δ ${fmt(s.meanDelta)} ± ${fmt(s.stdDelta)}, Cov ${fmt(s.meanCoverage)} ± ${fmt(s.stdCoverage)}, selected in ${s.passesSelected}/${passesRun}` +
        (s.notes.length ? ` (${s.notes.join('; ')})` : ''),
    );
  }
  return lines.join('\n');
}

const defaults = createStage1Activities();
export const { listRolloutTasks, collectRolloutBatch, discoverCapabilities, labelPass, selectCapabilities } = defaults;
