import { readFileSync } from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import { z } from 'zod';
import { ArtifactRefSchema } from '../../core/artifact-ref.js';
import { ConfigError, parseConfig, type Config } from '../../core/config.js';
import { knownEnvironments } from '../../envs/registry.js';
import type { ImportedRollouts } from '../../workflows/types.js';
import { CliError } from './common.js';

/**
 * The input files commands take (a run config, imported rollouts), read and validated. A module
 * of its own, imported by a command when it runs: the schemas are most of the code a `trace` start
 * would otherwise load (`trace --help` needs none of them).
 */

/** Reads and validates a config file; throws ConfigError with `file: field: problem`. */
export function loadConfigFile(file: string): Config {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError(`${file}: cannot read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
  let raw: unknown;
  try {
    raw = /\.json$/i.test(file) ? JSON.parse(text) : YAML.parse(text);
  } catch (err) {
    throw new ConfigError(
      `${file}: not valid ${/\.json$/i.test(file) ? 'JSON' : 'YAML'}: ${(err as Error).message.split('\n')[0]}`,
    );
  }
  return parseConfig(raw ?? {}, path.basename(file));
}

/** Config and environment name checks that must fail fast, before any connection. */
export function validateRunConfig(file: string): Config {
  const config = loadConfigFile(file);
  const name = config.env.name;
  const known = knownEnvironments();
  const ok = known.includes(name) || known.some((k) => k.endsWith('<…>') && name.startsWith(k.slice(0, -3)));
  if (!ok)
    throw new ConfigError(`${file}: env.name: unknown environment '${name}'; expected one of ${known.join(', ')}`);
  return config;
}

const ImportedRolloutsSchema = z.object({
  refs: z.array(ArtifactRefSchema).min(1),
  trajectories: z.number().int().nonnegative(),
  successes: z.number().int().nonnegative(),
});

export function readImportedRollouts(file: string): ImportedRollouts {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new CliError(`--rollouts ${file}: cannot read JSON (${(err as Error).message.split('\n')[0]})`);
  }
  const r = ImportedRolloutsSchema.safeParse(raw);
  if (!r.success)
    throw new CliError(
      `--rollouts ${file}: ${r.error.issues[0].path.join('.') || '(root)'}: ${r.error.issues[0].message}`,
    );
  return r.data;
}
