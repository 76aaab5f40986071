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
 * Without --base-url it starts its own server on an ephemeral port (sequences = --parallel), once
 * with the sequences in one llama.cpp context and once split over two single-threaded contexts
 * (the server's default), and prints the second's tokens/s as a ratio of the first's.
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

type Level = { concurrency: number; rps: number; tps: number };

async function measure(baseURL: string, label: string, inProcess: boolean): Promise<Level[]> {
  const client = new OpenAI({ baseURL, apiKey: 'unused', maxRetries: 0, timeout: 600_000 });
  const model = (await client.models.list()).data[0].id;
  const ask = async (i: number) => {
    const r = await client.chat.completions.create({
      model,
      messages: [
        { role: 'system', content: 'You are a customer-service agent for an airline. Be brief.' },
        {
          role: 'user',
          content: `Request ${i}: I want to change my flight to next Tuesday. What do you need from me?`,
        },
      ],
      max_tokens: maxTokens,
      temperature: 0.7,
      seed: i,
    });
    return r.usage!.completion_tokens;
  };
  await ask(-1);
  console.log(`model ${model} at ${baseURL} (${label}); ${requests} requests per level, max_tokens ${maxTokens}`);
  console.log('concurrency  req/s   tok/s   req/s ratio  tok/s ratio  tok/cpu-s');
  const levels: Level[] = [];
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
    const level = { concurrency, rps: requests / seconds, tps: tokens / seconds };
    const base = levels[0] ?? level;
    levels.push(level);
    console.log(
      `${String(concurrency).padStart(11)}  ${level.rps.toFixed(2).padStart(5)}  ${level.tps.toFixed(1).padStart(6)}  ${(level.rps / base.rps).toFixed(2).padStart(11)}  ${(level.tps / base.tps).toFixed(2).padStart(11)}  ${inProcess ? (tokens / cpuSeconds).toFixed(1).padStart(9) : 'n/a'}`,
    );
  }
  return levels;
}

if (values['base-url']) {
  await measure(values['base-url'], 'external server', false);
} else {
  const byContexts: Level[][] = [];
  for (const contexts of [1, 2]) {
    const server = await startLlmServer({ port: 0, parallel: Number(values.parallel), contexts });
    try {
      byContexts.push(await measure(server.baseURL, `${values.parallel} sequences in ${contexts} context(s)`, true));
    } finally {
      await server.close();
    }
  }
  const [one, two] = byContexts;
  console.log(
    `tok/s, 2 contexts / 1 context: ${one.map((l, i) => `concurrency ${l.concurrency} ${(two[i].tps / l.tps).toFixed(2)}x`).join(', ')}`,
  );
}
