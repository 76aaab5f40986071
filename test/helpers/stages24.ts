import type { Config, ConfigInput } from '../../core/config.js';
import type { ChatRequest, Script } from './scripted-llm.js';
import { pipelineConfig, pipelineReply } from './temporal.js';

/**
 * Shared pieces of the tests (and test/histories/record.ts) that run stages 2–4 for real on CPU:
 * the scripted replies and the config that keeps each stage to a few seconds (the tiny model is
 * startHarness's `model`, test/helpers/trainer.ts).
 */
export const isGenerator = (req: ChatRequest) => req.response_format?.json_schema?.name === 'capability_environment';

/** The scripted policy/analyst; the generator never writes a valid module, so stage 2 falls back to the reference env. */
export const stages24Reply: Script = (req) =>
  isGenerator(req) ? { content: '{"not": "an environment"}' } : pipelineReply(req);

/** An LLM role on the scripted server. */
export const scriptedRole = (baseURL: string) => ({
  baseURL,
  model: 'scripted-model',
  timeoutMs: 3_000,
  concurrency: 2,
});

/** The policy role when the policy is the tiny model served by the trainer: slow on a busy 2-core box. */
export const servedPolicyRole = (baseURL: string) => ({ ...scriptedRole(baseURL), timeoutMs: 120_000, maxTokens: 8 });

/** pipelineConfig with stage 2 on the reference fallback and one GRPO iteration of the tiny model. */
export function stages24Config(
  baseURL: string,
  storeDir: string,
  model: string,
  extra: Partial<ConfigInput> = {},
): Config {
  const role = scriptedRole(baseURL);
  return pipelineConfig(baseURL, storeDir, {
    llm: { policy: role, analyst: role, generator: role },
    synthesis: {
      maxAttempts: 1,
      references: 0,
      allowReferenceFallback: true,
      typecheck: false,
      seeds: { determinism: 4, solvability: 3, triviality: 3 },
      calibration: { low: 0, high: 1, minInformative: 0, groups: 1, rolloutsPerGroup: 2, concurrency: 2, maxSteps: 3 },
    },
    training: {
      model,
      device: 'cpu',
      iterations: 1,
      groupsPerIteration: 1,
      rolloutsPerGroup: 2,
      maxNewTokens: 4,
      maxTurns: 1,
      checkpointEvery: 1,
      lora: { r: 4, alpha: 8 },
    },
    ...extra,
  });
}
