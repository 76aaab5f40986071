import type { ArtifactRef } from '../core/artifact-ref.js';

/**
 * One interface, two backends (local directory, S3 API). Writes are atomic (temp + rename, or a
 * single PUT / completed multipart upload) and idempotent: writing the same key with the same bytes
 * again returns the same ref, so a retried activity never duplicates or corrupts an artifact.
 */
export interface ArtifactStore {
  /** Writes bytes under `key` (relative, '/'-separated) and returns its ref. */
  put(key: string, body: Uint8Array | string): Promise<ArtifactRef>;
  /** Content-addressed write: the key is `${prefix}/${sha256}${ext}`. */
  putContent(prefix: string, body: Uint8Array | string, ext?: string): Promise<ArtifactRef>;
  /** Reads the bytes of a ref (verifying sha256) or of a bare URI/key. */
  get(refOrKey: ArtifactRef | string): Promise<Buffer>;
  getText(refOrKey: ArtifactRef | string): Promise<string>;
  getJson<T = unknown>(refOrKey: ArtifactRef | string): Promise<T>;
  /** The ref of an existing key, or undefined: lets a retried activity skip finished work. */
  stat(key: string): Promise<ArtifactRef | undefined>;
  /** Keys under a prefix, sorted. */
  list(prefix: string): Promise<string[]>;
  /** The URI a key has in this store. */
  uri(key: string): string;
}
