import type { PipelineProgress } from '../../workflows/types.js';

/**
 * The `progress` query answer as one terminal line: a bar for the current stage's fan-out
 * (rollout batches, labeling passes, capability children) and the counts behind it.
 */
export function bar(done: number, total: number, width = 24): string {
  const frac = total > 0 ? Math.min(1, done / total) : 0;
  const filled = Math.round(frac * width);
  return `[${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${String(Math.round(frac * 100)).padStart(3)}%`;
}

export function progressLine(p: PipelineProgress): string {
  const r = p.rollouts;
  const l = p.labeling;
  switch (p.stage) {
    case 'rollouts':
      return (
        `rollouts     ${bar(r.batchesDone + r.batchesFailed, r.batchesTotal)} batches ${r.batchesDone}/${r.batchesTotal}` +
        `${r.batchesFailed ? ` (${r.batchesFailed} failed)` : ''}, ${r.trajectories} trajectories, ${r.successes} successes`
      );
    case 'stage1:labeling':
      return `labeling     ${bar(l.passesDone + l.passesFailed, l.passesTotal)} passes ${l.passesDone}/${l.passesTotal}${l.passesFailed ? ` (${l.passesFailed} failed)` : ''}`;
    case 'stages2-3:capabilities': {
      const settled = p.capabilities.filter(
        (c) => !['pending', 'synthesizing', 'validating', 'training'].includes(c.status),
      ).length;
      return (
        `capabilities ${bar(settled, p.capabilities.length)} ${settled}/${p.capabilities.length} settled` +
        (p.currentCapability ? `, current ${p.currentCapability}` : '')
      );
    }
    default:
      return `${p.stage.padEnd(12)} ${p.message ?? ''}`.trimEnd();
  }
}

export function progressReport(p: PipelineProgress): string {
  const lines = [
    `stage: ${p.stage}${p.message ? ` — ${p.message}` : ''}`,
    `rollouts: ${p.rollouts.batchesDone}/${p.rollouts.batchesTotal} batches (${p.rollouts.batchesFailed} failed), ` +
      `${p.rollouts.trajectories} trajectories, ${p.rollouts.successes} successes`,
    `labeling: ${p.labeling.passesDone}/${p.labeling.passesTotal} passes (${p.labeling.passesFailed} failed)`,
  ];
  if (p.capabilities.length) {
    lines.push('capabilities:');
    for (const c of p.capabilities)
      lines.push(
        `  ${c.name.padEnd(32)} ${c.status}${c.requestedByConfig ? ' (requested by config)' : ''}${c.error ? ` — ${c.error}` : ''}`,
      );
  }
  if (p.notConfigured.length) lines.push(`not configured: ${p.notConfigured.join(', ')}`);
  return lines.join('\n');
}
