import type { ActivityOptions } from '@temporalio/workflow';
import type { Config, LlmRoleName } from '../core/config.js';
import { TASK_QUEUE_GPU, type TimeoutOverrides } from './types.js';

/**
 * Activity options for every proxy: explicit timeouts, bounded retries, and bad input (config,
 * schema) failing at once instead of being retried.
 */
// InvalidLlmOutputError: the LLM client already re-asked a bounded number of times (analysis.maxRepairAttempts).
export const NON_RETRYABLE_ERRORS = [
  'ConfigError',
  'InvalidInput',
  'InvalidInputError',
  'ZodError',
  'NotConfigured',
  'InvalidLlmOutputError',
];

const MINUTE = 60_000;

function retry(t: TimeoutOverrides | undefined): ActivityOptions['retry'] {
  return {
    initialInterval: '1s',
    backoffCoefficient: 2,
    maximumInterval: '1m',
    maximumAttempts: t?.maximumAttempts ?? 5,
    nonRetryableErrorTypes: NON_RETRYABLE_ERRORS,
  };
}

/** Bookkeeping: listing tasks, selection statistics, plans and reports. */
export function shortActivity(t?: TimeoutOverrides): ActivityOptions {
  return { startToCloseTimeout: t?.shortMs ?? 5 * MINUTE, retry: retry(t) };
}

/**
 * LLM-heavy work on the CPU queue; these activities heartbeat between items, and one item may wait
 * out a request timeout and a retry of the given role's endpoint.
 */
export function longActivity(config: Config, role: LlmRoleName, t?: TimeoutOverrides): ActivityOptions {
  return {
    startToCloseTimeout: t?.longMs ?? 120 * MINUTE,
    heartbeatTimeout: t?.heartbeatMs ?? Math.max(10 * MINUTE, 2 * config.llm[role].timeoutMs + MINUTE),
    retry: retry(t),
  };
}

/** Rollout batches: a heartbeat follows every finished episode, so allow one full episode between them. */
export function rolloutActivity(config: Config, t?: TimeoutOverrides): ActivityOptions {
  const o = longActivity(config, 'policy', t);
  return {
    ...o,
    heartbeatTimeout: t?.heartbeatMs ?? Math.max(10 * MINUTE, config.rollouts.episodeTimeoutMs + 2 * MINUTE),
  };
}

/** Training and gate fitting on the GPU queue: long, heartbeating a resume point. */
export function gpuActivity(t?: TimeoutOverrides): ActivityOptions {
  return {
    taskQueue: TASK_QUEUE_GPU,
    startToCloseTimeout: t?.trainingMs ?? 24 * 60 * MINUTE,
    heartbeatTimeout: t?.heartbeatMs ?? 10 * MINUTE,
    retry: { ...retry(t), maximumAttempts: t?.maximumAttempts ?? 3 },
  };
}
