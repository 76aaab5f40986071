import { z } from 'zod';
import { CapabilitySchema } from './capability.js';
import { VariantSpecSchema } from './evaluation.js';
import { SynthesisConfigSchema } from './synthesis.js';

/**
 * The one run configuration (YAML or JSON), validated at every boundary. Defaults follow the
 * TRACE paper and its official code; each section is owned by the stage that reads it.
 */
const LlmRoleSchema = z.object({
  baseURL: z.string().url().optional().describe('OpenAI-compatible endpoint; default: the embedded local server'),
  model: z.string().optional(),
  apiKeyEnv: z.string().default('OPENAI_API_KEY').describe('name of the env var holding the API key'),
  temperature: z.number().min(0).max(2).optional(),
  maxTokens: z.number().int().positive().optional(),
  concurrency: z.number().int().positive().default(2),
  timeoutMs: z.number().int().positive().default(120_000),
});
export type LlmRole = z.infer<typeof LlmRoleSchema>;

export const LLM_ROLES = ['policy', 'analyst', 'generator', 'userSimulator', 'judge'] as const;
export type LlmRoleName = (typeof LLM_ROLES)[number];

const StoreSchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('local'), dir: z.string().default('.trace/artifacts') }),
  z.object({
    kind: z.literal('s3'),
    bucket: z.string().min(1),
    prefix: z.string().default(''),
    endpoint: z.string().url().optional(),
    region: z.string().default('us-east-1'),
    forcePathStyle: z.boolean().default(false),
  }),
]);

export const ConfigSchema = z
  .object({
    name: z.string().min(1).default('trace-run'),
    env: z
      .object({
        name: z
          .string()
          .min(1)
          .describe('target environment, e.g. tau2-airline, tau2-retail, tau2-mock, toy-calculator, or http:<url>'),
        taskSet: z.enum(['current', 'legacy']).default('current'),
        trainSplit: z.string().default('train'),
        testSplit: z.string().default('test'),
        maxTasks: z.number().int().positive().optional().describe('cap on tasks used (for demos and smoke runs)'),
      })
      .strict(),
    llm: z
      .object({
        policy: LlmRoleSchema.prefault({}),
        analyst: LlmRoleSchema.prefault({}),
        generator: LlmRoleSchema.prefault({}),
        userSimulator: LlmRoleSchema.prefault({}),
        judge: LlmRoleSchema.prefault({}),
      })
      .strict()
      .prefault({}),
    store: StoreSchema.default({ kind: 'local', dir: '.trace/artifacts' }),
    rollouts: z
      .object({
        trialsPerTask: z.number().int().positive().default(1),
        maxSteps: z.number().int().positive().default(50),
        maxErrors: z.number().int().positive().default(10),
        episodeTimeoutMs: z.number().int().positive().default(600_000),
        batchSize: z.number().int().positive().default(8),
        maxConcurrentBatches: z.number().int().positive().default(4),
        temperature: z.number().min(0).max(2).default(1.0),
      })
      .strict()
      .prefault({}),
    analysis: z
      .object({
        delta: z.number().min(0).max(1).default(0.2).describe('contrastive gap threshold δ'),
        coverage: z.number().min(0).max(1).default(0.1).describe('failure coverage threshold ρ'),
        passes: z.number().int().positive().default(10).describe('labeling passes R'),
        minPassesSelected: z.number().int().positive().default(8).describe('keep if selected in ≥ K of R passes'),
        maxCapabilities: z.number().int().positive().default(12),
        maxRepairAttempts: z.number().int().nonnegative().default(2),
        maxTrajectoryChars: z.number().int().positive().default(12_000),
        examplesPerCapability: z.number().int().positive().default(5),
        requestedCapabilities: z
          .array(CapabilitySchema.strict())
          .default([])
          .describe(
            'capabilities to synthesize and train in addition to those stage 1 selects (a known weakness, a previous dictionary)',
          ),
      })
      .strict()
      .prefault({}),
    evaluation: z
      .object({
        trials: z
          .number()
          .int()
          .positive()
          .default(1)
          .describe('trials per held-out task; 1 with temperature 0 = greedy'),
        temperature: z.number().min(0).max(2).default(0),
        maxTasks: z.number().int().positive().optional().describe('cap on held-out tasks; default env.maxTasks'),
        batchSize: z.number().int().positive().default(8).describe('tasks per evaluation activity'),
        concurrency: z
          .number()
          .int()
          .positive()
          .optional()
          .describe(
            "episodes in flight per variant; default llm.policy.concurrency (the trainer's server decodes requests in flight together as one batch)",
          ),
        parallelVariants: z
          .number()
          .int()
          .positive()
          .default(1)
          .describe(
            'variants evaluated at once when evaluateRun serves them itself; on a CPU each server gets the cores shared out (torch threads = cores / this)',
          ),
        promptOnly: z
          .boolean()
          .default(false)
          .describe(
            'also evaluate the base with the selected (and requested) capabilities described in its system prompt',
          ),
        singleAdapters: z.boolean().default(false).describe('also evaluate each capability adapter alone'),
        variants: z
          .array(VariantSpecSchema)
          .default([])
          .describe('extra variants to evaluate, e.g. a served TRACE agent'),
        promotionMargin: z
          .number()
          .min(0)
          .max(1)
          .default(0.02)
          .describe('a retrained agent replaces the current one only if its pass rate is higher by this much'),
      })
      .strict()
      .prefault({}),
    synthesis: SynthesisConfigSchema.prefault({}),
    training: z
      .object({
        model: z
          .string()
          .default('.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf')
          .describe('base policy for the trainer: HF id, local dir or GGUF file'),
        tokenizer: z.string().optional(),
        python: z
          .string()
          .default('.venv/bin/python')
          .describe('interpreter with infra/requirements-trainer.txt installed'),
        lora: z
          .object({
            r: z.number().int().positive().default(16),
            alpha: z.number().positive().default(16),
            dropout: z.number().min(0).max(1).default(0),
          })
          .strict()
          .prefault({}),
        rolloutsPerGroup: z.number().int().min(2).default(16).describe('K rollouts per seed'),
        groupsPerIteration: z.number().int().positive().default(4).describe('G seeds per iteration'),
        iterations: z.number().int().positive().default(40),
        lr: z.number().positive().default(1e-5),
        clipLow: z.number().min(0).default(0.2),
        clipHigh: z.number().min(0).default(0.28),
        temperature: z
          .number()
          .gt(0)
          .max(2)
          .default(1.0)
          .describe('sampling temperature; the update scores softmax(logits / T), so it must be > 0'),
        constrainedDecoding: z
          .union([z.boolean(), z.literal('auto')])
          .default('auto')
          .describe(
            "sample every turn under the JSON action grammar (a message or a schema-valid call to one of the env's tools), as the embedded LLM server and served evaluation decode; 'auto' = on when the model's chat template has no tool format of its own (e.g. SmolLM2)",
          ),
        heldoutSeeds: z
          .number()
          .int()
          .min(0)
          .default(0)
          .describe(
            'seeds never trained on, scored before training and every heldoutEvery iterations (heldoutRollouts samples each): the held-out curve; 0 = off',
          ),
        heldoutEvery: z
          .number()
          .int()
          .positive()
          .default(1)
          .describe('iterations between held-out scores (the last iteration is always scored)'),
        heldoutRollouts: z
          .number()
          .int()
          .positive()
          .optional()
          .describe('samples per held-out seed; default rolloutsPerGroup'),
        microBatchSize: z
          .number()
          .int()
          .positive()
          .default(8)
          .describe(
            'rollouts per forward/backward of the update: memory only, the gradients accumulate to the same update',
          ),
        maxNewTokens: z.number().int().positive().default(256),
        maxTurns: z.number().int().positive().default(8),
        checkpointEvery: z.number().int().positive().default(5),
        seed: z.number().int().default(0),
        device: z.string().default('auto').describe("'auto' = CUDA when present, else CPU"),
        resampleGroups: z
          .number()
          .int()
          .min(0)
          .default(0)
          .describe(
            'DAPO dynamic sampling: up to this many extra groups per iteration, from fresh seeds, replace zero-variance groups (0 = off, as the official code)',
          ),
        policyServer: z
          .object({
            baseURL: z
              .string()
              .url()
              .describe(
                'vLLM with --enable-lora and VLLM_ALLOW_RUNTIME_LORA_UPDATING=True, or `python -m trace_trainer serve --enable-lora`',
              ),
            loraDir: z
              .string()
              .min(1)
              .describe('where the trainer writes each adapter version; the server must be able to read it'),
            serverLoraDir: z
              .string()
              .min(1)
              .optional()
              .describe('loraDir as the server sees it, when mounted elsewhere there'),
            apiKeyEnv: z.string().optional().describe('name of the env var holding the server API key'),
            logprobs: z
              .enum(['raw', 'processed'])
              .default('raw')
              .describe(
                "what the server's token log-probs are of: 'raw' log-softmax(logits) (vLLM's default) or 'processed', the tempered distribution sampled from (vLLM --logprobs-mode processed_logprobs); truncated importance sampling needs the latter unless temperature is 1",
              ),
          })
          .strict()
          .optional()
          .describe(
            'roll out through this OpenAI-compatible server (the adapter hot-loaded after every update) instead of in the trainer process',
          ),
      })
      .strict()
      .prefault({}),
    gate: z
      .object({
        lambdaLB: z.number().min(0).default(0.05).describe('load-balance weight λ_LB'),
        steps: z.number().int().positive().default(100),
        lr: z.number().positive().default(1e-3),
        batchSize: z.number().int().positive().default(4),
        goldDemonstrations: z
          .number()
          .int()
          .min(0)
          .default(0)
          .describe(
            "per capability, gold solutions replayed through its env (verified by its verifier) added to the gate data; 0 = only the policy's successful trajectories, as in the paper",
          ),
      })
      .strict()
      .prefault({}),
    stages: z
      .object({
        synthesis: z.boolean().default(true),
        training: z.boolean().default(true),
        gate: z.boolean().default(true),
        evaluation: z.boolean().default(true),
      })
      .strict()
      .prefault({}),
  })
  .strict()
  .superRefine((c, ctx) => {
    if (c.synthesis.maxAttempts === 0 && !c.synthesis.allowReferenceFallback) {
      ctx.addIssue({
        code: 'custom',
        path: ['synthesis', 'maxAttempts'],
        message: 'is 0 (no generator attempt): set synthesis.allowReferenceFallback so the reference library is used',
      });
    }
    if (c.analysis.minPassesSelected > c.analysis.passes) {
      ctx.addIssue({
        code: 'custom',
        path: ['analysis', 'minPassesSelected'],
        message: `must be ≤ analysis.passes (${c.analysis.passes})`,
      });
    }
  });
export type Config = z.infer<typeof ConfigSchema>;
export type ConfigInput = z.input<typeof ConfigSchema>;

/** One line naming the first bad field and what was expected, for CLI errors. */
export function formatConfigError(err: z.ZodError, source = 'config'): string {
  const issue = err.issues[0];
  const path = issue.path.length ? issue.path.join('.') : '(root)';
  return `${source}: ${path}: ${issue.message}`;
}

export function parseConfig(raw: unknown, source = 'config'): Config {
  const r = ConfigSchema.safeParse(raw);
  if (!r.success) throw new ConfigError(formatConfigError(r.error, source));
  return r.data;
}

export class ConfigError extends Error {
  override name = 'ConfigError';
}
