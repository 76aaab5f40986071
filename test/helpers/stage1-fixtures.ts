import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseConfig, type Config, type ConfigInput } from '../../core/config.js';

/** A config whose LLM roles point at a test server and whose store is a temp dir. */
export function testConfig(baseURL: string, dir: string, extra: Partial<ConfigInput> = {}): Config {
  const role = { baseURL, model: 'scripted-model', timeoutMs: 2_000, concurrency: 2 };
  return parseConfig({
    env: { name: 'toy-orders' },
    llm: { policy: role, analyst: role },
    store: { kind: 'local', dir },
    ...extra,
  });
}

export async function tempDir(prefix: string): Promise<{ dir: string; cleanup(): Promise<void> }> {
  const dir = await mkdtemp(path.join(tmpdir(), prefix));
  return { dir, cleanup: () => rm(dir, { recursive: true, force: true }) };
}
