import type { Capability, CapabilityStats, Label, Outcome, PassStat, TrajectoryLabels } from './capability.js';

/**
 * Stage 1 statistics exactly as DESIGN.md §1: per pass ER⁺, ER⁻, Δ = ER⁻ − ER⁺ and
 * Cov = #LACKING∧y=0 / #(y=0); a pass selects a capability when Δ ≥ δ and Cov ≥ ρ; keep it when
 * selected in ≥ K of R passes. Undefined rates are null with a reason, never a division by zero.
 * Denominators count the trajectories labeled in that pass (an item whose labeling failed is absent).
 */
export interface Thresholds {
  delta: number;
  coverage: number;
  minPassesSelected: number;
}

export interface PassInput {
  pass: number;
  items: TrajectoryLabels[];
}

/** Thresholds compare with a tolerance so 0.3 − 0.1 counts as ≥ 0.2. */
const EPS = 1e-9;

export function passStat(
  capability: string,
  pass: PassInput,
  outcomes: ReadonlyMap<string, boolean>,
  t: Thresholds,
): PassStat {
  const c = {
    lackingSuccess: 0,
    applicableSuccess: 0,
    lackingFailure: 0,
    applicableFailure: 0,
    failures: 0,
    successes: 0,
  };
  for (const item of pass.items) {
    const success = outcomes.get(item.trajectoryId);
    if (success === undefined) continue;
    const label: Label = item.labels[capability] ?? 'NA';
    if (success) c.successes++;
    else c.failures++;
    if (label === 'NA') continue;
    if (success) {
      c.applicableSuccess++;
      if (label === 'LACKING') c.lackingSuccess++;
    } else {
      c.applicableFailure++;
      if (label === 'LACKING') c.lackingFailure++;
    }
  }
  const reasons: string[] = [];
  const erPlus = c.applicableSuccess > 0 ? c.lackingSuccess / c.applicableSuccess : null;
  const erMinus = c.applicableFailure > 0 ? c.lackingFailure / c.applicableFailure : null;
  const coverage = c.failures > 0 ? c.lackingFailure / c.failures : null;
  if (c.successes === 0) reasons.push('no successes');
  else if (erPlus === null) reasons.push('all NA on successes');
  if (c.failures === 0) reasons.push('no failures');
  else if (erMinus === null) reasons.push('all NA on failures');
  const delta = erPlus !== null && erMinus !== null ? erMinus - erPlus : null;
  const selected = delta !== null && coverage !== null && delta >= t.delta - EPS && coverage >= t.coverage - EPS;
  return {
    pass: pass.pass,
    erPlus,
    erMinus,
    delta,
    coverage,
    selected,
    ...(reasons.length ? { reason: reasons.join('; ') } : {}),
    counts: c,
  };
}

/** Mean and population standard deviation (numpy's default, ddof = 0); null for no values. */
export function meanStd(values: readonly number[]): { mean: number | null; std: number | null } {
  if (values.length === 0) return { mean: null, std: null };
  const mean = values.reduce((a, b) => a + b, 0) / values.length;
  const variance = values.reduce((a, v) => a + (v - mean) ** 2, 0) / values.length;
  return { mean, std: Math.sqrt(variance) };
}

export function outcomeMap(outcomes: readonly Outcome[]): Map<string, boolean> {
  return new Map(outcomes.map((o) => [o.trajectoryId, o.success]));
}

/** Per-capability statistics over all passes, ranked by mean Δ (undefined last, then by name). */
export function capabilityStats(
  capabilities: readonly Capability[],
  outcomes: readonly Outcome[],
  passes: readonly PassInput[],
  t: Thresholds,
): CapabilityStats[] {
  const y = outcomeMap(outcomes);
  const stats = capabilities.map((cap): CapabilityStats => {
    const perPass = passes.map((p) => passStat(cap.name, p, y, t));
    const passesSelected = perPass.filter((p) => p.selected).length;
    const d = meanStd(perPass.flatMap((p) => (p.delta === null ? [] : [p.delta])));
    const cov = meanStd(perPass.flatMap((p) => (p.coverage === null ? [] : [p.coverage])));
    const reasons = perPass.map((p) => (p.reason ? p.reason.split('; ') : []));
    const notes = [...new Set(reasons.flat())].map(
      (r) => `${r} in ${reasons.filter((rs) => rs.includes(r)).length} of ${perPass.length} passes`,
    );
    return {
      name: cap.name,
      passes: perPass,
      passesSelected,
      meanDelta: d.mean,
      stdDelta: d.std,
      meanCoverage: cov.mean,
      stdCoverage: cov.std,
      selected: passesSelected >= t.minPassesSelected,
      notes,
    };
  });
  return stats.sort(
    (a, b) =>
      (b.meanDelta ?? -Infinity) - (a.meanDelta ?? -Infinity) || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0),
  );
}

/**
 * Failed trajectories to show for a capability: those labeled LACKING in the most passes
 * (ties broken by id), so examples are the clearest cases rather than the first alphabetically.
 */
export function exampleFailures(
  capability: string,
  outcomes: readonly Outcome[],
  passes: readonly PassInput[],
  limit: number,
): { trajectoryId: string; lackingPasses: number }[] {
  const y = outcomeMap(outcomes);
  const counts = new Map<string, number>();
  for (const p of passes) {
    for (const item of p.items) {
      if (y.get(item.trajectoryId) !== false || item.labels[capability] !== 'LACKING') continue;
      counts.set(item.trajectoryId, (counts.get(item.trajectoryId) ?? 0) + 1);
    }
  }
  return [...counts]
    .map(([trajectoryId, lackingPasses]) => ({ trajectoryId, lackingPasses }))
    .sort((a, b) => b.lackingPasses - a.lackingPasses || (a.trajectoryId < b.trajectoryId ? -1 : 1))
    .slice(0, limit);
}
