import path from 'node:path';
import type { Config } from '../core/config.js';
import type { ArtifactStore } from './artifact-store.js';
import { LocalArtifactStore } from './local.js';
import { S3ArtifactStore } from './s3.js';

export type { ArtifactStore } from './artifact-store.js';
export { ArtifactIntegrityError } from './base.js';
export { LocalArtifactStore } from './local.js';
export { S3ArtifactStore } from './s3.js';

/** The store a run's config names; a relative local dir resolves against `baseDir` (default: cwd). */
export function openStore(storeConfig: Config['store'], opts: { baseDir?: string } = {}): ArtifactStore {
  switch (storeConfig.kind) {
    case 'local':
      return new LocalArtifactStore(path.resolve(opts.baseDir ?? process.cwd(), storeConfig.dir));
    case 's3':
      return new S3ArtifactStore(storeConfig);
  }
}
