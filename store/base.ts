import { createHash } from 'node:crypto';
import type { ArtifactStore } from './artifact-store.js';
import type { ArtifactRef } from '../core/artifact-ref.js';

/** What both backends share: key rules, hashing, integrity checks and the derived read/write helpers. */
export class ArtifactIntegrityError extends Error {
  override name = 'ArtifactIntegrityError';
}

export function sha256Hex(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

export function toBytes(body: Uint8Array | string): Buffer {
  return typeof body === 'string'
    ? Buffer.from(body, 'utf8')
    : Buffer.from(body.buffer, body.byteOffset, body.byteLength);
}

const TEMP_MARKER = '.~tmp.';

/** Keys are relative '/'-separated paths without empty, '.' or '..' segments (they must not escape the store). */
export function checkKey(key: string, field = 'key'): string {
  const bad =
    key.length === 0 ||
    key.startsWith('/') ||
    key.includes('\\') ||
    key.includes(TEMP_MARKER) ||
    /[\x00-\x1f]/.test(key) ||
    key.split('/').some((seg) => seg === '' || seg === '.' || seg === '..');
  if (bad)
    throw new Error(
      `${field}: invalid artifact key ${JSON.stringify(key)} (relative '/'-separated path, no empty, '.' or '..' segments)`,
    );
  return key;
}

export function isTempName(name: string): boolean {
  return name.includes(TEMP_MARKER);
}

export function tempName(base: string): string {
  return `${base}${TEMP_MARKER}${process.pid}.${Math.random().toString(36).slice(2, 10)}`;
}

export function contentKey(prefix: string, sha256: string, ext = ''): string {
  const p = prefix.replace(/\/+$/, '');
  return p ? `${p}/${sha256}${ext}` : `${sha256}${ext}`;
}

export function verifyRef(ref: ArtifactRef, bytes: Buffer): Buffer {
  const got = sha256Hex(bytes);
  if (got !== ref.sha256 || bytes.length !== ref.bytes) {
    throw new ArtifactIntegrityError(
      `artifact ${ref.uri}: content does not match its ref (expected sha256 ${ref.sha256}, ${ref.bytes} bytes; got ${got}, ${bytes.length} bytes)`,
    );
  }
  return bytes;
}

export abstract class BaseArtifactStore implements ArtifactStore {
  abstract put(key: string, body: Uint8Array | string): Promise<ArtifactRef>;
  abstract get(refOrKey: ArtifactRef | string): Promise<Buffer>;
  abstract stat(key: string): Promise<ArtifactRef | undefined>;
  abstract list(prefix: string): Promise<string[]>;
  abstract uri(key: string): string;

  putContent(prefix: string, body: Uint8Array | string, ext = ''): Promise<ArtifactRef> {
    const bytes = toBytes(body);
    return this.put(contentKey(prefix, sha256Hex(bytes), ext), bytes);
  }

  async getText(refOrKey: ArtifactRef | string): Promise<string> {
    return (await this.get(refOrKey)).toString('utf8');
  }

  async getJson<T = unknown>(refOrKey: ArtifactRef | string): Promise<T> {
    const text = await this.getText(refOrKey);
    try {
      return JSON.parse(text) as T;
    } catch (e) {
      const where = typeof refOrKey === 'string' ? refOrKey : refOrKey.uri;
      throw new Error(`artifact ${where}: not valid JSON (${e instanceof Error ? e.message : e})`);
    }
  }
}
