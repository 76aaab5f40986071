import { PALETTE, emptyChart, esc, legend, linear, n2, openSvg, ticks } from './common.js';

/** Mean reward per GRPO iteration, one line per capability adapter. */
export interface RewardSeries {
  capability: string;
  points: { iteration: number; meanReward: number }[];
}

export function rewardCurvesChart(series: readonly RewardSeries[]): string {
  const title = 'Mean reward per GRPO iteration, per capability';
  const drawn = series.filter((s) => s.points.length > 0);
  if (drawn.length === 0) return emptyChart('reward-curves', title, 'no adapter was trained in this run');
  const f = { width: 640, height: 280, left: 46, right: 180, top: 16, bottom: 36 };
  const iters = drawn.flatMap((s) => s.points.map((p) => p.iteration));
  const rewards = drawn.flatMap((s) => s.points.map((p) => p.meanReward));
  const xMax = Math.max(...iters, 1);
  const xMin = Math.min(...iters, 0);
  const yLo = Math.min(0, ...rewards);
  const yHi = Math.max(1, ...rewards);
  const x = linear([xMin, xMax], [f.left, f.width - f.right]);
  const y = linear([yLo, yHi], [f.height - f.bottom, f.top]);
  const out = [openSvg('reward-curves', title, f)];
  for (const t of ticks(yLo, yHi)) {
    out.push(`<line x1="${f.left}" x2="${f.width - f.right}" y1="${n2(y(t))}" y2="${n2(y(t))}" stroke="#e5e7eb"/>`);
    out.push(`<text x="${f.left - 6}" y="${n2(y(t) + 4)}" text-anchor="end">${n2(t)}</text>`);
  }
  for (const t of ticks(xMin, xMax, 8).filter(Number.isInteger)) {
    out.push(`<text x="${n2(x(t))}" y="${f.height - f.bottom + 14}" text-anchor="middle">${t}</text>`);
  }
  out.push(
    `<text x="${n2((f.left + f.width - f.right) / 2)}" y="${f.height - 6}" text-anchor="middle" fill="#374151">GRPO iteration</text>`,
  );
  out.push(
    `<text transform="translate(12,${n2((f.top + f.height - f.bottom) / 2)}) rotate(-90)" text-anchor="middle" fill="#374151">mean reward</text>`,
  );
  drawn.forEach((s, i) => {
    const color = PALETTE[i % PALETTE.length];
    const pts = [...s.points].sort((a, b) => a.iteration - b.iteration);
    out.push(
      `<polyline fill="none" stroke="${color}" stroke-width="2" points="${pts.map((p) => `${n2(x(p.iteration))},${n2(y(p.meanReward))}`).join(' ')}"><title>${esc(s.capability)}</title></polyline>`,
    );
    for (const p of pts) {
      out.push(
        `<circle cx="${n2(x(p.iteration))}" cy="${n2(y(p.meanReward))}" r="2.5" fill="${color}"><title>${esc(s.capability)} iter ${p.iteration}: ${p.meanReward.toFixed(3)}</title></circle>`,
      );
    }
  });
  out.push(
    legend(
      drawn.map((s, i) => ({ label: s.capability, color: PALETTE[i % PALETTE.length] })),
      f.width - f.right + 12,
      f.top,
    ),
  );
  out.push('</svg>');
  return out.join('');
}
