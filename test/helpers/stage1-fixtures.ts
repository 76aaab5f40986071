import { createHash } from 'node:crypto';
import { mkdtemp, mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseConfig, type Config, type ConfigInput } from '../../core/config.js';
import type { ArtifactRef, ArtifactStore } from '../../store/artifact-store.js';

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

/**
 * A minimal local-directory ArtifactStore (atomic temp + rename), a stand-in until the project's
 * store/local.ts lands; it implements the shared interface, so the activities under test are real.
 */
export function dirStore(root: string): ArtifactStore & { puts: string[] } {
  const puts: string[] = [];
  const abs = (key: string) => path.join(root, key);
  const refOf = (key: string, buf: Buffer): ArtifactRef => ({
    uri: `file://${abs(key)}`,
    sha256: createHash('sha256').update(buf).digest('hex'),
    bytes: buf.length,
  });
  const keyOf = (refOrKey: ArtifactRef | string) => {
    const s = typeof refOrKey === 'string' ? refOrKey : refOrKey.uri;
    return s.startsWith('file://') ? path.relative(root, s.slice(7)) : s;
  };
  const store: ArtifactStore & { puts: string[] } = {
    puts,
    async put(key, body) {
      const buf = Buffer.from(body);
      puts.push(key);
      await mkdir(path.dirname(abs(key)), { recursive: true });
      const tmp = `${abs(key)}.tmp-${process.pid}-${puts.length}`;
      await writeFile(tmp, buf);
      await rename(tmp, abs(key));
      return refOf(key, buf);
    },
    async putContent(prefix, body, ext = '') {
      const sha = createHash('sha256').update(Buffer.from(body)).digest('hex');
      return store.put(`${prefix}/${sha}${ext}`, body);
    },
    async get(refOrKey) {
      return readFile(abs(keyOf(refOrKey)));
    },
    async getText(refOrKey) {
      return (await store.get(refOrKey)).toString('utf8');
    },
    async getJson<T>(refOrKey: ArtifactRef | string) {
      return JSON.parse(await store.getText(refOrKey)) as T;
    },
    async stat(key) {
      try {
        await stat(abs(key));
      } catch {
        return undefined;
      }
      return refOf(key, await readFile(abs(key)));
    },
    async list(prefix) {
      const out: string[] = [];
      const walk = async (rel: string) => {
        let entries;
        try {
          entries = await readdir(abs(rel), { withFileTypes: true });
        } catch {
          return;
        }
        for (const e of entries) {
          const k = rel ? `${rel}/${e.name}` : e.name;
          if (e.isDirectory()) await walk(k);
          else if (!e.name.includes('.tmp-')) out.push(k);
        }
      };
      await walk('');
      return out.filter((k) => k.startsWith(prefix)).sort();
    },
    uri: (key) => `file://${abs(key)}`,
  };
  return store;
}
