import { PALETTE, emptyChart, esc, linear, n2, openSvg } from './common.js';

/** Share of tokens the MoE gate routes (top-1) to each capability's adapter. */
export function routingShareChart(routing: readonly { capability: string; share: number }[]): string {
  const title = 'Gate routing share per capability';
  if (routing.length === 0) return emptyChart('routing-share', title, 'no gate was fitted in this run');
  const rowH = 22;
  const f = { width: 560, height: 0, left: 200, right: 60, top: 10, bottom: 24 };
  f.height = f.top + routing.length * rowH + f.bottom;
  const x = linear([0, 1], [f.left, f.width - f.right]);
  const out = [openSvg('routing-share', title, f)];
  for (const t of [0, 0.25, 0.5, 0.75, 1]) {
    out.push(`<line x1="${n2(x(t))}" x2="${n2(x(t))}" y1="${f.top}" y2="${f.height - f.bottom}" stroke="#e5e7eb"/>`);
    out.push(`<text x="${n2(x(t))}" y="${f.height - f.bottom + 14}" text-anchor="middle">${t * 100}%</text>`);
  }
  routing.forEach((r, i) => {
    const y = f.top + i * rowH + 4;
    const color = PALETTE[i % PALETTE.length];
    out.push(`<text x="${f.left - 6}" y="${n2(y + 11)}" text-anchor="end">${esc(r.capability)}</text>`);
    out.push(`<rect x="${f.left}" y="${n2(y)}" width="${n2(x(r.share) - f.left)}" height="14" fill="${color}"><title>${esc(r.capability)}: ${(r.share * 100).toFixed(1)}%</title></rect>`);
    out.push(`<text x="${n2(x(r.share) + 4)}" y="${n2(y + 11)}">${(r.share * 100).toFixed(1)}%</text>`);
  });
  out.push('</svg>');
  return out.join('');
}
