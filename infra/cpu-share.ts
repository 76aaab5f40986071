import { execFileSync } from 'node:child_process';
import os from 'node:os';

/**
 * How the trace-gpu worker shares the machine between trainer processes. One per GPU; on a
 * CPU-only machine two (when it has ≥ 2 cores), each on half of the cores: one trainer keeps a
 * 2-core machine ~1.4 cores busy (sampling steps are small), two keep it at ~2.
 */

let gpus: number | undefined;

/** GPUs visible to this process: TRACE_GPU_COUNT, else `nvidia-smi -L` (0 when it is missing). */
export function gpuCount(env: NodeJS.ProcessEnv = process.env): number {
  if (env.TRACE_GPU_COUNT) return Math.max(1, Number(env.TRACE_GPU_COUNT) || 1);
  if (gpus === undefined) {
    try {
      const out = execFileSync('nvidia-smi', ['-L'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
      gpus = out.split('\n').filter((l) => l.startsWith('GPU ')).length;
    } catch {
      gpus = 0;
    }
  }
  return gpus;
}

/** Concurrent trainers (GRPO, gate): one per GPU; without one TRACE_CPU_TRAINERS, default min(2, cores). */
export function trainerSlots(env: NodeJS.ProcessEnv = process.env): number {
  const n = gpuCount(env);
  if (n > 0) return n;
  if (env.TRACE_CPU_TRAINERS) return Math.max(1, Number(env.TRACE_CPU_TRAINERS) || 1);
  return Math.min(2, os.availableParallelism());
}

/**
 * The environment that gives a torch process its share of the cores when `shares` run at once
 * (OMP_NUM_THREADS = cores / shares); nothing on a GPU machine or where the user set it.
 */
export function torchThreadsEnv(shares: number, env: NodeJS.ProcessEnv = process.env): Record<string, string> {
  if (env.OMP_NUM_THREADS || gpuCount(env) > 0) return {};
  return { OMP_NUM_THREADS: String(Math.max(1, Math.floor(os.availableParallelism() / Math.max(1, shares)))) };
}
