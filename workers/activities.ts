import { existsSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { PROJECT_ROOT } from '../infra/temporal.js';
import { platformActivities } from './platform-activities.js';

/**
 * The activity catalog: which stage modules exist in this checkout and what they export. Stages
 * land independently, so a missing module is a stage the pipeline reports as not configured; an
 * error inside a present module is thrown, never hidden.
 */
export type ActivityFn = (...args: any[]) => Promise<unknown>;
export type Queue = 'cpu' | 'gpu';

/**
 * Activity modules per task queue and the activity names the workflows call from each (only
 * these are registered, so a module's helper exports never become activities).
 */
export const ACTIVITY_MODULES: { path: string; queue: Queue; names: string[] }[] = [
  {
    path: 'activities/stage1.ts',
    queue: 'cpu',
    names: ['listRolloutTasks', 'collectRolloutBatch', 'discoverCapabilities', 'labelPass', 'selectCapabilities'],
  },
  { path: 'activities/synthesis/index.ts', queue: 'cpu', names: ['synthesizeEnvironment', 'validateEnvironment'] },
  { path: 'activities/evaluation.ts', queue: 'cpu', names: ['evaluateRun', 'listEvaluationTasks', 'planEvaluation', 'evaluateVariant'] },
  { path: 'activities/report.ts', queue: 'cpu', names: ['writeReport', 'buildReport'] },
  { path: 'activities/retrain.ts', queue: 'cpu', names: ['loadLineage', 'seedRetrainRun', 'recordRetrainOutcome'] },
  { path: 'activities/training.ts', queue: 'gpu', names: ['trainAdapter', 'fitGate'] },
  { path: 'activities/evaluation.ts', queue: 'gpu', names: ['evaluateServed'] },
];

function isPlainFunction(v: unknown): v is ActivityFn {
  return typeof v === 'function' && !/^class[\s{]/.test(Function.prototype.toString.call(v));
}

/** The named activities a module exports, or undefined when the module is not in this checkout. */
export async function loadModuleActivities(rel: string, names: readonly string[]): Promise<Record<string, ActivityFn> | undefined> {
  const abs = path.join(PROJECT_ROOT, rel);
  if (!existsSync(abs)) return undefined;
  const mod = (await import(pathToFileURL(abs).href)) as Record<string, unknown>;
  return Object.fromEntries(names.flatMap((n) => (isPlainFunction(mod[n]) ? [[n, mod[n]] as const] : [])));
}

export interface Catalog {
  cpu: Record<string, ActivityFn>;
  gpu: Record<string, ActivityFn>;
  /** Per module: present in this checkout, and which expected activity names it does not export. */
  modules: { path: string; queue: Queue; loaded: boolean; missing: string[] }[];
}

let cached: Promise<Catalog> | undefined;

export function loadCatalog(): Promise<Catalog> {
  cached ??= buildCatalog();
  return cached;
}

async function buildCatalog(): Promise<Catalog> {
  const catalog: Catalog = { cpu: {}, gpu: {}, modules: [] };
  for (const m of ACTIVITY_MODULES) {
    const fns = await loadModuleActivities(m.path, m.names);
    const missing = fns ? m.names.filter((n) => !(n in fns)) : m.names;
    catalog.modules.push({ path: m.path, queue: m.queue, loaded: !!fns, missing });
    Object.assign(catalog[m.queue], fns);
  }
  Object.assign(catalog.cpu, platformActivities(() => [...Object.keys(catalog.cpu), ...Object.keys(catalog.gpu)].sort()));
  return catalog;
}
