import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { SyntheticEnvironment } from '../sdk/index.js';

/**
 * The reference library: hand-written capability environments (the paper's four τ² and two
 * ToolSandbox capabilities, and two for the showcase-desk target). Used as ready environments, as few-shot examples for the generator
 * and, when the config allows, as a fallback when synthesis fails.
 */
const here = path.dirname(fileURLToPath(import.meta.url));

export const REFERENCE_ENVS = {
  structured_data_reasoning: 'structured-data-reasoning.ts',
  tool_calling_precision: 'tool-calling-precision.ts',
  multi_step_task_completion: 'multi-step-task-completion.ts',
  precondition_verification: 'precondition-verification.ts',
  permission_error_recovery: 'permission-error-recovery.ts',
  datetime_reasoning: 'datetime-reasoning.ts',
  exact_id_copying: 'exact-id-copying.ts',
  lookup_then_act: 'lookup-then-act.ts',
} as const;
export type ReferenceCapability = keyof typeof REFERENCE_ENVS;

export function isReferenceCapability(name: string): name is ReferenceCapability {
  return Object.hasOwn(REFERENCE_ENVS, name);
}

export function referencePath(capability: ReferenceCapability): string {
  return path.join(here, REFERENCE_ENVS[capability]);
}

export function referenceSource(capability: ReferenceCapability): Promise<string> {
  return readFile(referencePath(capability), 'utf8');
}

export async function loadReferenceEnv(capability: ReferenceCapability): Promise<SyntheticEnvironment> {
  // The file name as written (.ts): tsx loads it, and the compiled CLI's bundler sees which files to include.
  return (await import(`./${REFERENCE_ENVS[capability]}`)).default as SyntheticEnvironment;
}
