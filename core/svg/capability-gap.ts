import { PALETTE, emptyChart, esc, linear, n2, openSvg, ticks } from './common.js';

/**
 * Failure coverage and contrastive gap per capability (after the paper's Figure 3): two bars per
 * capability with ±1 std whiskers over labeling passes, the δ and ρ thresholds as dashed lines,
 * selected capabilities in bold.
 */
export interface CapabilityGapDatum {
  name: string;
  meanDelta: number | null;
  stdDelta: number | null;
  meanCoverage: number | null;
  stdCoverage: number | null;
  selected: boolean;
}

export function capabilityGapChart(
  data: readonly CapabilityGapDatum[],
  thresholds: { delta: number; coverage: number },
): string {
  const title = 'Failure coverage and contrastive gap per capability';
  const rows = [...data].sort((a, b) => (b.meanDelta ?? -Infinity) - (a.meanDelta ?? -Infinity));
  if (rows.length === 0) return emptyChart('capability-gap', title, 'no capabilities discovered');
  const rowH = 30;
  const f = { width: 640, height: 0, left: 200, right: 20, top: 28, bottom: 34 };
  f.height = f.top + rows.length * rowH + f.bottom;
  const values = rows.flatMap((r) => [
    (r.meanDelta ?? 0) - (r.stdDelta ?? 0),
    (r.meanDelta ?? 0) + (r.stdDelta ?? 0),
    (r.meanCoverage ?? 0) + (r.stdCoverage ?? 0),
  ]);
  const lo = Math.min(0, ...values);
  const hi = Math.max(thresholds.delta, thresholds.coverage, ...values, 0.1);
  const x = linear([lo, hi], [f.left, f.width - f.right]);
  const plotBottom = f.height - f.bottom;
  const out = [openSvg('capability-gap', title, f)];
  for (const t of ticks(lo, hi)) {
    out.push(`<line x1="${n2(x(t))}" x2="${n2(x(t))}" y1="${f.top}" y2="${plotBottom}" stroke="#e5e7eb"/>`);
    out.push(`<text x="${n2(x(t))}" y="${plotBottom + 14}" text-anchor="middle" fill="#374151">${n2(t)}</text>`);
  }
  const bar = (value: number | null, std: number | null, y: number, color: string, label: string) => {
    if (value === null) return `<text x="${n2(x(0) + 4)}" y="${n2(y + 9)}" fill="#6b7280">n/a</text>`;
    const x0 = x(Math.min(0, value));
    const w = Math.abs(x(value) - x(0));
    let s = `<rect x="${n2(x0)}" y="${n2(y)}" width="${n2(w)}" height="11" fill="${color}"><title>${esc(label)}: ${value.toFixed(3)}${std !== null ? ` ± ${std.toFixed(3)}` : ''}</title></rect>`;
    if (std !== null && std > 0) {
      const cy = y + 5.5;
      s += `<line x1="${n2(x(value - std))}" x2="${n2(x(value + std))}" y1="${n2(cy)}" y2="${n2(cy)}" stroke="#111827"/>`;
    }
    return s;
  };
  rows.forEach((r, i) => {
    const y = f.top + i * rowH + 3;
    out.push(
      `<text x="${f.left - 6}" y="${n2(y + 14)}" text-anchor="end" fill="#111827"${r.selected ? ' font-weight="bold"' : ''}>${esc(r.name)}${r.selected ? ' ✓' : ''}</text>`,
    );
    out.push(bar(r.meanCoverage, r.stdCoverage, y, PALETTE[0], `${r.name} coverage`));
    out.push(bar(r.meanDelta, r.stdDelta, y + 12, PALETTE[1], `${r.name} contrastive gap`));
  });
  out.push(`<line x1="${n2(x(0))}" x2="${n2(x(0))}" y1="${f.top}" y2="${plotBottom}" stroke="#111827"/>`);
  // A label at the right edge (a threshold that is the axis maximum) is drawn to the left of its line.
  const threshold = (v: number, color: string, label: string) => {
    const atEdge = x(v) > f.width - f.right - 40;
    const text = atEdge ? `x="${n2(x(v) - 3)}" text-anchor="end"` : `x="${n2(x(v) + 3)}"`;
    return `<line x1="${n2(x(v))}" x2="${n2(x(v))}" y1="${f.top - 4}" y2="${plotBottom}" stroke="${color}" stroke-dasharray="4 3"/><text ${text} y="${f.top - 6}" fill="${color}">${esc(label)}</text>`;
  };
  out.push(threshold(thresholds.coverage, PALETTE[0], `ρ=${thresholds.coverage}`));
  out.push(threshold(thresholds.delta, PALETTE[1], `δ=${thresholds.delta}`));
  out.push(
    `<g transform="translate(${f.left},${f.height - 10})"><rect width="10" height="8" fill="${PALETTE[0]}"/><text x="14" y="8">coverage Cov</text><rect x="110" width="10" height="8" fill="${PALETTE[1]}"/><text x="124" y="8">contrastive gap Δ (±1 std over passes)</text></g>`,
  );
  out.push('</svg>');
  return out.join('');
}
