import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import type { Config } from '../../core/config.js';
import { Stage1ResultSchema } from '../../core/capability.js';
import {
  EnvManifestSchema,
  SynthesisAttemptSchema,
  ValidationVerdictSchema,
  type EnvManifest,
  type GeneratedEnv,
  type SynthesisAttempt,
  type ValidationVerdict,
} from '../../core/synthesis.js';
import { TrajectorySchema, type Trajectory } from '../../core/trajectory.js';
import type { Environment } from '../../envs/environment.js';
import { openEnvironment, type OpenDeps } from '../../envs/registry.js';
import { loadReferenceEnv, referenceSource } from '../../envs/reference/index.js';
import { openStore, type ArtifactStore } from '../../store/index.js';
import { runKeys } from '../../store/keys.js';
import { type ArtifactRef } from '../../core/artifact-ref.js';
import { heartbeat } from '../../infra/activity-context.js';
import { createLlm, envLlm, type LlmFactory } from '../../llm/client.js';
import { loadTrajectories } from '../stage1.js';
import { generateCandidate, generatorMessages, matchReference, repairMessages } from './generate.js';
import { validateCandidate } from './validate.js';

/**
 * The repair loop as one activity: generate → validate (checks 1–6) → feed the failed check back,
 * up to config.synthesis.maxAttempts. Durable at attempt granularity: every attempt's source,
 * manifest, verdict and rollouts are stored before the next starts, and a retried activity resumes
 * after the last stored attempt (the attempt record is written last, as the completion marker).
 */
export interface SynthesizeInput {
  config: Config;
  runId: string;
  capability: { name: string; description: string };
  /** The stage-1 result (statistics and example failures of the capability). */
  analysis?: ArtifactRef;
  /** JSON array of failed trajectories to show instead of the analysis' examples. */
  examplesRef?: ArtifactRef;
}

export type SynthesisStatus = 'accepted' | 'synthesis_failed' | 'reference_fallback';

export interface SynthesizeResult {
  status: SynthesisStatus;
  /** The accepted module's source (also `envRef`); absent when synthesis failed. */
  ref?: ArtifactRef;
  envRef?: ArtifactRef;
  manifestRef?: ArtifactRef;
  attempts: number;
  lastFailure?: string;
  verdictRefs: ArtifactRef[];
  resultRef?: ArtifactRef;
  /** The reference-library capability used as a fallback (status 'reference_fallback'). */
  reference?: string;
}

export interface ValidateResult {
  ok: boolean;
  reason?: string;
  verdictRef?: ArtifactRef;
}

/** Records progress for Temporal (no-op outside an activity); LLM calls keep it alive in between. */
const beat = (details: Record<string, unknown>): void => heartbeat(details);

/** Stats and up to 8 LACKING failures of the capability, from the stage-1 result or an explicit list. */
async function evidence(store: ArtifactStore, input: SynthesizeInput) {
  let stats: { meanDelta?: number; meanCoverage?: number; passesSelected?: number } | undefined;
  let failures: Trajectory[] = [];
  if (input.analysis) {
    const result = Stage1ResultSchema.parse(await store.getJson(input.analysis));
    const sel = result.selected.find((s) => s.name === input.capability.name);
    if (sel) {
      stats = { meanDelta: sel.meanDelta, meanCoverage: sel.meanCoverage, passesSelected: sel.passesSelected };
      const ids = new Set(sel.examples.map((e) => e.trajectoryId));
      if (ids.size) failures = (await loadTrajectories(store, result.rolloutRefs)).filter((t) => ids.has(t.id));
    }
  }
  if (input.examplesRef) failures = TrajectorySchema.array().parse(await store.getJson(input.examplesRef));
  return { stats, failures: failures.filter((t) => !t.success).slice(0, 8) };
}

async function basePrompt(
  store: ArtifactStore,
  input: SynthesizeInput,
  deps: SynthesisDeps,
): Promise<ChatCompletionMessageParam[]> {
  const key = runKeys.synthesisPrompt(input.runId, input.capability.name);
  if (await store.stat(key)) return store.getJson(key);
  const target = await deps.openEnvironment(input.config.env, {
    config: input.config,
    llm: envLlm(input.config, deps.createLlm),
  });
  let messages: ChatCompletionMessageParam[];
  try {
    messages = await generatorMessages({
      capability: input.capability,
      ...(await evidence(store, input)),
      target: { name: input.config.env.name, tools: target.tools(), systemPrompt: target.systemPrompt() },
      references: input.config.synthesis.references,
    });
  } finally {
    await target.close?.();
  }
  await store.put(key, JSON.stringify(messages));
  return messages;
}

async function storedAttempts(store: ArtifactStore, runId: string, cap: string): Promise<SynthesisAttempt[]> {
  const out: SynthesisAttempt[] = [];
  for (let n = 1; ; n++) {
    if (!(await store.stat(runKeys.synthesisAttempt(runId, cap, n, 'attempt.json')))) return out;
    out.push(
      SynthesisAttemptSchema.parse(await store.getJson(runKeys.synthesisAttempt(runId, cap, n, 'attempt.json'))),
    );
  }
}

async function previousOf(store: ArtifactStore, a: SynthesisAttempt | undefined): Promise<GeneratedEnv | undefined> {
  if (!a?.manifest || !a.sourceRef) return undefined;
  return { manifest: a.manifest, source: await store.getText(a.sourceRef as ArtifactRef) };
}

/** Runs one attempt: generation, validation, and storage of everything it produced. */
async function runAttempt(
  store: ArtifactStore,
  input: SynthesizeInput,
  n: number,
  messages: ChatCompletionMessageParam[],
  deps: SynthesisDeps,
): Promise<SynthesisAttempt> {
  const { runId, config } = input;
  const cap = input.capability.name;
  beat({ capability: cap, attempt: n, phase: 'generating' });
  const out = await generateCandidate(deps.createLlm(config, 'generator'), messages);
  let record: SynthesisAttempt;
  if ('error' in out) {
    const reason = `the generator's reply is not a valid {manifest, source} object: ${out.error}`;
    const verdict: ValidationVerdict = {
      passed: false,
      failedCheck: 'compile',
      reason: `compile: ${reason}`,
      checks: [{ check: 'compile', passed: false, reason, metrics: {}, examples: [] }],
      durationMs: 0,
    };
    record = { attempt: n, verdict, generatorError: out.error };
  } else {
    const { manifest, source } = out.generated;
    const sourceRef = await store.put(runKeys.synthesisAttempt(runId, cap, n, 'source.ts'), source);
    await store.put(runKeys.synthesisAttempt(runId, cap, n, 'manifest.json'), JSON.stringify(manifest, null, 2));
    beat({ capability: cap, attempt: n, phase: 'validating' });
    const onProgress = (d: Record<string, unknown>) => beat({ capability: cap, attempt: n, phase: 'validating', ...d });
    const { verdict, rollouts } = await validateCandidate({
      source,
      manifest,
      config,
      policy: deps.createLlm(config, 'policy'),
      onProgress,
    });
    const rolloutsRef = rollouts.length
      ? await store.put(
          runKeys.synthesisAttempt(runId, cap, n, 'rollouts.jsonl'),
          rollouts.map((t) => JSON.stringify(t)).join('\n') + '\n',
        )
      : undefined;
    record = { attempt: n, manifest, sourceRef, verdict, ...(rolloutsRef ? { rolloutsRef } : {}) };
    await store.put(runKeys.verdict(runId, cap, source), JSON.stringify(verdict, null, 2));
    await store.put(runKeys.manifest(runId, cap, source), JSON.stringify(manifest, null, 2));
  }
  await store.put(runKeys.synthesisAttempt(runId, cap, n, 'verdict.json'), JSON.stringify(record.verdict, null, 2));
  await store.put(runKeys.synthesisAttempt(runId, cap, n, 'attempt.json'), JSON.stringify(record, null, 2));
  beat({ capability: cap, attempt: n, phase: 'done', passed: record.verdict.passed, reason: record.verdict.reason });
  return record;
}

/** What stage 2 gets injected: the run's store, the target env (its tools and prompt for the generator) and the LLM clients. */
export interface SynthesisDeps {
  openStore(config: Config['store']): ArtifactStore;
  openEnvironment(envConfig: Config['env'], deps: OpenDeps): Promise<Environment>;
  createLlm: LlmFactory;
}

/** Stage 2 on trace-cpu: the repair loop that synthesizes a capability's environment, and its validation. */
export function createSynthesisActivities(deps: SynthesisDeps = { openStore, openEnvironment, createLlm }) {
  return {
    synthesizeEnvironment: (input: SynthesizeInput) => synthesize(input, deps),
    validateEnvironment: (input: ValidateEnvInput) => validate(input, deps),
  };
}

async function synthesize(input: SynthesizeInput, deps: SynthesisDeps): Promise<SynthesizeResult> {
  const { runId, config } = input;
  const cap = input.capability.name;
  const store = deps.openStore(config.store);
  const resultKey = runKeys.synthesisResult(runId, cap);
  if (await store.stat(resultKey)) return store.getJson<SynthesizeResult>(resultKey);

  const prompt = await basePrompt(store, input, deps);
  const attempts = await storedAttempts(store, runId, cap);
  while (!attempts.some((a) => a.verdict.passed) && attempts.length < config.synthesis.maxAttempts) {
    const last = attempts.at(-1);
    const messages = last
      ? repairMessages(prompt, await previousOf(store, last), last.verdict, last.generatorError)
      : prompt;
    attempts.push(await runAttempt(store, input, attempts.length + 1, messages, deps));
  }

  const verdictRefs = (
    await Promise.all(attempts.map((a) => store.stat(runKeys.synthesisAttempt(runId, cap, a.attempt, 'verdict.json'))))
  ).filter((r): r is ArtifactRef => !!r);
  const accepted = attempts.find((a) => a.verdict.passed);
  const lastFailure = attempts.filter((a) => !a.verdict.passed).at(-1)?.verdict.reason;
  let result: SynthesizeResult;
  if (accepted) {
    const envRef = accepted.sourceRef as ArtifactRef;
    const manifestRef = await store.stat(runKeys.synthesisAttempt(runId, cap, accepted.attempt, 'manifest.json'));
    result = {
      status: 'accepted',
      ref: envRef,
      envRef,
      ...(manifestRef ? { manifestRef } : {}),
      attempts: attempts.length,
      ...(lastFailure ? { lastFailure } : {}),
      verdictRefs,
    };
  } else {
    const reference = config.synthesis.allowReferenceFallback ? matchReference(cap) : undefined;
    if (reference) {
      const source = await referenceSource(reference);
      const envRef = await store.put(runKeys.synthesisReference(runId, cap, reference), source);
      const env = await loadReferenceEnv(reference);
      await store.put(
        runKeys.manifest(runId, cap, source),
        JSON.stringify({ ...env.metadata, tools: env.tools().map((t) => t.function.name) }, null, 2),
      );
      result = {
        status: 'reference_fallback',
        ref: envRef,
        envRef,
        reference,
        attempts: attempts.length,
        ...(lastFailure ? { lastFailure } : {}),
        verdictRefs,
      };
    } else {
      result = {
        status: 'synthesis_failed',
        attempts: attempts.length,
        lastFailure: lastFailure ?? 'no attempt was made',
        verdictRefs,
      };
    }
  }
  const resultRef = await store.put(resultKey, JSON.stringify(result, null, 2));
  return { ...result, resultRef };
}

/**
 * Validates a stored module (checks 1–6). Returns the stored verdict when this exact source was
 * already validated in this run, so the workflow's separate validation step costs nothing extra.
 * Without an environment (synthesis failed) it reports the stored synthesis failure.
 */
export interface ValidateEnvInput {
  config: Config;
  runId: string;
  capability: { name: string };
  environment?: ArtifactRef;
  manifest?: EnvManifest;
}

async function validate(input: ValidateEnvInput, deps: SynthesisDeps): Promise<ValidateResult> {
  const { config, runId } = input;
  const cap = input.capability.name;
  const store = deps.openStore(config.store);
  if (!input.environment) {
    const key = runKeys.synthesisResult(runId, cap);
    const r = (await store.stat(key)) ? await store.getJson<SynthesizeResult>(key) : undefined;
    return {
      ok: false,
      reason: r
        ? `${r.status} after ${r.attempts} attempt(s): ${r.lastFailure ?? 'no reason recorded'}`
        : 'no environment was synthesized',
    };
  }
  const source = await store.getText(input.environment);
  const key = runKeys.verdict(runId, cap, source);
  const cached = await store.stat(key);
  if (cached) {
    const v = ValidationVerdictSchema.parse(await store.getJson(cached));
    return { ok: v.passed, ...(v.reason ? { reason: v.reason } : {}), verdictRef: cached };
  }
  const mKey = runKeys.manifest(runId, cap, source);
  const manifest =
    input.manifest ?? ((await store.stat(mKey)) ? EnvManifestSchema.parse(await store.getJson(mKey)) : undefined);
  if (!manifest) throw new Error(`validateEnvironment: no manifest stored for ${input.environment.uri}; pass one`);
  const { verdict, rollouts } = await validateCandidate({
    source,
    manifest,
    config,
    policy: deps.createLlm(config, 'policy'),
  });
  if (rollouts.length)
    await store.put(
      runKeys.verdictRollouts(runId, cap, source),
      rollouts.map((t) => JSON.stringify(t)).join('\n') + '\n',
    );
  const verdictRef = await store.put(key, JSON.stringify(verdict, null, 2));
  return { ok: verdict.passed, ...(verdict.reason ? { reason: verdict.reason } : {}), verdictRef };
}

export const { synthesizeEnvironment, validateEnvironment } = createSynthesisActivities();
