import type { Client } from '@temporalio/client';
import type { Config } from '../../core/config.js';
import { temporalSettings, workflowUiLink, type TemporalSettings } from '../../infra/temporal.js';
import { PROGRESS_QUERY, type PipelineProgress } from '../../workflows/types.js';

/**
 * Helpers every command shares: connecting to Temporal lazily (the client library is only loaded
 * once a command needs it) and one-line failures. Reading config files is in config-file.ts, loaded
 * by the commands that take one: its schemas (zod) are most of what a start would otherwise load.
 */
export class CliError extends Error {
  override name = 'CliError';
}

// Errors that mean "the input was wrong": by name, so errors thrown by modules loaded separately
// (cli/env.ts is imported by path) are recognised as well as instances of this module's classes.
const USER_ERRORS = new Set(['ConfigError', 'CliError', 'Tau2ImportError']);

/**
 * The one way every `trace` command ends in failure: bad input (the errors above) prints
 * `trace: <message>` on one line; anything else is a bug and keeps its stack.
 */
export function failureText(err: unknown): string {
  const e = err as Error | undefined;
  if (e && (err instanceof CliError || USER_ERRORS.has(e.name))) return `trace: ${e.message.split('\n')[0]}`;
  return e?.stack ?? String(err);
}

export async function connectClient(settings: TemporalSettings = temporalSettings()) {
  const { Client, Connection } = await import('@temporalio/client');
  const { connectionOptions } = await import('../../infra/temporal.js');
  let connection;
  try {
    connection = await Connection.connect({ ...connectionOptions(settings), connectTimeout: 3000 });
  } catch (err) {
    const hint = settings.embedded ? ' (start the embedded stack with `trace stack up`, or set TEMPORAL_ADDRESS)' : '';
    throw new CliError(
      `Temporal not reachable at ${settings.address}${hint}: ${(err as Error).message.split('\n')[0]}`,
    );
  }
  return { client: new Client({ connection, namespace: settings.namespace }), connection, settings };
}

/**
 * The `progress` query with a deadline: a query needs a worker, and without one the client would
 * otherwise keep retrying past the command's end. Undefined when no worker answered in time.
 */
export async function queryProgress(
  client: Client,
  workflowId: string,
  timeoutMs = 5000,
): Promise<PipelineProgress | undefined> {
  try {
    return await client.connection.withDeadline(Date.now() + timeoutMs, () =>
      client.workflow.getHandle(workflowId).query<PipelineProgress>(PROGRESS_QUERY),
    );
  } catch {
    return undefined;
  }
}

export function uiLink(workflowId: string, settings: TemporalSettings = temporalSettings()): string {
  return workflowUiLink(settings, workflowId);
}

/** A run id that sorts by start time and names the config: `<name>-YYYYMMDD-HHMMSS-xxxx`. */
export function newRunId(config: Config, now = new Date()): string {
  const slug =
    config.name
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, '-')
      .replace(/^-|-$/g, '')
      .slice(0, 40) || 'run';
  const stamp = now.toISOString().replace(/[-:]/g, '').replace('T', '-').slice(0, 15);
  return `${slug}-${stamp}-${Math.random().toString(36).slice(2, 6)}`;
}

export function formatRate(x: number | null | undefined): string {
  return x === null || x === undefined ? 'n/a' : `${(100 * x).toFixed(1)}%`;
}
