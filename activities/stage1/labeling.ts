import type { ArtifactRef } from '../../core/artifact-ref.js';
import {
  CapabilityDictionarySchema,
  ItemFailureSchema,
  labelOutputSchema,
  PassLabelsSchema,
  TrajectoryLabelsSchema,
  type ItemFailure,
  type PassLabels,
  type TrajectoryLabels,
} from '../../core/capability.js';
import { compactTrajectory } from '../../core/compaction.js';
import { mapLimit } from '../../core/concurrency.js';
import type { Config } from '../../core/config.js';
import { LABELING_SYSTEM, labelingUser } from '../../core/prompts/stage1.js';
import { heartbeat } from '../../infra/activity-context.js';
import { InvalidLlmOutputError } from '../../llm/client.js';
import { runKeys } from '../../store/keys.js';
import { analysable, byId, cancellation, itemKey, loadTrajectories, type Stage1Deps } from './common.js';

/** Stage 1, labeling: one of R independent passes labels every trajectory against the dictionary. */

/** Labeling passes must be independent samples: a role without a temperature labels at this one. */
const LABELING_TEMPERATURE = 0.7;

export function createLabelingActivities(deps: Stage1Deps) {
  async function labelPass(input: {
    config: Config;
    runId: string;
    pass: number;
    rolloutRefs: ArtifactRef[];
    dictionaryRef: ArtifactRef;
  }): Promise<{ ref: ArtifactRef; labeled: number; failedItems: number }> {
    const { config, runId, pass, rolloutRefs, dictionaryRef } = input;
    const store = await deps.openStore(config.store);
    const key = runKeys.labelPass(runId, pass);
    const existing = await store.stat(key);
    if (existing) {
      const p = PassLabelsSchema.parse(await store.getJson(existing));
      return { ref: existing, labeled: p.items.length, failedItems: p.failedItems.length };
    }
    const dictionary = CapabilityDictionarySchema.parse(await store.getJson(dictionaryRef));
    const ts = (await loadTrajectories(store, rolloutRefs)).filter(analysable).sort(byId);
    const prefix = runKeys.labelPassItems(runId, pass);

    const finished = new Map<string, TrajectoryLabels | ItemFailure>();
    for (const k of await store.list(prefix)) {
      const raw = await store.getJson(k);
      const item = TrajectoryLabelsSchema.safeParse(raw);
      const rec = item.success ? item.data : ItemFailureSchema.parse(raw);
      finished.set(rec.trajectoryId, rec);
    }
    const unlabeled = dictionary.capabilities.length ? ts.filter((t) => !finished.has(t.id)) : [];
    heartbeat({ pass, done: finished.size, total: ts.length });

    const llm = deps.createLlm(config, 'analyst');
    const schema = labelOutputSchema(dictionary.capabilities);
    const temperature = llm.temperature ?? LABELING_TEMPERATURE;
    const settled = await mapLimit(unlabeled, config.llm.analyst.concurrency, async (t) => {
      cancellation()?.throwIfAborted();
      let rec: TrajectoryLabels | ItemFailure;
      try {
        const out = await llm.structured(
          [
            { role: 'system', content: LABELING_SYSTEM },
            {
              role: 'user',
              content: labelingUser(dictionary.capabilities, compactTrajectory(t, config.analysis.maxTrajectoryChars)),
            },
          ],
          schema,
          'capability_labels',
          { temperature, seed: pass, signal: cancellation() },
        );
        rec = { trajectoryId: t.id, labels: out.labels };
      } catch (e) {
        // Transport failures (after the client's retries) fail the activity so Temporal retries it;
        // finished items stay persisted. Output that stays invalid after repair is this item's failure.
        if (!(e instanceof InvalidLlmOutputError)) return e as Error;
        rec = { trajectoryId: t.id, error: e.message };
      }
      await store.put(`${prefix}${itemKey(t.id)}.json`, JSON.stringify(rec));
      finished.set(t.id, rec);
      heartbeat({ pass, done: finished.size, total: ts.length });
      return undefined;
    });
    const transportError = settled.find((e) => e instanceof Error);
    if (transportError) throw transportError;

    const records = ts.flatMap((t) => (finished.has(t.id) ? [finished.get(t.id)!] : []));
    const result: PassLabels = {
      pass,
      items: records.filter((r): r is TrajectoryLabels => 'labels' in r),
      failedItems: records.filter((r): r is ItemFailure => 'error' in r),
      usage: llm.usage(),
    };
    const ref = await store.put(key, JSON.stringify(result));
    return { ref, labeled: result.items.length, failedItems: result.failedItems.length };
  }

  return { labelPass };
}
