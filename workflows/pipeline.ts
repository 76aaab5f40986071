import { composeAdapters } from './stages/compose-adapters.js';
import { evaluate } from './stages/evaluate.js';
import { identifyCapabilities } from './stages/identify-capabilities.js';
import { report } from './stages/report.js';
import { collectRollouts } from './stages/rollouts.js';
import { startRun } from './stages/run.js';
import { trainCapabilities } from './stages/train-capabilities.js';
import type { PipelineInput, PipelineResult } from './types.js';

/**
 * The TRACE pipeline, as in the paper's Figure 2: the agent's rollouts on the target env → stage 1
 * identifies the capabilities it lacks → stages 2–3 synthesize an environment per capability and
 * train a LoRA adapter in it (one child workflow each) → stage 4 composes the adapters under an MoE
 * gate → held-out evaluation against the base → report. `config.stages.*` switches stages 2–4 and
 * the evaluation off; progress, search attributes and the memo are kept by `Run` (stages/run.ts).
 */
export async function tracePipeline(input: PipelineInput): Promise<PipelineResult> {
  const run = startRun(input);
  const rollouts = await collectRollouts(run, input.rollouts);
  const identified = await identifyCapabilities(run, rollouts); // stage 1
  const capabilities = await trainCapabilities(run, identified, input.previous); // stages 2–3
  const composed = await composeAdapters(run, capabilities); // stage 4
  const evaluation = await evaluate(run, capabilities, composed);
  return report(run, { rollouts, analysis: identified.analysis, capabilities, composed, evaluation });
}
