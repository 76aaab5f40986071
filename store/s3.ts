import {
  CreateBucketCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import type { ArtifactRef } from '../core/artifact-ref.js';
import { ArtifactIntegrityError, BaseArtifactStore, checkKey, sha256Hex, toBytes, verifyRef } from './base.js';

/**
 * Artifacts in any S3-compatible object store (AWS, MinIO, R2, moto). A PutObject is atomic, so a
 * reader sees the whole old object or the whole new one. Each object carries its sha256 as user
 * metadata: a retried put of the same bytes is skipped after a HEAD, and every read is verified
 * (against the ref when given, else against that metadata). Credentials come from the SDK's
 * standard chain (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, profiles, roles).
 */
export interface S3StoreOptions {
  bucket: string;
  /** Key prefix inside the bucket ('' = bucket root). */
  prefix?: string;
  endpoint?: string;
  region?: string;
  forcePathStyle?: boolean;
  /** Keys per ListObjectsV2 page (S3's maximum and default is 1000). */
  listPageSize?: number;
  /** An existing client (its endpoint/region/credentials win over the fields above). */
  client?: S3Client;
}

const SHA_META = 'sha256';

export class S3ArtifactStore extends BaseArtifactStore {
  readonly bucket: string;
  readonly prefix: string;
  readonly client: S3Client;
  private readonly listPageSize?: number;

  constructor(opts: S3StoreOptions) {
    super();
    this.listPageSize = opts.listPageSize;
    this.bucket = opts.bucket;
    this.prefix = (opts.prefix ?? '').replace(/^\/+|\/+$/g, '');
    this.client =
      opts.client ??
      new S3Client({
        region: opts.region ?? 'us-east-1',
        endpoint: opts.endpoint,
        forcePathStyle: opts.forcePathStyle ?? false,
        // Many S3-compatible servers reject the SDK's default CRC trailers; integrity is our sha256.
        requestChecksumCalculation: 'WHEN_REQUIRED',
        responseChecksumValidation: 'WHEN_REQUIRED',
      });
  }

  uri(key: string): string {
    return `s3://${this.bucket}/${this.objectKey(key)}`;
  }

  /** Creates the bucket when it does not exist (embedded MinIO/moto set-ups; real buckets are provisioned). */
  async ensureBucket(): Promise<void> {
    try {
      await this.client.send(new HeadBucketCommand({ Bucket: this.bucket }));
    } catch (e) {
      if (!isNotFound(e)) throw e;
      await this.client.send(new CreateBucketCommand({ Bucket: this.bucket }));
    }
  }

  async put(key: string, body: Uint8Array | string): Promise<ArtifactRef> {
    const objectKey = this.objectKey(key);
    const bytes = toBytes(body);
    const ref: ArtifactRef = { uri: this.uri(key), sha256: sha256Hex(bytes), bytes: bytes.length };
    const head = await this.head(this.bucket, objectKey);
    if (head?.sha256 === ref.sha256 && head.bytes === ref.bytes) return ref;
    await this.client.send(
      new PutObjectCommand({
        Bucket: this.bucket,
        Key: objectKey,
        Body: bytes,
        ContentLength: bytes.length,
        Metadata: { [SHA_META]: ref.sha256 },
      }),
    );
    return ref;
  }

  async get(refOrKey: ArtifactRef | string): Promise<Buffer> {
    const uri = typeof refOrKey === 'string' ? this.toUri(refOrKey) : refOrKey.uri;
    const { bucket, key } = parseS3Uri(uri);
    let res;
    try {
      res = await this.client.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
    } catch (e) {
      if (isNotFound(e)) throw new Error(`artifact ${uri}: not found`);
      throw e;
    }
    const bytes = Buffer.from(await res.Body!.transformToByteArray());
    if (typeof refOrKey !== 'string') return verifyRef(refOrKey, bytes);
    const expected = res.Metadata?.[SHA_META];
    if (expected && expected !== sha256Hex(bytes)) {
      throw new ArtifactIntegrityError(`artifact ${uri}: content does not match its stored sha256 ${expected}`);
    }
    return bytes;
  }

  async stat(key: string): Promise<ArtifactRef | undefined> {
    const objectKey = this.objectKey(key);
    const head = await this.head(this.bucket, objectKey);
    if (!head) return undefined;
    if (head.sha256) return { uri: this.uri(key), sha256: head.sha256, bytes: head.bytes };
    // Written by another tool without our metadata: hash it once to build the ref.
    const bytes = await this.get(key);
    return { uri: this.uri(key), sha256: sha256Hex(bytes), bytes: bytes.length };
  }

  async list(prefix: string): Promise<string[]> {
    const base = this.prefix ? `${this.prefix}/` : '';
    const keys: string[] = [];
    let token: string | undefined;
    do {
      const page = await this.client.send(
        new ListObjectsV2Command({
          Bucket: this.bucket,
          Prefix: base + prefix,
          ContinuationToken: token,
          MaxKeys: this.listPageSize,
        }),
      );
      for (const o of page.Contents ?? []) if (o.Key) keys.push(o.Key.slice(base.length));
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
    return keys.sort();
  }

  private objectKey(key: string): string {
    checkKey(key);
    return this.prefix ? `${this.prefix}/${key}` : key;
  }

  private toUri(keyOrUri: string): string {
    if (keyOrUri.startsWith('s3://')) return keyOrUri;
    if (/^[a-z][a-z0-9+.-]*:\/\//i.test(keyOrUri))
      throw new Error(`artifact ${keyOrUri}: the S3 store reads only s3:// URIs and keys`);
    return this.uri(keyOrUri);
  }

  private async head(bucket: string, key: string): Promise<{ sha256?: string; bytes: number } | undefined> {
    try {
      const h = await this.client.send(new HeadObjectCommand({ Bucket: bucket, Key: key }));
      return { sha256: h.Metadata?.[SHA_META], bytes: h.ContentLength ?? 0 };
    } catch (e) {
      if (isNotFound(e)) return undefined;
      throw e;
    }
  }
}

export function parseS3Uri(uri: string): { bucket: string; key: string } {
  const m = /^s3:\/\/([^/]+)\/(.+)$/.exec(uri);
  if (!m) throw new Error(`artifact ${uri}: expected s3://bucket/key`);
  return { bucket: m[1], key: m[2] };
}

function isNotFound(e: unknown): boolean {
  const err = e as { name?: string; $metadata?: { httpStatusCode?: number } };
  return (
    err?.$metadata?.httpStatusCode === 404 ||
    err?.name === 'NoSuchKey' ||
    err?.name === 'NotFound' ||
    err?.name === 'NoSuchBucket'
  );
}
