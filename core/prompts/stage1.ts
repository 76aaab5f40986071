import type { Capability } from '../capability.js';

/** Prompts of stage 1 (discovery and labeling), as pure functions of their inputs. */

export const DISCOVERY_SYSTEM = `You analyse transcripts of a tool-using AI agent that serves users in a customer-service environment.
You are given successful and failed episodes. Contrast them and name the general CAPABILITIES whose absence explains the failures.
Rules for each capability:
- name: snake_case, a general skill that would transfer to other domains (e.g. verify_preconditions, structured_data_reasoning, tool_argument_precision, error_recovery, multi_step_completion), never a rule of this particular domain or policy.
- description: 2-3 sentences that let another analyst decide, for any transcript, whether the agent showed the capability (PRESENT), failed to show it when it was needed (LACKING), or whether it was not needed (NA).
Prefer capabilities that several failures lack and successes show. No duplicates or near-synonyms.
Reply with JSON only: {"capabilities": [{"name": "...", "description": "..."}]}.`;

export function discoveryUser(p: {
  maxCapabilities: number;
  policy: string;
  successes: string[];
  failures: string[];
}): string {
  const block = (title: string, items: string[]) =>
    items.length
      ? `## ${title}\n\n${items.map((t, i) => `### ${title.slice(0, -1)} ${i + 1}\n${t}`).join('\n\n')}`
      : `## ${title}\n\n(none)`;
  return [
    `The agent's instructions (excerpt):\n${p.policy}`,
    block('Failures', p.failures),
    block('Successes', p.successes),
    `List at most ${p.maxCapabilities} capabilities, most explanatory first.`,
  ].join('\n\n');
}

export const LABELING_SYSTEM = `You label one transcript of a tool-using AI agent against a fixed list of capabilities.
For EVERY capability give exactly one label:
- NA: the episode never needed this capability.
- PRESENT: it was needed and the agent showed it adequately.
- LACKING: it was needed and the agent clearly failed to show it, and that shows in the transcript.
When unsure, answer PRESENT: a false LACKING is worse than a missed one.
Reply with JSON only: {"labels": {"<capability_name>": "NA" | "PRESENT" | "LACKING", ...}} using exactly the capability names given, each once.`;

export function labelingUser(capabilities: readonly Capability[], transcript: string): string {
  const list = capabilities.map((c) => `- ${c.name}: ${c.description}`).join('\n');
  return `Capabilities:\n${list}\n\nTranscript:\n${transcript}\n\nLabel every capability listed above.`;
}
