import { PALETTE, emptyChart, esc, n2, shareBars } from './common.js';

/** Share of tokens the MoE gate routes (top-1) to each capability's adapter. */
export function routingShareChart(routing: readonly { capability: string; share: number }[]): string {
  const title = 'Gate routing share per capability';
  if (routing.length === 0) return emptyChart('routing-share', title, 'no gate was fitted in this run');
  const rowH = 22;
  const { f, x, out } = shareBars('routing-share', title, routing.length, rowH);
  routing.forEach((r, i) => {
    const y = f.top + i * rowH + 4;
    const color = PALETTE[i % PALETTE.length];
    out.push(`<text x="${f.left - 6}" y="${n2(y + 11)}" text-anchor="end">${esc(r.capability)}</text>`);
    out.push(
      `<rect x="${f.left}" y="${n2(y)}" width="${n2(x(r.share) - f.left)}" height="14" fill="${color}"><title>${esc(r.capability)}: ${(r.share * 100).toFixed(1)}%</title></rect>`,
    );
    out.push(`<text x="${n2(x(r.share) + 4)}" y="${n2(y + 11)}">${(r.share * 100).toFixed(1)}%</text>`);
  });
  out.push('</svg>');
  return out.join('');
}
