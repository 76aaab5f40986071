import { z } from 'zod';

/**
 * Limits of one sandboxed env process (envs/sandbox); every key is optional and defaults to
 * envs/sandbox's DEFAULT_LIMITS. Pure schema, so configs can carry it.
 */
const positiveInt = z.number().int().positive();
export const SandboxLimitsSchema = z
  .object({
    wallMs: positiveInt.describe('wall clock of one request'),
    startMs: positiveInt.describe('wall clock of start-up: module evaluation and the first /v1/info'),
    budgetMs: positiveInt.describe('wall clock requests may keep the sandbox busy, in total'),
    // At least 128: the sandboxed node alone is ~68 MiB resident, past 90% of 64, so any native
    // crash there read as the memory limit (rerun 72i).
    memoryMb: z.number().int().min(128).describe('V8 heap; the data segment gets 256 MiB more'),
    outputBytes: positiveInt.describe('logs in total, and any one response'),
    cpuSeconds: positiveInt.describe('CPU time over the sandbox lifetime (RLIMIT_CPU)'),
    maxProcesses: z.number().int().min(16).describe('threads of the sandbox uid (RLIMIT_NPROC)'),
    diskMb: positiveInt.describe('scratch space'),
    maxFiles: z.number().int().min(16).describe('files in the scratch space (bwrap level)'),
    idleRetireMs: positiveInt.describe(
      'a process with no open episode for this long takes no new ones (the next reset starts a fresh one)',
    ),
    episodesPerProcess: positiveInt.describe(
      'episodes (resets and forks) one sandbox process serves before a fresh one (new module instance, new scratch dir) takes the next',
    ),
  })
  .partial()
  .strict();
export type SandboxLimits = z.infer<typeof SandboxLimitsSchema>;
