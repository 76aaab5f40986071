/**
 * Sandbox costs: isolation probe, start-up (bundle + spawn + first /v1/info) per isolation level,
 * steps/s of the same env in-process vs over loopback HTTP vs through the sandbox (ratios), and the
 * runner's plain-JavaScript line MAC against Node's crypto.
 * Run: node --import tsx bench/sandbox.ts [--episodes N]
 */
import { createHmac, randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import type { Environment } from '../envs/environment.js';
import { bundleEnvModule } from '../envs/sandbox/bundle.js';
import { isolationIfAvailable, ISOLATION_LEVELS } from '../envs/sandbox/isolation.js';
import { sandboxIsolation, startSandboxedEnv } from '../envs/sandbox/index.js';
import { hmacSha256, utf8 } from '../envs/sandbox/hmac-sha256.js';
import { inspectInstance } from '../envs/sdk/index.js';
import { HttpEnvironment } from '../envs/protocol/client.js';
import { serveEnvironment } from '../envs/protocol/server.js';
import sdkEnv from '../test/fixtures/sandbox/sdk-env.js';

const MODULE = 'test/fixtures/sandbox/sdk-env.ts';
const episodesArg = process.argv.indexOf('--episodes');
const EPISODES = episodesArg > 0 ? Number(process.argv[episodesArg + 1]) : 200;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const ms = (x: number) => `${x.toFixed(1)} ms`;

/** Gold episodes: reset by seed, every gold action, evaluate, close. Returns steps/s and episodes/s. */
async function throughput(env: Environment) {
  const golds = [];
  for (let seed = 0; seed < 20; seed++) golds.push((await inspectInstance(env, seed)).gold);
  let steps = 0;
  const t0 = performance.now();
  for (let i = 0; i < EPISODES; i++) {
    const seed = i % golds.length;
    const ep = await env.reset({ seed });
    for (const action of golds[seed]) {
      await ep.step(action);
      steps++;
    }
    const info = await ep.evaluate(ep.initialMessages(), 'user_stop');
    if (!Number.isFinite(info.reward)) throw new Error('bad reward');
    await ep.close();
  }
  const secs = (performance.now() - t0) / 1000;
  return { stepsPerSec: steps / secs, episodesPerSec: EPISODES / secs, steps };
}

async function main() {
  let t = performance.now();
  const iso = await sandboxIsolation();
  console.log(`isolation: ${iso.level} (probe of all levels took ${ms(performance.now() - t)})`);

  // Each source differs (a trailing comment), so every bundle is a cache miss; then one cached hit.
  const dir = await mkdtemp(path.join(os.tmpdir(), 'trace-bench-'));
  const source = await readFile(MODULE, 'utf8');
  const bundleTimes: number[] = [];
  for (let i = 0; i < 5; i++) {
    t = performance.now();
    await bundleEnvModule({ source: `${source}\n// ${i}\n` }, path.join(dir, `b${i}.mjs`));
    bundleTimes.push(performance.now() - t);
  }
  t = performance.now();
  await bundleEnvModule({ source: `${source}\n// 0\n` }, path.join(dir, 'hit.mjs'));
  const hit = performance.now() - t;
  await rm(dir, { recursive: true, force: true });
  console.log(
    `bundle (esbuild, module + SDK + runner + zod): median ${ms(median(bundleTimes))}; cached (inputs re-hashed) ${ms(hit)}`,
  );

  for (const level of ISOLATION_LEVELS) {
    if (!(await isolationIfAvailable(level))) {
      console.log(`start-up [${level}]: not available here`);
      continue;
    }
    const starts: number[] = [];
    const closes: number[] = [];
    for (let i = 0; i < 5; i++) {
      t = performance.now();
      // A distinct source each time: start-up including a fresh bundle.
      const env = await startSandboxedEnv({
        source: `${source}\n// ${level} ${i}\n`,
        isolation: level,
        allowWeakIsolation: true,
      });
      starts.push(performance.now() - t);
      t = performance.now();
      await env.close();
      closes.push(performance.now() - t);
    }
    t = performance.now();
    const again = await startSandboxedEnv({
      source: `${source}\n// ${level} 0\n`,
      isolation: level,
      allowWeakIsolation: true,
    });
    const cachedStart = performance.now() - t;
    await again.close();
    console.log(
      `start-up [${level}]: median ${ms(median(starts))} (fresh bundle), ${ms(cachedStart)} (cached bundle), close ${ms(median(closes))}`,
    );
  }

  const inProc = await throughput(sdkEnv);
  const served = await serveEnvironment(sdkEnv);
  const overHttp = await throughput(await HttpEnvironment.connect(served.url));
  await served.close();
  const boxed = await startSandboxedEnv({ modulePath: MODULE });
  const sandboxed = await throughput(boxed);
  await boxed.close();
  // The default restarts the process every episodesPerProcess (32) episodes; one process for comparison.
  const single = await startSandboxedEnv({ modulePath: MODULE, limits: { episodesPerProcess: 1_000_000 } });
  const oneProcess = await throughput(single);
  await single.close();
  console.log(
    `in-process: ${inProc.stepsPerSec.toFixed(0)} steps/s, ${inProc.episodesPerSec.toFixed(0)} episodes/s (${inProc.steps} steps)`,
  );
  console.log(
    `over HTTP (loopback, serveEnvironment + HttpEnvironment): ${overHttp.stepsPerSec.toFixed(0)} steps/s (${(inProc.stepsPerSec / overHttp.stepsPerSec).toFixed(1)}x slower)`,
  );
  console.log(
    `sandbox [${iso.level}]: ${sandboxed.stepsPerSec.toFixed(0)} steps/s, ${sandboxed.episodesPerSec.toFixed(0)} episodes/s`,
  );
  console.log(
    `  ${boxed.processesStarted} processes (episodesPerProcess 32); in one process: ${oneProcess.stepsPerSec.toFixed(0)} steps/s, ${oneProcess.episodesPerSec.toFixed(0)} episodes/s`,
  );
  console.log(`ratio in-process / sandbox: ${(inProc.stepsPerSec / sandboxed.stepsPerSec).toFixed(1)}x steps/s`);
  console.log(`per step through the sandbox: ${(1000 / sandboxed.stepsPerSec).toFixed(3)} ms`);
  macCost();
}

/** The runner MACs each response line in plain JavaScript (hmac-sha256.ts); Node's crypto, which the worker checks with, as the baseline. */
function macCost() {
  const key = randomBytes(32);
  const mac = hmacSha256(key);
  for (const bytes of [2_000, 200_000]) {
    const line = JSON.stringify({ id: 1, status: 200, body: { content: 'x'.repeat(bytes) } });
    const runs = Math.max(20, 4_000_000 / bytes);
    const time = (f: () => string) => {
      f();
      const t0 = performance.now();
      for (let i = 0; i < runs; i++) f();
      return ((performance.now() - t0) * 1000) / runs;
    };
    const js = time(() => mac(utf8(line)));
    const node = time(() => createHmac('sha256', key).update(line).digest('hex'));
    console.log(
      `line MAC (${bytes} B): runner ${js.toFixed(1)} us, node crypto ${node.toFixed(1)} us (${(js / node).toFixed(1)}x)`,
    );
  }
}

await main();
