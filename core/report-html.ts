import { categoryBreakdown, formatInterval, formatMean, isSimilarityEnv, pct, type Report } from './report.js';
import { capabilityGapChart } from './svg/capability-gap.js';
import { esc } from './svg/common.js';
import { passRateChart } from './svg/pass-rates.js';
import { rewardCurvesChart } from './svg/reward-curves.js';
import { routingShareChart } from './svg/routing-share.js';

/**
 * The report as one self-contained HTML page: inline CSS and SVG, no scripts, no external
 * resources, so it opens from a file, a mail attachment or an artifact bucket alike.
 */
const CSS = `
body{font:14px/1.45 system-ui,sans-serif;color:#111827;max-width:1100px;margin:24px auto;padding:0 16px}
h1{font-size:22px;margin-bottom:4px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #e5e7eb;padding-bottom:4px}
table{border-collapse:collapse;margin:8px 0;font-variant-numeric:tabular-nums}
th,td{border:1px solid #e5e7eb;padding:4px 8px;text-align:left;vertical-align:top}th{background:#f9fafb}
td.num{text-align:right;white-space:nowrap}.muted{color:#6b7280}.pos{color:#15803d}.neg{color:#b91c1c}
.notes li{margin:2px 0}.chart{display:block;margin:8px 0;max-width:100%;height:auto}
.badge{display:inline-block;padding:0 6px;border-radius:8px;font-size:12px;background:#e5e7eb}
.badge.ok{background:#dcfce7}.badge.failed{background:#fee2e2}
`;

const td = (s: string, cls = '') => `<td${cls ? ` class="${cls}"` : ''}>${s}</td>`;
const th = (s: string) => `<th>${esc(s)}</th>`;

function deltaCell(d: Report['variants'][number]['deltaVsBase']): string {
  if (!d) return td('—', 'num muted');
  const cls = d.low !== null && d.low > 0 ? 'num pos' : d.high !== null && d.high < 0 ? 'num neg' : 'num';
  return td(esc(formatInterval(d, true)), cls);
}

/** ToolSandbox's per-category breakdown: per category and variant, mean similarity and perfect count. */
function categorySection(r: Report): string {
  const rows = categoryBreakdown(r.variants);
  if (rows.length === 0) return '';
  const header = ['category', ...r.variants.flatMap((v) => [`${v.name} mean similarity`, `${v.name} perfect`])];
  const body = rows
    .map(
      (row) =>
        `<tr>${td(esc(row.category))}${row.cells.map((c) => td(esc(c.meanSimilarity), 'num') + td(esc(c.perfect), 'num')).join('')}</tr>`,
    )
    .join('');
  return `<h3>Per category</h3><p class="muted">A scenario counts in each of its categories; perfect = similarity 1.0.</p><table><tr>${header.map(th).join('')}</tr>${body}</table>`;
}

function variantsSection(r: Report): string {
  if (!r.evaluation) return '<p class="muted">No evaluation ran in this run.</p>';
  const e = r.evaluation;
  const head = `<p>Held-out split <b>${esc(e.split)}</b>, ${e.trials} trial(s) per task at temperature ${e.temperature}. Intervals are 95%: ${
    e.trials > 1 ? 't over per-trial pass rates' : 'Wilson over tasks'
  }; deltas are paired over the same tasks (bootstrap over tasks).</p>`;
  const similarityEnv = isSimilarityEnv(r.env);
  const domains = [...new Set(r.variants.flatMap((v) => v.perDomain.map((d) => d.domain)))];
  const domainHead = domains.flatMap((d) => [th(`${d} pass rate`), th(`${d} Δ`)]).join('');
  const rows = r.variants
    .map((v) => {
      const perDomain = domains
        .map((d) => {
          const row = v.perDomain.find((x) => x.domain === d);
          return row
            ? td(esc(formatInterval(row.passRate)), 'num') + deltaCell(row.deltaVsBase)
            : td('—', 'muted') + td('—', 'muted');
        })
        .join('');
      const passK = v.passHatK.map((p) => `k=${p.k}: ${pct(p.value)}`).join(', ');
      const similarity = similarityEnv ? td(esc(v.meanReward ? formatMean(v.meanReward) : '—'), 'num') : '';
      return `<tr>${td(`<b>${esc(v.name)}</b>`)}${td(esc(v.kind))}${td(esc(v.model ?? ''), 'muted')}${td(String(v.tasks), 'num')}${similarity}${td(
        `${v.successes}/${v.episodes}`,
        'num',
      )}${td(esc(formatInterval(v.passRate)), 'num')}${deltaCell(v.deltaVsBase)}${domains.length > 1 ? perDomain : ''}${td(esc(passK), 'muted')}</tr>`;
    })
    .join('');
  // ToolSandbox (the paper's Table 3): mean similarity beside the perfect (= 1.0) rate, which is the pass rate.
  const header = similarityEnv
    ? ['variant', 'kind', 'model', 'tasks', 'mean similarity', 'perfect', 'perfect rate', 'Δ vs base']
    : ['variant', 'kind', 'model', 'tasks', 'successes', 'pass rate (overall)', 'Δ vs base'];
  const table = `<table><tr>${header.map(th).join('')}${
    domains.length > 1 ? domainHead : ''
  }${th('pass^k')}</tr>${rows}</table>`;
  const chart = passRateChart(
    r.variants.map((v) => ({
      name: v.name,
      estimate: v.passRate.estimate,
      low: v.passRate.low,
      high: v.passRate.high,
    })),
  );
  return head + table + (similarityEnv ? categorySection(r) : '') + chart;
}

const badge = (status: string) =>
  `<span class="badge ${status === 'ok' ? 'ok' : status === 'failed' ? 'failed' : ''}">${esc(status)}</span>`;
const fix = (x: number | null, d = 2) => (x === null ? '—' : x.toFixed(d));

function capabilitiesSection(r: Report): string {
  const a = r.analysis;
  const intro = a
    ? `<p>${a.trajectories} trajectories (${a.successes} successes) labelled in ${a.passes} passes; a capability is selected when Δ ≥ ${a.deltaThreshold} and Cov ≥ ${a.coverageThreshold} in at least ${a.minPassesSelected} of ${a.passes} passes.</p>`
    : '';
  if (r.capabilities.length === 0) return `${intro}<p class="muted">No capabilities were identified in this run.</p>`;
  const rows = r.capabilities
    .map((c) => {
      const last = c.training.curve.at(-1);
      const first = c.training.curve[0];
      const h = c.training.heldout;
      const held = h.length > 1 ? `; held-out ${h[0].meanReward.toFixed(2)} → ${h.at(-1)!.meanReward.toFixed(2)}` : '';
      const curve = last
        ? `${first.meanReward.toFixed(2)} → ${last.meanReward.toFixed(2)} (${c.training.curve.length} iters)${held}`
        : '—';
      return `<tr>${td(`<b>${esc(c.name)}</b><br><span class="muted">${esc(c.description)}</span>`)}${td(
        `${fix(c.meanDelta)} ± ${fix(c.stdDelta)}`,
        'num',
      )}${td(`${fix(c.meanCoverage)} ± ${fix(c.stdCoverage)}`, 'num')}${td(`${c.passesSelected}/${c.passes}`, 'num')}${td(c.selected ? 'yes' : 'no')}${td(
        `${badge(c.synthesis.status)} ${c.synthesis.attempts} attempt(s)${c.synthesis.message ? `<br><span class="muted">${esc(c.synthesis.message)}</span>` : ''}`,
      )}${td(`${badge(c.training.status)} ${esc(curve)}${c.training.message ? `<br><span class="muted">${esc(c.training.message)}</span>` : ''}`)}${td(
        pct(c.routingShare),
        'num',
      )}</tr>`;
    })
    .join('');
  const table = `<table><tr>${['capability', 'mean Δ ± std', 'mean Cov ± std', 'selected in', 'selected', 'synthesized env', 'adapter training (reward)', 'gate share'].map(th).join('')}</tr>${rows}</table>`;
  const gap = capabilityGapChart(r.capabilities, {
    delta: a?.deltaThreshold ?? 0.2,
    coverage: a?.coverageThreshold ?? 0.1,
  });
  return intro + table + gap;
}

function trainingSection(r: Report): string {
  const curves = rewardCurvesChart(
    r.capabilities.flatMap((c) => [
      { capability: c.name, points: c.training.curve },
      ...(c.training.heldout.length ? [{ capability: `${c.name} (held-out)`, points: c.training.heldout }] : []),
    ]),
  );
  const gate = routingShareChart(r.gate?.routing ?? []);
  const gateNote = [
    r.gate?.note,
    r.gate?.peakRssMb !== undefined
      ? `Peak memory of the gate fit: ${(r.gate.peakRssMb / 1024).toFixed(2)} GiB.`
      : undefined,
  ]
    .filter((n) => n)
    .map((n) => `<p class="muted">${esc(n!)}</p>`)
    .join('');
  return `<h3>Adapter training</h3>${curves}<h3>Mixture-of-experts gate</h3>${gate}${gateNote}`;
}

function costSection(r: Report): string {
  const c = r.cost;
  const llm = c.llm.length
    ? `<table><tr>${['role', 'calls', 'prompt tokens', 'completion tokens'].map(th).join('')}</tr>${c.llm
        .map(
          (u) =>
            `<tr>${td(esc(u.role))}${td(String(u.calls), 'num')}${td(String(u.promptTokens), 'num')}${td(String(u.completionTokens), 'num')}</tr>`,
        )
        .join('')}</table>`
    : '<p class="muted">No LLM usage recorded.</p>';
  return `${llm}<table><tr>${th('rollouts')}${th('evaluation episodes')}${th('GPU training seconds')}${th('CPU training seconds')}</tr><tr>${td(String(c.rollouts), 'num')}${td(
    String(c.evaluationEpisodes),
    'num',
  )}${td(c.gpuSeconds.toFixed(0), 'num')}${td(c.cpuSeconds.toFixed(0), 'num')}</tr></table>`;
}

function linksSection(r: Report): string {
  const items = [
    ...(r.links.run ? [{ label: `pipeline workflow ${r.runId}`, url: r.links.run }] : []),
    ...r.links.children,
    ...r.variants
      .filter((v) => v.summaryUri)
      .map((v) => ({ label: `evaluation results: ${v.name}`, url: v.summaryUri! })),
  ];
  if (items.length === 0) return '<p class="muted">No links recorded.</p>';
  return `<ul>${items.map((l) => `<li><a href="${esc(l.url)}">${esc(l.label)}</a></li>`).join('')}</ul>`;
}

export function renderReportHtml(r: Report): string {
  const promotion = r.promotion
    ? `<p><b>Promotion:</b> ${r.promotion.promote ? 'promoted' : 'not promoted'} — ${esc(r.promotion.reason)}</p>`
    : '';
  const notes = r.notes.length ? `<ul class="notes">${r.notes.map((n) => `<li>${esc(n)}</li>`).join('')}</ul>` : '';
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>TRACE report — ${esc(r.name)} (${esc(r.runId)})</title><style>${CSS}</style></head>
<body>
<h1>TRACE report — ${esc(r.name)}</h1>
<p class="muted">run <code>${esc(r.runId)}</code> · environment <b>${esc(r.env)}</b> · generated ${esc(r.generatedAt)}</p>
${promotion}${notes}
<h2 id="evaluation">Is the trained agent better? Pass rate on held-out tasks</h2>
${variantsSection(r)}
<h2 id="capabilities">Capabilities (stage 1) and their environments and adapters</h2>
${capabilitiesSection(r)}
<h2 id="training">Training curves and gate routing</h2>
${trainingSection(r)}
<h2 id="cost">Cost</h2>
${costSection(r)}
<h2 id="links">Links</h2>
${linksSection(r)}
</body></html>
`;
}
