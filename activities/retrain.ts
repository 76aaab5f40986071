import type { Config } from '../core/config.js';
import {
  emptyLineage,
  LineageRecordSchema,
  LineageSchema,
  recordOutcome,
  type Lineage,
  type LineageRecord,
} from '../core/promotion.js';
import { RunArtifactsSchema, type RunArtifacts } from '../core/schedule.js';
import type { ArtifactStore } from '../store/artifact-store.js';
import { openStore } from '../store/index.js';
import { lineageKey, runKeys } from '../store/keys.js';
import { z } from 'zod';

/**
 * Activities of scheduled retraining: the lineage of a config's runs (which run produced which
 * agent, promoted or not) and seeding a new run with the previous run's artifacts.
 */

export interface RetrainDeps {
  openStore(config: Config['store']): ArtifactStore | Promise<ArtifactStore>;
}

const defaultDeps: RetrainDeps = {
  openStore,
};

const StateSchema = z.object({ lineage: LineageSchema, latest: RunArtifactsSchema.optional() });
type State = z.infer<typeof StateSchema>;

export function createRetrainActivities(deps: RetrainDeps = defaultDeps) {
  async function readState(store: ArtifactStore, config: Config): Promise<State> {
    const ref = await store.stat(lineageKey(config.name));
    return ref ? StateSchema.parse(await store.getJson(ref)) : { lineage: emptyLineage() };
  }

  async function loadLineage(input: { config: Config }): Promise<{ lineage: Lineage; latest?: RunArtifacts }> {
    const store = await deps.openStore(input.config.store);
    return readState(store, input.config);
  }

  /**
   * Starts a run from the previous one: its capability dictionary is copied into the new run, so
   * stage 1 labels the fresh rollouts against the same capabilities, and so are the manifests of
   * its environments, so the new run can validate them under its own config before reusing them
   * (idempotent: what the new run already has is kept).
   */
  async function seedRetrainRun(input: {
    config: Config;
    runId: string;
    previous: RunArtifacts;
  }): Promise<{ reusedDictionary: boolean; from: string }> {
    const store = await deps.openStore(input.config.store);
    const { previous, runId } = input;
    for (const c of previous.capabilities) {
      if (!c.environment) continue;
      const source = await store.getText(c.environment);
      const [from, to] = [runKeys.manifest(previous.runId, c.name, source), runKeys.manifest(runId, c.name, source)];
      if (!(await store.stat(to)) && (await store.stat(from))) await store.put(to, await store.get(from));
    }
    if (!previous.dictionary) return { reusedDictionary: false, from: previous.runId };
    if (!(await store.stat(runKeys.dictionary(runId))))
      await store.put(runKeys.dictionary(runId), await store.get(previous.dictionary));
    return { reusedDictionary: true, from: previous.runId };
  }

  /** Appends the run's outcome to the lineage (once per run) and remembers its artifacts. */
  async function recordRetrainOutcome(input: {
    config: Config;
    record: LineageRecord;
    artifacts: RunArtifacts;
  }): Promise<Lineage> {
    const store = await deps.openStore(input.config.store);
    const state = await readState(store, input.config);
    const lineage = recordOutcome(state.lineage, LineageRecordSchema.parse(input.record));
    const next: State = { lineage, latest: RunArtifactsSchema.parse(input.artifacts) };
    await store.put(lineageKey(input.config.name), JSON.stringify(next, null, 2));
    return lineage;
  }

  return { loadLineage, seedRetrainRun, recordRetrainOutcome };
}

const defaults = createRetrainActivities();
export const { loadLineage, seedRetrainRun, recordRetrainOutcome } = defaults;
