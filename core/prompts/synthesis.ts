import type { CheckResult, ValidationVerdict } from '../synthesis.js';

/** Prompts of stage 2 (environment generation and repair), as pure functions of their inputs. */

export const GENERATOR_SYSTEM = `You write training environments for a tool-using AI agent. Each environment isolates ONE capability the agent lacks, while keeping the interface of the agent's real (target) environment, so skill learned in it transfers.
You write one TypeScript module against the environment SDK documented below; it imports only from '#env-sdk' and ends with \`export default defineEnvironment({...})\`.
Rules:
- Match the target's tool names, argument and observation shapes and the policy style — not its implementation. Expose only the tools the task needs.
- The instance comes from generate(seed, rng): use the rng for every choice (never Math.random or Date), and vary entities, values and task structure so that different seeds give different tasks.
- Moderate difficulty: a capable agent that exercises the capability succeeds; one that skips it fails. Target 20–60% success for the current agent.
- The reward must depend mainly on exercising the capability (the DB state reached, values communicated, required arguments). Stopping at once, answering without tools or calling random tools must score at most 0.2 — never give credit for a state the agent reaches by doing nothing.
- The gold solution (gold actions replayed in order) must score 1.0 on every seed.
- The user's messages state the goal the way a real user would: never name the exact tool or spell out its arguments.
- Explain in the manifest's transferRationale why the skill transfers to the target.
Reply with JSON only: {"manifest": {"name", "capability", "targetEnv", "transferRationale", "description", "tools": [tool names]}, "source": "<the whole TypeScript module>"}. manifest.name, capability and targetEnv must equal the module's metadata; manifest.tools must list exactly the module's tool names.`;

export interface GeneratorPromptInput {
  capability: { name: string; description: string };
  stats?: { meanDelta?: number; meanCoverage?: number; passesSelected?: number };
  targetEnv: string;
  targetTools: unknown[];
  policyExcerpt: string;
  failures: string[];
  sdkReadme: string;
  references: { capability: string; source: string }[];
}

export function generatorUser(p: GeneratorPromptInput): string {
  const stats = p.stats
    ? `Statistics from the target: contrastive gap Δ = ${fmt(p.stats.meanDelta)}, failure coverage = ${fmt(p.stats.meanCoverage)}, selected in ${p.stats.passesSelected ?? '?'} labeling passes.`
    : '';
  return [
    `# Capability to isolate: ${p.capability.name}\n${p.capability.description}\n${stats}`,
    `# Target environment: ${p.targetEnv}\n## Tools (OpenAI schemas)\n${JSON.stringify(p.targetTools)}\n## Policy excerpt\n${p.policyExcerpt}`,
    `# Failed episodes of the agent where this capability was LACKING\n${p.failures.length ? p.failures.map((f, i) => `## Failure ${i + 1}\n${f}`).join('\n\n') : '(none available)'}`,
    `# SDK reference\n${p.sdkReadme}`,
    ...p.references.map((r) => `# Example environment (capability ${r.capability})\n\`\`\`ts\n${r.source}\n\`\`\``),
    `Write the environment for capability '${p.capability.name}' targeting '${p.targetEnv}'.`,
  ].join('\n\n');
}

/** Feedback for the next attempt: which check failed, why, and the evidence. */
export function repairUser(
  verdict: Pick<ValidationVerdict, 'checks' | 'reason'> | undefined,
  generatorError?: string,
): string {
  if (generatorError)
    return `Your previous reply could not be used: ${generatorError}. Reply again with the JSON object {"manifest", "source"} only.`;
  const failed: CheckResult | undefined = verdict?.checks.find((g) => !g.passed);
  const evidence = failed?.examples.length ? `\nEvidence:\n${failed.examples.map((e) => `- ${e}`).join('\n')}` : '';
  const metrics = failed && Object.keys(failed.metrics).length ? `\nMeasured: ${JSON.stringify(failed.metrics)}` : '';
  return `Your environment failed validation check '${failed?.check ?? '?'}': ${failed?.reason ?? verdict?.reason ?? 'unknown reason'}.${metrics}${evidence}\nFix the module and reply with the complete corrected JSON object {"manifest", "source"}.`;
}

function fmt(x: number | undefined): string {
  return x === undefined ? '?' : x.toFixed(2);
}
