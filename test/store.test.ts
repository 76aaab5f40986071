import { PutObjectCommand } from '@aws-sdk/client-s3';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import type { ArtifactStore } from '../store/artifact-store.js';
import { ArtifactIntegrityError, LocalArtifactStore, openStore, S3ArtifactStore } from '../store/index.js';
import { startMoto, type MotoServer } from './helpers/moto.js';

/**
 * One contract suite, run against both backends: the local directory and S3 through a real moto
 * server process on loopback.
 */
interface Backend {
  store: ArtifactStore;
  /** Changes the stored bytes of `key` behind the store's back (bit rot, a buggy writer). */
  corrupt(key: string, bytes: Buffer): Promise<void>;
  /** Every object or file physically present under the store (temp files included). */
  physicalObjects(): Promise<string[]>;
  close(): Promise<void>;
}

const sha = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');

async function openLocal(): Promise<Backend> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'trace-store-'));
  const store = openStore({ kind: 'local', dir: path.basename(dir) }, { baseDir: path.dirname(dir) });
  assert.ok(store instanceof LocalArtifactStore);
  assert.equal(store.root, dir);
  return {
    store,
    corrupt: (key, bytes) => writeFile(path.join(dir, key), bytes),
    physicalObjects: async () =>
      (await readdir(dir, { recursive: true, withFileTypes: true })).filter((e) => e.isFile()).map((e) => e.name),
    close: () => rm(dir, { recursive: true, force: true }),
  };
}

async function openS3(): Promise<Backend> {
  const moto: MotoServer = await startMoto();
  // The standard credential env vars, as a real deployment would set them; moto accepts any value.
  process.env.AWS_ACCESS_KEY_ID = 'testing';
  process.env.AWS_SECRET_ACCESS_KEY = 'testing';
  const store = new S3ArtifactStore({
    bucket: 'trace-test',
    prefix: 'team/a',
    endpoint: moto.endpoint,
    region: 'us-east-1',
    forcePathStyle: true,
    listPageSize: 2,
  });
  await store.ensureBucket();
  const raw = new S3ArtifactStore({ bucket: 'trace-test', endpoint: moto.endpoint, forcePathStyle: true });
  return {
    store,
    corrupt: async (key, bytes) => {
      const original = await store.stat(key);
      await store.client.send(
        new PutObjectCommand({
          Bucket: 'trace-test',
          Key: `team/a/${key}`,
          Body: bytes,
          Metadata: { sha256: original!.sha256 },
        }),
      );
    },
    physicalObjects: () => raw.list(''),
    close: async () => {
      store.client.destroy();
      raw.client.destroy();
      await moto.close();
    },
  };
}

for (const [name, open] of [
  ['local', openLocal],
  ['s3 (moto server)', openS3],
] as const) {
  describe(`artifact store contract: ${name}`, () => {
    let b: Backend;
    before(async () => {
      b = await open();
    });
    after(async () => {
      await b?.close();
    });

    test('put returns a ref that get, getText, getJson and stat agree with', async () => {
      const body = JSON.stringify({ hello: 'world', n: 1 });
      const ref = await b.store.put('runs/r1/summary.json', body);
      assert.deepEqual(ref, {
        uri: b.store.uri('runs/r1/summary.json'),
        sha256: sha(body),
        bytes: Buffer.byteLength(body),
      });
      assert.equal((await b.store.get(ref)).toString(), body);
      assert.equal(await b.store.getText(ref.uri), body);
      assert.deepEqual(await b.store.getJson('runs/r1/summary.json'), { hello: 'world', n: 1 });
      assert.deepEqual(await b.store.stat('runs/r1/summary.json'), ref);
    });

    test('a missing key has no stat and get names it', async () => {
      assert.equal(await b.store.stat('runs/r1/missing.json'), undefined);
      await assert.rejects(b.store.get('runs/r1/missing.json'), /missing\.json: not found/);
    });

    test('keys that could escape the store are rejected', async () => {
      for (const key of ['../evil', '/abs/path', 'a//b', 'a/./b', '']) {
        await assert.rejects(b.store.put(key, 'x'), /invalid artifact key/, key);
      }
    });

    test('list returns sorted keys under a prefix, across pages', async () => {
      for (const k of [
        'runs/r2/b.jsonl',
        'runs/r2/a.jsonl',
        'runs/r2/sub/c.jsonl',
        'runs/r20/x.jsonl',
        'runs/r3/y.jsonl',
      ]) {
        await b.store.put(k, k);
      }
      assert.deepEqual(await b.store.list('runs/r2/'), ['runs/r2/a.jsonl', 'runs/r2/b.jsonl', 'runs/r2/sub/c.jsonl']);
      assert.deepEqual(await b.store.list('runs/r2'), [
        'runs/r2/a.jsonl',
        'runs/r2/b.jsonl',
        'runs/r2/sub/c.jsonl',
        'runs/r20/x.jsonl',
      ]);
      assert.deepEqual(await b.store.list('runs/nothing/'), []);
    });

    test('putContent is content-addressed and idempotent', async () => {
      const body = Buffer.from('capability dictionary v1');
      const first = await b.store.putContent('runs/r4/dict', body, '.json');
      const again = await b.store.putContent('runs/r4/dict/', body, '.json');
      assert.deepEqual(again, first);
      assert.equal(first.uri, b.store.uri(`runs/r4/dict/${sha(body)}.json`));
      const other = await b.store.putContent('runs/r4/dict', 'capability dictionary v2', '.json');
      assert.notEqual(other.uri, first.uri);
      assert.deepEqual(
        await b.store.list('runs/r4/'),
        [`runs/r4/dict/${sha(body)}.json`, `runs/r4/dict/${sha('capability dictionary v2')}.json`].sort(),
      );
    });

    test('retrying the same put (also concurrently) leaves exactly one object', async () => {
      const body = 'rollout batch 7\n'.repeat(1000);
      const refs = await Promise.all([1, 2, 3, 4].map(() => b.store.put('runs/r5/batch-7.jsonl', body)));
      refs.push(await b.store.put('runs/r5/batch-7.jsonl', body));
      for (const r of refs) assert.deepEqual(r, refs[0]);
      assert.deepEqual(await b.store.list('runs/r5/'), ['runs/r5/batch-7.jsonl']);
      assert.equal(
        (await b.physicalObjects()).filter((n) => n.includes('batch-7')).length,
        1,
        'no temp files or copies remain',
      );
    });

    test('a new body for an existing key replaces it whole', async () => {
      await b.store.put('runs/r6/state.json', '{"step":1}');
      const ref = await b.store.put('runs/r6/state.json', '{"step":2,"more":true}');
      assert.equal(await b.store.getText('runs/r6/state.json'), '{"step":2,"more":true}');
      assert.deepEqual(await b.store.stat('runs/r6/state.json'), ref);
    });

    test('get verifies the ref: a wrong hash or corrupted bytes fail naming the URI', async () => {
      const ref = await b.store.put('runs/r7/labels.json', '{"labels":[]}');
      const forged = { ...ref, sha256: sha('something else') };
      await assert.rejects(
        b.store.get(forged),
        (e: Error) => e instanceof ArtifactIntegrityError && e.message.includes(ref.uri),
      );
      await b.corrupt('runs/r7/labels.json', Buffer.from('{"labels":[1]}'));
      await assert.rejects(
        b.store.get(ref),
        (e: Error) => e instanceof ArtifactIntegrityError && e.message.includes(ref.uri),
      );
    });

    test('a concurrent reader sees the old or the new bytes, never a partial object', async () => {
      const size = 1 << 20;
      const versions = ['a', 'b', 'c', 'd'].map((ch) => Buffer.alloc(size, ch));
      const hashes = new Set(versions.map((v) => sha(v)));
      await b.store.put('runs/r8/adapter.bin', versions[0]);
      let writing = true;
      const writer = (async () => {
        for (let i = 1; i <= 8; i++) await b.store.put('runs/r8/adapter.bin', versions[i % versions.length]);
        writing = false;
      })();
      let reads = 0;
      while (writing || reads < 3) {
        const got = await b.store.get('runs/r8/adapter.bin');
        assert.equal(got.length, size);
        assert.ok(hashes.has(sha(got)), 'read a mixture of two writes');
        reads++;
      }
      await writer;
      assert.ok(reads >= 3);
    });
  });
}

test('openStore builds an S3 store from config, and a local store reads file:// URIs of refs', async () => {
  const s3 = openStore({
    kind: 's3',
    bucket: 'bkt',
    prefix: 'p/',
    region: 'eu-west-1',
    forcePathStyle: true,
    endpoint: 'http://127.0.0.1:9',
  });
  assert.ok(s3 instanceof S3ArtifactStore);
  assert.equal(s3.uri('runs/x/a.json'), 's3://bkt/p/runs/x/a.json');
  await assert.rejects(s3.get('file:///tmp/x'), /reads only s3:\/\/ URIs/);
  const dir = await mkdtemp(path.join(os.tmpdir(), 'trace-store-'));
  try {
    const local = openStore({ kind: 'local', dir });
    const ref = await local.put('k/v.txt', 'v');
    assert.equal(fileURLToPath(ref.uri), path.join(dir, 'k/v.txt'));
    assert.equal(await new LocalArtifactStore(path.join(dir, 'elsewhere')).getText(ref), 'v');
    await assert.rejects(local.get('s3://bkt/k'), /reads only file:\/\/ URIs/);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
