/**
 * Helpers shared by the inline SVG charts: escaping, linear scales, tick values and a palette.
 * Charts are strings with no external resources, so the report stays one self-contained file.
 */
export const PALETTE = [
  '#2563eb',
  '#dc2626',
  '#16a34a',
  '#9333ea',
  '#ea580c',
  '#0891b2',
  '#ca8a04',
  '#db2777',
  '#4b5563',
  '#65a30d',
];

export function esc(s: string): string {
  return s
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;');
}

/** Fixed-precision coordinates keep the markup small and byte-for-byte reproducible. */
export const n2 = (x: number) => (Number.isInteger(x) ? String(x) : x.toFixed(2));

export function linear(domain: [number, number], range: [number, number]): (x: number) => number {
  const [d0, d1] = domain;
  const [r0, r1] = range;
  const span = d1 - d0 || 1;
  return (x) => r0 + ((x - d0) / span) * (r1 - r0);
}

/** About `count` round tick values covering [lo, hi]. */
export function ticks(lo: number, hi: number, count = 5): number[] {
  if (hi <= lo) return [lo];
  const raw = (hi - lo) / count;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw) ?? raw;
  const out: number[] = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(Number(v.toFixed(10)));
  return out;
}

export interface ChartFrame {
  width: number;
  height: number;
  left: number;
  right: number;
  top: number;
  bottom: number;
}

/** The opening tag with an accessible title; `kind` lets tests and readers find each chart. */
export function openSvg(kind: string, title: string, f: ChartFrame): string {
  return `<svg xmlns="http://www.w3.org/2000/svg" class="chart" data-chart="${esc(kind)}" role="img" aria-label="${esc(title)}" viewBox="0 0 ${f.width} ${f.height}" width="${f.width}" height="${f.height}" font-family="system-ui, sans-serif" font-size="11"><title>${esc(title)}</title>`;
}

/**
 * A horizontal bar chart over [0, 1]: one row of `rowH` per item, labels in the left margin, a
 * grid line and a percent label every 25%. Returns the frame, the x scale and the markup so far.
 */
export function shareBars(
  kind: string,
  title: string,
  rows: number,
  rowH: number,
): { f: ChartFrame; x: (v: number) => number; out: string[] } {
  const f = { width: 560, height: 0, left: 200, right: 60, top: 10, bottom: 24 };
  f.height = f.top + rows * rowH + f.bottom;
  const x = linear([0, 1], [f.left, f.width - f.right]);
  const out = [openSvg(kind, title, f)];
  for (const t of [0, 0.25, 0.5, 0.75, 1]) {
    out.push(`<line x1="${n2(x(t))}" x2="${n2(x(t))}" y1="${f.top}" y2="${f.height - f.bottom}" stroke="#e5e7eb"/>`);
    out.push(`<text x="${n2(x(t))}" y="${f.height - f.bottom + 14}" text-anchor="middle">${t * 100}%</text>`);
  }
  return { f, x, out };
}

/** A chart with nothing to draw says so, instead of an empty frame that looks like a bug. */
export function emptyChart(kind: string, title: string, message: string, width = 560): string {
  const f = { width, height: 60, left: 0, right: 0, top: 0, bottom: 0 };
  return `${openSvg(kind, title, f)}<text x="${width / 2}" y="34" text-anchor="middle" fill="#6b7280">${esc(message)}</text></svg>`;
}

export function legend(items: { label: string; color: string }[], x: number, y: number): string {
  return items
    .map(
      (it, i) =>
        `<g transform="translate(${n2(x)},${n2(y + i * 16)})"><rect width="10" height="10" fill="${it.color}"/><text x="14" y="9">${esc(it.label)}</text></g>`,
    )
    .join('');
}
