import { mkdir, open, readdir, readFile, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { ArtifactRef } from '../core/artifact-ref.js';
import { BaseArtifactStore, checkKey, isTempName, sha256Hex, tempName, toBytes, verifyRef } from './base.js';

/**
 * The embedded default: artifacts as files under one directory. A write goes to a temp file in the
 * target's directory, is fsynced, then renamed over the target (and the directory fsynced), so a
 * reader sees the old bytes or the new bytes, never a partial file, and a crash leaves at most a
 * temp file that `list` ignores. Writing identical bytes again touches nothing.
 */
export class LocalArtifactStore extends BaseArtifactStore {
  readonly root: string;

  constructor(dir: string) {
    super();
    this.root = path.resolve(dir);
  }

  uri(key: string): string {
    return pathToFileURL(this.pathOf(key)).href;
  }

  async put(key: string, body: Uint8Array | string): Promise<ArtifactRef> {
    const file = this.pathOf(key);
    const bytes = toBytes(body);
    const ref: ArtifactRef = { uri: this.uri(key), sha256: sha256Hex(bytes), bytes: bytes.length };
    const existing = await readIfExists(file);
    if (existing && existing.equals(bytes)) return ref;

    const dir = path.dirname(file);
    await mkdir(dir, { recursive: true });
    const tmp = path.join(dir, tempName(path.basename(file)));
    try {
      const fh = await open(tmp, 'wx');
      try {
        await fh.writeFile(bytes);
        await fh.sync();
      } finally {
        await fh.close();
      }
      await rename(tmp, file);
    } catch (e) {
      await rm(tmp, { force: true });
      throw new Error(`artifact ${ref.uri}: write failed (${e instanceof Error ? e.message : e})`);
    }
    await syncDir(dir);
    return ref;
  }

  async get(refOrKey: ArtifactRef | string): Promise<Buffer> {
    const uri = typeof refOrKey === 'string' ? refOrKey : refOrKey.uri;
    const file = this.resolve(uri);
    const bytes = await readIfExists(file);
    if (!bytes) throw new Error(`artifact ${uri.includes('://') ? uri : this.uri(uri)}: not found`);
    return typeof refOrKey === 'string' ? bytes : verifyRef(refOrKey, bytes);
  }

  async stat(key: string): Promise<ArtifactRef | undefined> {
    const bytes = await readIfExists(this.pathOf(key));
    return bytes && { uri: this.uri(key), sha256: sha256Hex(bytes), bytes: bytes.length };
  }

  async list(prefix: string): Promise<string[]> {
    const slash = prefix.lastIndexOf('/');
    const startDir = slash < 0 ? this.root : this.pathOf(prefix.slice(0, slash));
    const keys: string[] = [];
    const walk = async (dir: string): Promise<void> => {
      let entries;
      try {
        entries = await readdir(dir, { withFileTypes: true });
      } catch (e) {
        if (isNotFound(e)) return;
        throw e;
      }
      for (const entry of entries) {
        const full = path.join(dir, entry.name);
        if (entry.isDirectory()) await walk(full);
        else if (entry.isFile() && !isTempName(entry.name)) {
          const key = path.relative(this.root, full).split(path.sep).join('/');
          if (key.startsWith(prefix)) keys.push(key);
        }
      }
    };
    await walk(startDir);
    return keys.sort();
  }

  private pathOf(key: string): string {
    return path.join(this.root, ...checkKey(key).split('/'));
  }

  /** A key of this store, or a file:// URI (refs may point at files outside the store's directory). */
  private resolve(keyOrUri: string): string {
    if (keyOrUri.startsWith('file://')) return fileURLToPath(keyOrUri);
    if (/^[a-z][a-z0-9+.-]*:\/\//i.test(keyOrUri))
      throw new Error(`artifact ${keyOrUri}: the local store reads only file:// URIs and keys`);
    return this.pathOf(keyOrUri);
  }
}

async function readIfExists(file: string): Promise<Buffer | undefined> {
  try {
    return await readFile(file);
  } catch (e) {
    if (isNotFound(e) || (e as NodeJS.ErrnoException).code === 'EISDIR') return undefined;
    throw e;
  }
}

/** Makes the rename itself durable: without it a power loss can forget the new directory entry. */
async function syncDir(dir: string): Promise<void> {
  const fh = await open(dir, 'r');
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

function isNotFound(e: unknown): boolean {
  const code = (e as NodeJS.ErrnoException).code;
  return code === 'ENOENT' || code === 'ENOTDIR';
}
