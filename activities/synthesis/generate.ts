import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import { compactTrajectory } from '../../core/compaction.js';
import {
  GENERATOR_SYSTEM,
  generatorUser,
  repairUser,
  type GeneratorPromptInput,
} from '../../core/prompts/synthesis.js';
import { GeneratedEnvSchema, type GeneratedEnv, type ValidationVerdict } from '../../core/synthesis.js';
import type { Trajectory } from '../../core/trajectory.js';
import type { ToolSchema } from '../../core/messages.js';
import { REFERENCE_ENVS, referenceSource, type ReferenceCapability } from '../../envs/reference/index.js';
import type { Llm } from '../../llm/client.js';

/** The generation agent: builds the prompt from the stage-1 evidence and asks the generator role for a module. */
const here = path.dirname(fileURLToPath(import.meta.url));
const SDK_README = path.resolve(here, '../../envs/sdk/README.md');
const POLICY_EXCERPT_CHARS = 3000;
const FAILURE_CHARS = 2500;
const MAX_FAILURES = 8;

/** Few-shot references: the one for the same capability (or its closest name), then one more for the same target family. */
export function pickReferences(capability: string, targetEnv: string, n = 2): ReferenceCapability[] {
  const all = Object.keys(REFERENCE_ENVS) as ReferenceCapability[];
  const first = matchReference(capability);
  const family = targetEnv.startsWith('tau2') ? 'tau2' : 'other';
  const sameFamily = (c: ReferenceCapability) =>
    (['permission_error_recovery', 'datetime_reasoning'].includes(c) ? 'other' : 'tau2') === family;
  const rest = [...all.filter(sameFamily), ...all.filter((c) => !sameFamily(c))].filter((c) => c !== first);
  return [...(first ? [first] : []), ...rest].slice(0, n);
}

const STOP_WORDS = new Set(['task', 'tool', 'data', 'use', 'of', 'and', 'the']);
const stems = (name: string) =>
  name
    .split('_')
    .filter((w) => w.length > 2 && !STOP_WORDS.has(w))
    .map((w) => w.slice(0, 5));

/** The reference capability whose name shares the most word stems with `capability` (e.g. verify_preconditions → precondition_verification). */
export function matchReference(capability: string): ReferenceCapability | undefined {
  if (Object.hasOwn(REFERENCE_ENVS, capability)) return capability as ReferenceCapability;
  const mine = new Set(stems(capability));
  let best: ReferenceCapability | undefined;
  let bestScore = 0;
  for (const ref of Object.keys(REFERENCE_ENVS) as ReferenceCapability[]) {
    const score = stems(ref).filter((s) => mine.has(s)).length;
    if (score > bestScore) [best, bestScore] = [ref, score];
  }
  return best;
}

export async function generatorMessages(p: {
  capability: { name: string; description: string };
  stats?: GeneratorPromptInput['stats'];
  target: { name: string; tools: ToolSchema[]; systemPrompt: string };
  failures: Trajectory[];
  references?: number;
}): Promise<ChatCompletionMessageParam[]> {
  const refs = pickReferences(p.capability.name, p.target.name, p.references);
  const user = generatorUser({
    capability: p.capability,
    stats: p.stats,
    targetEnv: p.target.name,
    targetTools: p.target.tools,
    policyExcerpt: p.target.systemPrompt.slice(0, POLICY_EXCERPT_CHARS),
    failures: p.failures.slice(0, MAX_FAILURES).map((t) => compactTrajectory(t, FAILURE_CHARS)),
    sdkReadme: await readFile(SDK_README, 'utf8'),
    references: await Promise.all(refs.map(async (c) => ({ capability: c, source: await referenceSource(c) }))),
  });
  return [
    { role: 'system', content: GENERATOR_SYSTEM },
    { role: 'user', content: user },
  ];
}

/** The conversation for attempt n > 1: the base prompt, the previous reply and the check's feedback. */
export function repairMessages(
  base: ChatCompletionMessageParam[],
  previous: GeneratedEnv | undefined,
  verdict: ValidationVerdict | undefined,
  generatorError?: string,
): ChatCompletionMessageParam[] {
  return [
    ...base,
    ...(previous ? [{ role: 'assistant' as const, content: JSON.stringify(previous) }] : []),
    { role: 'user', content: repairUser(verdict, generatorError) },
  ];
}

/** One generator call: a zod-validated {manifest, source}, or the reason there is none. */
export async function generateCandidate(
  llm: Llm,
  messages: ChatCompletionMessageParam[],
): Promise<{ generated: GeneratedEnv } | { error: string }> {
  try {
    return { generated: await llm.structured(messages, GeneratedEnvSchema, 'capability_environment') };
  } catch (e) {
    return { error: `${(e as Error).name}: ${(e as Error).message}`.slice(0, 1000) };
  }
}
