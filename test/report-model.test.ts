import { test } from 'node:test';
import assert from 'node:assert/strict';
import { passRateDelta, summarizeEvaluation } from '../core/evaluation.js';
import { assembleReport, formatSummary, ReportSchema } from '../core/report.js';
import { renderReportHtml } from '../core/report-html.js';
import { episodesFrom, fullReportInputs, summaryOf } from './helpers/report-fixture.js';

test('evaluation summary: Wilson over tasks when greedy, per-domain rows, usage totals', () => {
  const s = summaryOf({ name: 'base', kind: 'base' }, [
    ...episodesFrom('base', 'airline', '1100'),
    ...episodesFrom('base', 'retail', '1'),
  ]);
  assert.equal(s.overall.tasks, 5);
  assert.equal(s.overall.successes, 3);
  assert.equal(s.overall.passRate.method, 'wilson');
  assert.equal(s.overall.passRate.estimate, 0.6);
  assert.deepEqual(
    s.perDomain.map((d) => [d.domain, d.successes, d.tasks]),
    [
      ['airline', 2, 4],
      ['retail', 1, 1],
    ],
  );
  assert.equal(s.usage.calls, 10);
  assert.deepEqual(s.terminations, { agent_stop: 5 });
});

test('evaluation summary with trials: t interval over trials and pass^k', () => {
  const eps = [
    ...episodesFrom('v', 'airline', '1110'),
    ...episodesFrom('v', 'airline', '1100', 1),
    ...episodesFrom('v', 'airline', '1000', 2),
  ];
  const s = summarizeEvaluation({ name: 'v', kind: 'base' }, 'test', 3, 1, eps);
  assert.equal(s.overall.passRate.method, 't');
  assert.equal(s.overall.passRate.estimate, 6 / 12);
  assert.ok(s.overall.passRate.low! < 0.5 && s.overall.passRate.high! > 0.5);
  // per task successes: t0 3/3, t1 2/3, t2 1/3, t3 0/3 → pass^1 = 0.5, pass^2 = (1 + 1/3)/4, pass^3 = 1/4
  assert.deepEqual(
    s.overall.passHatK.map((p) => Number(p.value.toFixed(4))),
    [0.5, Number(((1 + 1 / 3) / 4).toFixed(4)), 0.25],
  );
});

test('delta is paired over shared tasks and unpaired (Newcombe) when no task is shared', () => {
  const a = summaryOf({ name: 'a', kind: 'trace' }, episodesFrom('a', 'd', '1111011110')).perTask;
  const b = summaryOf({ name: 'b', kind: 'base' }, episodesFrom('b', 'd', '0111011100')).perTask;
  const d = passRateDelta(a, b);
  assert.equal(d.method, 'bootstrap');
  assert.ok(Math.abs(d.estimate! - 0.2) < 1e-12);
  assert.ok(d.low! >= 0 && d.high! <= 0.5);
  const other = b.map((o) => ({ ...o, taskId: `x${o.taskId}` }));
  assert.equal(passRateDelta(a, other).method, 'newcombe');
});

test('assembled report: deltas against base, routing shares joined, schema-valid, summary lists every variant', () => {
  const r = assembleReport(fullReportInputs());
  ReportSchema.parse(r);
  const byName = Object.fromEntries(r.variants.map((v) => [v.name, v]));
  assert.equal(byName.base.deltaVsBase, null);
  assert.ok(Math.abs(byName.trace.deltaVsBase!.estimate! - (9 / 15 - 5 / 15)) < 1e-12);
  assert.equal(byName.trace.perDomain.find((d) => d.domain === 'retail')!.deltaVsBase!.estimate, 0.2);
  assert.equal(r.capabilities[0].routingShare, 1);
  assert.equal(r.capabilities[2].synthesis.status, 'not_run');
  const text = formatSummary(r);
  for (const name of ['base', 'trace', 'prompt_only', 'structured_data_reasoning'])
    assert.match(text, new RegExp(name));
  assert.match(text, /Δ vs base/);
  assert.match(text, /\+26\.7 pp/);
});

test('a report without a base variant says deltas are unavailable instead of inventing them', () => {
  const inputs = fullReportInputs();
  const r = assembleReport({ ...inputs, evaluations: inputs.evaluations!.filter((e) => e.variant.kind !== 'base') });
  assert.ok(r.variants.every((v) => v.deltaVsBase === null));
  assert.ok(r.notes.some((n) => /no base variant/.test(n)));
});

test('HTML is self-contained, escapes text and contains every chart', () => {
  const html = renderReportHtml(assembleReport(fullReportInputs()));
  for (const kind of ['pass-rates', 'capability-gap', 'reward-curves', 'routing-share'])
    assert.match(html, new RegExp(`data-chart="${kind}"`));
  assert.doesNotMatch(html, /<script|<link|src=|url\(/i, 'no scripts or external resources');
  assert.match(html, /demo &lt;run&gt;/);
  assert.doesNotMatch(html, /demo <run>/);
  assert.match(html, /DB records &amp; reasons/);
});

test('an empty run (stage 1 only) renders honest placeholders', () => {
  const r = assembleReport({
    runId: 'r',
    name: 'n',
    env: 'toy',
    generatedAt: 't',
    notes: ['stages 2–4 not configured'],
  });
  const html = renderReportHtml(r);
  assert.match(html, /No evaluation ran/);
  assert.match(html, /no adapter was trained/);
  assert.match(formatSummary(r), /no evaluation in this run/);
});
