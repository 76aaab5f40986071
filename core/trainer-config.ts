import type { Config } from './config.js';

/**
 * The Python trainer's config objects (trainer/trace_trainer/config.py `GrpoConfig`, `GateConfig`)
 * from the run config: the one mapping between the camelCase YAML and the trainer's snake_case
 * fields. Paths are resolved by the caller (`resolve`), so this stays pure.
 */
export interface TrainerPaths {
  /** A model or tokenizer name as the trainer process must open it (a local path or an HF id). */
  resolve: (name: string) => string;
  /** A directory the trainer writes to, made absolute. */
  absolute: (dir: string) => string;
}

export function grpoTrainerConfig(
  config: Config,
  at: TrainerPaths & { envUrl: string; outputUri: string; initAdapterUri?: string },
): Record<string, unknown> {
  const t = config.training;
  const p = t.policyServer;
  return {
    model: at.resolve(t.model),
    ...(t.tokenizer ? { tokenizer: at.resolve(t.tokenizer) } : {}),
    env_url: at.envUrl,
    output_uri: at.outputUri,
    lora: { r: t.lora.r, alpha: t.lora.alpha, dropout: t.lora.dropout },
    ...(at.initAdapterUri ? { init_adapter_uri: at.initAdapterUri } : {}),
    iterations: t.iterations,
    groups: t.groupsPerIteration,
    rollouts_per_group: t.rolloutsPerGroup,
    temperature: t.temperature,
    constrained_decoding: t.constrainedDecoding,
    lr: t.lr,
    clip_low: t.clipLow,
    clip_high: t.clipHigh,
    micro_batch_size: t.microBatchSize,
    max_new_tokens: t.maxNewTokens,
    max_turns: t.maxTurns,
    resample_groups: t.resampleGroups,
    heldout_seeds: t.heldoutSeeds,
    heldout_every: t.heldoutEvery,
    heldout_rollouts: t.heldoutRollouts ?? t.rolloutsPerGroup,
    ...(p
      ? {
          policy_server: {
            base_url: p.baseURL,
            lora_dir: at.absolute(p.loraDir),
            ...(p.serverLoraDir ? { server_lora_dir: p.serverLoraDir } : {}),
            ...(p.apiKeyEnv ? { api_key_env: p.apiKeyEnv } : {}),
            logprobs: p.logprobs,
          },
        }
      : {}),
    checkpoint_every: t.checkpointEvery,
    seed: t.seed,
    device: t.device,
    ...s3Settings(config),
  };
}

export function gateTrainerConfig(
  config: Config,
  at: TrainerPaths & { adapters: { name: string; uri: string }[]; trajectories: string[]; outputUri: string },
): Record<string, unknown> {
  const g = config.gate;
  return {
    model: at.resolve(config.training.model),
    ...(config.training.tokenizer ? { tokenizer: at.resolve(config.training.tokenizer) } : {}),
    adapters: at.adapters,
    trajectories: at.trajectories,
    output_uri: at.outputUri,
    lambda_lb: g.lambdaLB,
    steps: g.steps,
    lr: g.lr,
    batch_size: g.batchSize,
    constrained_decoding: config.training.constrainedDecoding,
    device: config.training.device,
    ...s3Settings(config),
  };
}

/**
 * Trainer fields the run config does not set, and why: they keep the trainer's default (the
 * paper's code, or a setting about memory rather than the method). test/trainer-config.test.ts
 * checks that every trainer field is either mapped above or named here.
 */
export const TRAINER_DEFAULTS = {
  grpo: {
    weight_decay: 'the paper: none',
    warmup_steps: 'the paper: none',
    adv_eps: 'numerical guard of the group normalisation',
    max_grad_norm: 'the paper: 1.0',
    minibatches: 'the paper: one optimizer step per iteration',
    max_errors: 'the env ends an episode after repeated tool errors; 4 as the rollout default',
    max_seq_len: "the model's context bound for training rows",
    dtype: 'float32 on CPU, bfloat16 on CUDA',
    save_trajectories: 'always on: the gate is fitted on them',
    thinking: "Qwen3's enable_thinking: off, the instruct default, as the policy is served",
    tis_cap: "truncated importance sampling against the policy server's sampler: cap 2 on the weights",
    seed_key:
      'drawn fresh per run and kept in its checkpoints: a generated env must not predict its training and held-out seeds from the config (rerun 17)',
  },
  gate: {
    max_seq_len: "the model's context bound for training rows",
    seed: 'fixed: the gate is fitted once per run',
    dtype: 'float32 on CPU, bfloat16 on CUDA',
    only_successful: "the paper's method: successful trajectories only",
    gradient_checkpointing: 'memory only',
    thinking: 'as GRPO: off',
  },
} as const;

function s3Settings(config: Config) {
  const s = config.store;
  return s.kind === 's3'
    ? { s3: { endpoint: s.endpoint ?? null, region: s.region, force_path_style: s.forcePathStyle } }
    : {};
}
