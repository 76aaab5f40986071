import OpenAI from 'openai';
import { parseArgs } from 'node:util';
import { startLlmServer } from '../infra/llm-server.js';

/**
 * Chat-completions throughput of the embedded LLM server at concurrency 1, 2, 4, 8: requests/s and
 * completion tokens/s, with ratios against concurrency 1. With the server in this process it also
 * prints completion tokens per CPU-second, which stays meaningful on a machine shared with other
 * busy processes (wall-clock rates there mostly measure the contention). Each request is a short agent-style turn
 * (system prompt + user message, fixed max_tokens); a warm-up request runs first.
 *
 *   node --import tsx bench/llm-throughput.ts [--requests 16] [--max-tokens 32] [--parallel 4] [--base-url URL]
 *
 * Without --base-url it starts its own server on an ephemeral port (sequences = --parallel).
 */
const { values } = parseArgs({
  options: {
    requests: { type: 'string', default: '16' },
    'max-tokens': { type: 'string', default: '32' },
    parallel: { type: 'string', default: '4' },
    'base-url': { type: 'string' },
  },
});
const requests = Number(values.requests);
const maxTokens = Number(values['max-tokens']);

const server = values['base-url'] ? undefined : await startLlmServer({ port: 0, parallel: Number(values.parallel) });
const baseURL = values['base-url'] ?? server!.baseURL;
const client = new OpenAI({ baseURL, apiKey: 'unused', maxRetries: 0, timeout: 600_000 });
const model = (await client.models.list()).data[0].id;

const ask = async (i: number) => {
  const r = await client.chat.completions.create({
    model,
    messages: [
      { role: 'system', content: 'You are a customer-service agent for an airline. Be brief.' },
      { role: 'user', content: `Request ${i}: I want to change my flight to next Tuesday. What do you need from me?` },
    ],
    max_tokens: maxTokens,
    temperature: 0.7,
    seed: i,
  });
  return r.usage!.completion_tokens;
};

await ask(-1);
console.log(
  `model ${model} at ${baseURL}; ${requests} requests per level, max_tokens ${maxTokens}, server sequences ${server ? values.parallel : 'unknown'}`,
);
console.log('concurrency  req/s   tok/s   req/s ratio  tok/s ratio  tok/cpu-s');
let base: { rps: number; tps: number } | undefined;
for (const concurrency of [1, 2, 4, 8]) {
  let next = 0;
  let tokens = 0;
  const start = performance.now();
  const cpuStart = process.cpuUsage();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < requests) {
        const n = await ask(next++); // not `tokens += await …`: that reads `tokens` before the await
        tokens += n;
      }
    }),
  );
  const seconds = (performance.now() - start) / 1000;
  const cpu = process.cpuUsage(cpuStart);
  const cpuSeconds = (cpu.user + cpu.system) / 1e6;
  const rps = requests / seconds;
  const tps = tokens / seconds;
  base ??= { rps, tps };
  console.log(
    `${String(concurrency).padStart(11)}  ${rps.toFixed(2).padStart(5)}  ${tps.toFixed(1).padStart(6)}  ${(rps / base.rps).toFixed(2).padStart(11)}  ${(tps / base.tps).toFixed(2).padStart(11)}  ${server ? (tokens / cpuSeconds).toFixed(1).padStart(9) : 'n/a'}`,
  );
}
await server?.close();
