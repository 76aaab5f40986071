import { z } from 'zod';

/**
 * A small, verifiable pointer to bytes in the artifact store: what workflows pass around instead
 * of data (Temporal payloads stay far below 2 MB).
 */
export const ArtifactRefSchema = z.object({
  uri: z.string().min(1).describe('file:///abs/path or s3://bucket/key'),
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
  bytes: z.number().int().nonnegative(),
});
export type ArtifactRef = z.infer<typeof ArtifactRefSchema>;
