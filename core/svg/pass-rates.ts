import { PALETTE, emptyChart, esc, linear, n2, openSvg } from './common.js';

/** Pass rate per variant with its 95% interval as a whisker. */
export interface PassRateDatum {
  name: string;
  estimate: number | null;
  low: number | null;
  high: number | null;
}

export function passRateChart(data: readonly PassRateDatum[]): string {
  const title = 'Pass rate per variant on held-out tasks (95% CI)';
  if (data.length === 0) return emptyChart('pass-rates', title, 'no variant was evaluated in this run');
  const rowH = 26;
  const f = { width: 560, height: 0, left: 200, right: 60, top: 10, bottom: 24 };
  f.height = f.top + data.length * rowH + f.bottom;
  const x = linear([0, 1], [f.left, f.width - f.right]);
  const out = [openSvg('pass-rates', title, f)];
  for (const t of [0, 0.25, 0.5, 0.75, 1]) {
    out.push(`<line x1="${n2(x(t))}" x2="${n2(x(t))}" y1="${f.top}" y2="${f.height - f.bottom}" stroke="#e5e7eb"/>`);
    out.push(`<text x="${n2(x(t))}" y="${f.height - f.bottom + 14}" text-anchor="middle">${t * 100}%</text>`);
  }
  data.forEach((d, i) => {
    const y = f.top + i * rowH + 5;
    out.push(`<text x="${f.left - 6}" y="${n2(y + 12)}" text-anchor="end">${esc(d.name)}</text>`);
    if (d.estimate === null) {
      out.push(`<text x="${f.left + 4}" y="${n2(y + 12)}" fill="#6b7280">not evaluated</text>`);
      return;
    }
    out.push(`<rect x="${f.left}" y="${n2(y)}" width="${n2(x(d.estimate) - f.left)}" height="16" fill="${PALETTE[i % PALETTE.length]}" opacity="0.85"><title>${esc(d.name)}: ${(d.estimate * 100).toFixed(1)}%</title></rect>`);
    if (d.low !== null && d.high !== null) {
      const cy = y + 8;
      out.push(`<path d="M${n2(x(d.low))},${n2(cy - 5)}v10M${n2(x(d.low))},${n2(cy)}H${n2(x(d.high))}M${n2(x(d.high))},${n2(cy - 5)}v10" stroke="#111827" fill="none"/>`);
    }
    out.push(`<text x="${n2(x(d.high ?? d.estimate) + 4)}" y="${n2(y + 12)}">${(d.estimate * 100).toFixed(1)}%</text>`);
  });
  out.push('</svg>');
  return out.join('');
}
