import { parseArgs } from 'node:util';
import { createLlm, envLlm } from '../llm/client.js';
import { runEpisodes, type TaskSpec } from '../agent/rollout.js';
import { parseConfig } from '../core/config.js';
import { calibrationStats } from '../core/synthesis.js';
import type { Environment } from '../envs/environment.js';
import { isReferenceCapability, loadReferenceEnv } from '../envs/reference/index.js';
import { openEnvironment } from '../envs/registry.js';
import { startLlmServer } from '../infra/llm-server.js';

/**
 * The base SmolLM2 policy (embedded server, grammar-constrained actions) on a target env's split
 * or on a reference capability env's calibration seeds (groups × K from seed 3000, as check 6, calibration).
 * `--url` measures another OpenAI-compatible server instead, e.g. the trainer's served policy
 * (`python -m trace_trainer serve --model .cache/models/<gguf>.hf --constrained-decoding on`).
 *
 *   node --import tsx bench/showcase-base-rate.ts --env showcase-desk --split test --temperature 0
 *   node --import tsx bench/showcase-base-rate.ts --env exact_code_copying --groups 8 --k 4
 */
const { values: o } = parseArgs({
  options: {
    env: { type: 'string', default: 'showcase-desk' },
    split: { type: 'string', default: 'test' },
    temperature: { type: 'string', default: '0' },
    trials: { type: 'string', default: '1' },
    groups: { type: 'string', default: '8' },
    k: { type: 'string', default: '4' },
    parallel: { type: 'string', default: '2' },
    verbose: { type: 'boolean', default: false },
    url: { type: 'string' },
    model: { type: 'string', default: 'policy' },
  },
});
const num = (flag: string, v: string | undefined) => {
  const n = Number(v);
  if (!Number.isFinite(n) || n < 0)
    throw new Error(`--${flag}: expected a non-negative number, got ${JSON.stringify(v)}`);
  return n;
};
const temperature = num('temperature', o.temperature);
const parallel = num('parallel', o.parallel);

const server = o.url
  ? { baseURL: o.url, model: o.model!, close: async () => {} }
  : await startLlmServer({ port: 0, parallel, contextSize: 2048 * parallel });
try {
  const config = parseConfig({
    env: { name: o.env! },
    llm: {
      policy: {
        baseURL: server.baseURL,
        model: server.model,
        concurrency: parallel,
        maxTokens: 64,
        timeoutMs: 600_000,
      },
    },
  });
  const name = o.env!;
  const reference = isReferenceCapability(name);
  const env: Environment = reference
    ? await loadReferenceEnv(name)
    : await openEnvironment(config.env, { config, llm: envLlm(config) });
  let tasks: TaskSpec[];
  if (reference) {
    const seeds = Array.from({ length: num('groups', o.groups) }, (_, i) => 3000 + i);
    tasks = seeds.flatMap((seed) => Array.from({ length: num('k', o.k) }, (_, trial) => ({ seed, trial })));
  } else {
    const refs = (await env.listTasks()).filter((t) => o.split === 'all' || t.split === o.split);
    tasks = refs.flatMap((t) =>
      Array.from({ length: num('trials', o.trials) }, (_, trial) => ({ taskId: t.id, trial })),
    );
  }
  const started = Date.now();
  const trajs = await runEpisodes({
    env,
    llm: createLlm(config, 'policy'),
    tasks,
    concurrency: parallel,
    maxSteps: 6,
    maxErrors: 4,
    timeoutMs: 600_000,
    temperature,
    onEpisode: (t) => {
      const acts = t.messages
        .filter((m) => m.role === 'assistant')
        .map((m) =>
          m.tool_calls?.length
            ? m.tool_calls.map((c) => `${c.function.name}(${c.function.arguments})`).join(',')
            : `say(${JSON.stringify((m.content ?? '').slice(0, 60))})`,
        );
      const first = t.messages.find((m) => m.role === 'user')?.content ?? '';
      console.log(
        `${t.reward.toFixed(2)}\t${t.taskId}/t${t.trial}\t${t.termination}\tprompt ${t.usage.calls ? Math.round(t.usage.promptTokens / t.usage.calls) : 0} tok/turn\t${o.verbose ? `${first} → ` : ''}${acts.join(' → ')}`,
      );
    },
  });
  const passes = trajs.filter((t) => t.success).length;
  const mean = trajs.reduce((s, t) => s + t.reward, 0) / trajs.length;
  const firstPrompt = trajs.map((t) =>
    t.usage.promptTokens && t.usage.calls ? t.usage.promptTokens / t.usage.calls : 0,
  );
  console.log(
    `env ${env.info.name} (${reference ? `seeds 3000–${3000 + num('groups', o.groups) - 1} × K ${o.k}` : `split ${o.split}`}), T=${temperature}, n=${trajs.length}: passes ${passes} (${((passes / trajs.length) * 100).toFixed(1)}%), mean reward ${mean.toFixed(3)}, mean prompt tokens per turn ${(firstPrompt.reduce((a, b) => a + b, 0) / trajs.length).toFixed(0)}, ${((Date.now() - started) / 1000).toFixed(0)} s`,
  );
  if (reference) {
    const groups = [...new Set(trajs.map((t) => t.seed))].map((s) => trajs.filter((t) => t.seed === s));
    console.log(`calibration: ${JSON.stringify(calibrationStats(groups))}`);
  }
} finally {
  await server.close();
}
