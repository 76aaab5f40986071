/**
 * What the verifier check's mutation escapes (check 5, `synthesis.maxMutationEscapes`) measure on
 * honest verifiers and on noisy ones. For every reference env (envs/reference, the showcase's
 * capability envs included) and the stage-2 test fixture, in process: RUNS runs of checkVerifier
 * with the default config (20 fresh random seeds each), reporting the required classes, their
 * plays and escapes; then the same envs with reward noise (a share p of the trajectories the
 * honest verifier scores below 1, chosen by a hash of the trajectory, so the same in every replay,
 * score 1) at p = 10 % and 5 %, reporting how many runs pass and the binomial pass probability
 * P[escapes ≤ maxMutationEscapes] for the median plays of a run.
 * Run: node --import tsx bench/mutation-escapes.ts [--runs N]
 */
import { createHash } from 'node:crypto';
import { batchShapeOf, checkVerifier } from '../activities/synthesis/validate.js';
import { parseConfig } from '../core/config.js';
import { SynthesisConfigSchema, type CheckResult } from '../core/synthesis.js';
import type { Environment, Episode } from '../envs/environment.js';
import { REFERENCE_ENVS, loadReferenceEnv, type ReferenceCapability } from '../envs/reference/index.js';
import fixture from '../test/fixtures/synthesis/good-env.js';

const runsArg = process.argv.indexOf('--runs');
const RUNS = runsArg > 0 ? Number(process.argv[runsArg + 1]) : 5;
const config = SynthesisConfigSchema.parse({});
// The trainer's default batches (4 seeds × 16 copies), which check 5 plays in.
const shape = batchShapeOf(parseConfig({ env: { name: 'toy-orders' } }));

/** The env with a reward of 1 for a hash-chosen share `p` of the trajectories it scores below 1. */
function noisy(env: Environment, p: number): Environment {
  const wrap = (ep: Episode): Episode => ({
    ...ep,
    id: ep.id,
    taskId: ep.taskId,
    initialMessages: () => ep.initialMessages(),
    step: (a, o) => ep.step(a, o),
    fork: async () => wrap(await ep.fork()),
    close: () => ep.close(),
    evaluate: async (messages, termination, o) => {
      const r = await ep.evaluate(messages, termination, o);
      const h = createHash('sha256').update(JSON.stringify(messages)).digest().readUInt32BE(0) / 2 ** 32;
      return r.reward < 1 && h < p ? { ...r, reward: 1 } : r;
    },
  });
  return Object.assign(Object.create(env) as Environment, {
    reset: async (...a: Parameters<Environment['reset']>) => wrap(await env.reset(...a)),
  });
}

/** P[Binomial(n, p) ≤ k]. */
function binomialCdf(n: number, p: number, k: number): number {
  let term = (1 - p) ** n;
  let sum = term;
  for (let i = 1; i <= k; i++) {
    term *= ((n - i + 1) / i) * (p / (1 - p));
    sum += term;
  }
  return sum;
}

const envs: [string, Environment][] = [['test fixture (good-env)', fixture as unknown as Environment]];
for (const cap of Object.keys(REFERENCE_ENVS) as ReferenceCapability[])
  envs.push([cap, (await loadReferenceEnv(cap)) as unknown as Environment]);

console.log(
  `honest verifiers: ${RUNS} runs × ${config.seeds.verifier} seeds, maxMutationEscapes ${config.maxMutationEscapes}`,
);
console.log('| env | required classes | plays per run | escapes per run | runs passed |');
console.log('|---|---|---|---|---|');
const plays = new Map<string, number[]>();
for (const [name, env] of envs) {
  const rows: CheckResult[] = [];
  for (let i = 0; i < RUNS; i++) rows.push(await checkVerifier(env, config, shape));
  plays.set(
    name,
    rows.map((r) => r.metrics.requiredMutationPlays),
  );
  const col = (k: string) => rows.map((r) => r.metrics[k]).join(' / ');
  const failed = rows.filter((r) => !r.passed).map((r) => r.reason);
  console.log(
    `| ${name} | ${col('requiredClasses')} | ${col('requiredMutationPlays')} | ${col('mutationEscapes')} | ${RUNS - failed.length}/${RUNS} |`,
  );
  for (const f of failed.slice(0, 2)) console.log(`  failed: ${f}`);
}

for (const p of [0.1, 0.05]) {
  console.log(
    `\nnoise ${p * 100} %: runs passed, and the binomial pass probability P[escapes ≤ ${config.maxMutationEscapes}] for the median plays`,
  );
  console.log('| env | runs passed | median plays | P[pass] |');
  console.log('|---|---|---|---|');
  for (const [name, env] of envs) {
    let passed = 0;
    for (let i = 0; i < RUNS; i++) if ((await checkVerifier(noisy(env, p), config, shape)).passed) passed++;
    const ps = [...plays.get(name)!].sort((a, b) => a - b);
    const n = ps[Math.floor(ps.length / 2)];
    console.log(
      `| ${name} | ${passed}/${RUNS} | ${n} | ${binomialCdf(n, p, config.maxMutationEscapes).toExponential(2)} |`,
    );
  }
}
