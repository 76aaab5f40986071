import { PALETTE, emptyChart, esc, n2, shareBars } from './common.js';

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
  const { f, x, out } = shareBars('pass-rates', title, data.length, rowH);
  data.forEach((d, i) => {
    const y = f.top + i * rowH + 5;
    out.push(`<text x="${f.left - 6}" y="${n2(y + 12)}" text-anchor="end">${esc(d.name)}</text>`);
    if (d.estimate === null) {
      out.push(`<text x="${f.left + 4}" y="${n2(y + 12)}" fill="#6b7280">not evaluated</text>`);
      return;
    }
    out.push(
      `<rect x="${f.left}" y="${n2(y)}" width="${n2(x(d.estimate) - f.left)}" height="16" fill="${PALETTE[i % PALETTE.length]}" opacity="0.85"><title>${esc(d.name)}: ${(d.estimate * 100).toFixed(1)}%</title></rect>`,
    );
    if (d.low !== null && d.high !== null) {
      const cy = y + 8;
      out.push(
        `<path d="M${n2(x(d.low))},${n2(cy - 5)}v10M${n2(x(d.low))},${n2(cy)}H${n2(x(d.high))}M${n2(x(d.high))},${n2(cy - 5)}v10" stroke="#111827" fill="none"/>`,
      );
    }
    out.push(`<text x="${n2(x(d.high ?? d.estimate) + 4)}" y="${n2(y + 12)}">${(d.estimate * 100).toFixed(1)}%</text>`);
  });
  out.push('</svg>');
  return out.join('');
}
