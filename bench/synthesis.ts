/**
 * Stage 2 costs: validation wall time for one candidate (per check; check 6, calibration, against a scripted
 * policy server, so it measures our overhead, not an LLM), and gold-episode steps/s of a reference
 * env in-process vs sandboxed (ratio). Run: node --import tsx bench/synthesis.ts [--episodes N]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseConfig } from '../core/config.js';
import type { Environment } from '../envs/environment.js';
import { loadReferenceEnv, referenceSource } from '../envs/reference/index.js';
import { inspectInstance } from '../envs/sdk/index.js';
import { loadCandidate } from '../activities/synthesis/candidate.js';
import { goldPolicy, playPolicy, validateCandidate } from '../activities/synthesis/validate.js';
import { createLlm } from '../llm/client.js';
import { startScriptedLlm } from '../test/helpers/scripted-llm.js';
import { alternatingPolicy, GOOD_MANIFEST, GOOD_SOURCE } from '../test/fixtures/synthesis/scripts.js';

const arg = process.argv.indexOf('--episodes');
const EPISODES = arg > 0 ? Number(process.argv[arg + 1]) : 100;

async function goldThroughput(env: Environment): Promise<{ stepsPerSec: number; episodesPerSec: number }> {
  const golds = [];
  for (let seed = 0; seed < 20; seed++) golds.push((await inspectInstance(env, seed)).gold);
  let steps = 0;
  const t0 = performance.now();
  for (let i = 0; i < EPISODES; i++) {
    const r = await playPolicy(env, i % golds.length, goldPolicy(golds[i % golds.length]));
    if (r.reward < 0.99) throw new Error(`gold scored ${r.reward}`);
    steps += r.messages.filter((m) => m.role === 'assistant').length;
  }
  const secs = (performance.now() - t0) / 1000;
  return { stepsPerSec: steps / secs, episodesPerSec: EPISODES / secs };
}

async function main() {
  const policy = alternatingPolicy();
  const llm = await startScriptedLlm((req) => policy(req));
  const dir = mkdtempSync(path.join(tmpdir(), 'bench-synth-'));
  try {
    const config = parseConfig({
      env: { name: 'toy-orders' },
      store: { kind: 'local', dir },
      llm: { policy: { baseURL: llm.baseURL, model: 'scripted-model' } },
      synthesis: { calibration: { groups: 8, rolloutsPerGroup: 4, concurrency: 1 } },
    });
    for (const typecheck of [true, true, false]) {
      const t = performance.now();
      const { verdict } = await validateCandidate({
        source: GOOD_SOURCE,
        manifest: GOOD_MANIFEST,
        config: { ...config, synthesis: { ...config.synthesis, typecheck } },
        policy: createLlm(config, 'policy'),
      });
      const checks = verdict.checks.map((g) => `${g.check} ${g.passed ? 'ok' : 'FAIL'}`).join(', ');
      console.log(
        `validation of one candidate (sandbox, typecheck ${typecheck}): ${(performance.now() - t).toFixed(0)} ms [${checks}]`,
      );
    }
  } finally {
    await llm.close();
    rmSync(dir, { recursive: true, force: true });
  }

  const cap = 'structured_data_reasoning';
  const inProc = await goldThroughput(await loadReferenceEnv(cap));
  const t = performance.now();
  const sandboxed = await loadCandidate(await referenceSource(cap), 'sandbox');
  console.log(`sandbox start (bundle + spawn + describe): ${(performance.now() - t).toFixed(0)} ms`);
  try {
    const sb = await goldThroughput(sandboxed.env);
    console.log(
      `${cap} gold episodes, ${EPISODES}: in-process ${inProc.stepsPerSec.toFixed(0)} steps/s, sandboxed ${sb.stepsPerSec.toFixed(0)} steps/s; ratio in-process/sandboxed = ${(inProc.stepsPerSec / sb.stepsPerSec).toFixed(1)}×`,
    );
  } finally {
    await sandboxed.close();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
