import type { ArtifactRef } from '../../core/artifact-ref.js';
import {
  CapabilityDictionarySchema,
  PassLabelsSchema,
  Stage1ResultSchema,
  type Outcome,
  type PassLabels,
  type SelectedCapability,
  type Stage1Result,
} from '../../core/capability.js';
import { capabilityStats, exampleFailures, type PassInput } from '../../core/capability-stats.js';
import type { Config } from '../../core/config.js';
import { runKeys } from '../../store/keys.js';
import { analysable, loadTrajectories, type Stage1Deps } from './common.js';

/** Stage 1, selection: the capabilities whose Δ and coverage clear the thresholds in K of the R passes. */

export function createSelectionActivities(deps: Stage1Deps) {
  async function selectCapabilities(input: {
    config: Config;
    runId: string;
    rolloutRefs: ArtifactRef[];
    dictionaryRef: ArtifactRef;
    passRefs: ArtifactRef[];
  }): Promise<{
    ref: ArtifactRef;
    selected: { name: string; description: string; meanDelta: number; meanCoverage: number; passesSelected: number }[];
    summary: string;
  }> {
    const { config, runId, rolloutRefs, dictionaryRef, passRefs } = input;
    const store = await deps.openStore(config.store);
    const dictionary = CapabilityDictionarySchema.parse(await store.getJson(dictionaryRef));
    const all = await loadTrajectories(store, rolloutRefs);
    const ts = all.filter(analysable);
    const outcomes: Outcome[] = ts.map((t) => ({ trajectoryId: t.id, success: t.success }));
    const passes: PassLabels[] = [];
    for (const r of passRefs) passes.push(PassLabelsSchema.parse(await store.getJson(r)));
    passes.sort((a, b) => a.pass - b.pass);
    const passInputs: PassInput[] = passes.map((p) => ({ pass: p.pass, items: p.items }));
    const thresholds = {
      delta: config.analysis.delta,
      coverage: config.analysis.coverage,
      minPassesSelected: config.analysis.minPassesSelected,
    };
    const stats = capabilityStats(dictionary.capabilities, outcomes, passInputs, thresholds);
    const describe = new Map(dictionary.capabilities.map((c) => [c.name, c.description]));
    const selected: SelectedCapability[] = stats
      .filter((s) => s.selected)
      .map((s) => ({
        name: s.name,
        description: describe.get(s.name)!,
        meanDelta: s.meanDelta!,
        meanCoverage: s.meanCoverage!,
        passesSelected: s.passesSelected,
        examples: exampleFailures(s.name, outcomes, passInputs, config.analysis.examplesPerCapability),
      }));
    const result: Stage1Result = {
      runId,
      env: config.env.name,
      thresholds: { ...thresholds, passes: config.analysis.passes },
      counts: {
        trajectories: ts.length,
        successes: outcomes.filter((o) => o.success).length,
        failures: outcomes.filter((o) => !o.success).length,
        errored: all.length - ts.length,
        labelFailures: passes.reduce((n, p) => n + p.failedItems.length, 0),
      },
      dictionary,
      rolloutRefs,
      dictionaryRef,
      passRefs,
      stats,
      selected,
      summary: '',
    };
    result.summary = stage1Summary(result, passes.length);
    const ref = await store.put(runKeys.stage1(runId), JSON.stringify(Stage1ResultSchema.parse(result), null, 2));
    return {
      ref,
      selected: selected.map(({ examples: _e, ...s }) => s),
      summary: result.summary,
    };
  }

  return { selectCapabilities };
}

const fmt = (x: number | null) => (x === null ? 'n/a' : x.toFixed(2));

export function stage1Summary(r: Stage1Result, passesRun: number): string {
  const c = r.counts;
  const lines = [
    `Stage 1 on ${r.env}: ${c.trajectories} trajectories (${c.successes} successes, ${c.failures} failures${c.errored ? `, ${c.errored} ended by infrastructure errors and left out` : ''}); ` +
      `${r.dictionary.capabilities.length} capabilities discovered; ${passesRun} of ${r.thresholds.passes} labeling passes` +
      `${c.labelFailures ? ` (${c.labelFailures} item labels failed after repair)` : ''}.`,
  ];
  for (const w of r.dictionary.warnings ?? []) lines.push(`Warning: ${w}.`);
  if (c.failures === 0) lines.push('No failed trajectories: nothing to contrast, so no capability can be selected.');
  if (c.successes === 0)
    lines.push('No successful trajectories: the contrastive gap Δ is undefined, so no capability can be selected.');
  const rule = `Δ ≥ ${r.thresholds.delta.toFixed(2)} and Cov ≥ ${r.thresholds.coverage.toFixed(2)} in ≥ ${r.thresholds.minPassesSelected} of ${r.thresholds.passes} passes`;
  lines.push(r.selected.length ? `Selected ${r.selected.length} (${rule}):` : `None selected (${rule}).`);
  for (const s of r.stats) {
    const mark = s.selected ? '✔' : ' ';
    lines.push(
      `${mark} ${s.name}: Δ ${fmt(s.meanDelta)} ± ${fmt(s.stdDelta)}, Cov ${fmt(s.meanCoverage)} ± ${fmt(s.stdCoverage)}, selected in ${s.passesSelected}/${passesRun}` +
        (s.notes.length ? ` (${s.notes.join('; ')})` : ''),
    );
  }
  return lines.join('\n');
}
