import assert from 'node:assert/strict';
import { test } from 'node:test';
import { summarizeEvaluation, type EvalEpisode } from '../core/evaluation.js';
import { renderReportHtml } from '../core/report-html.js';
import { assembleReport, formatSummary } from '../core/report.js';
import { summarise } from '../envs/toolsandbox/evaluator.js';
import { BASE_VARIANT, loadScenarios } from '../envs/toolsandbox/scenarios.js';

/**
 * The report's per-category breakdown for ToolSandbox runs: the evaluation summary groups episodes by
 * the categories the env's reward details name, and the report's numbers are the evaluator's own
 * `summarise` (mean similarity, perfect count per category) on the same scenarios and similarities.
 */
const scenarios = loadScenarios()
  .filter((s) => s.variant === BASE_VARIANT)
  .slice(0, 40);

function episodes(variant: string, similarity: (i: number) => number): EvalEpisode[] {
  return scenarios.map((s, i) => ({
    variant,
    domain: 'toolsandbox',
    taskId: s.name,
    trial: 0,
    success: similarity(i) === 1,
    reward: similarity(i),
    termination: 'user_stop',
    steps: 3,
    usage: { calls: 1, promptTokens: 10, completionTokens: 5 },
    durationMs: 1,
    model: 'm',
    temperature: 0,
    categories: s.categories,
  }));
}

test('toolsandbox report: per-category mean similarity and perfect count equal the evaluator summarise, in text and HTML', () => {
  const base = (i: number) => (i % 3 === 0 ? 1 : (i % 7) / 10);
  const trained = (i: number) => (i % 2 === 0 ? 1 : (i % 5) / 8);
  const report = assembleReport({
    runId: 'r',
    name: 'n',
    env: 'toolsandbox',
    generatedAt: '2026-12-02T00:00:00Z',
    evaluations: [
      summarizeEvaluation({ name: 'base', kind: 'base' }, 'test', 1, 0, episodes('base', base)),
      summarizeEvaluation({ name: 'trace', kind: 'trace' }, 'test', 1, 0, episodes('trace', trained)),
    ],
  });
  const text = formatSummary(report);
  const html = renderReportHtml(report);
  for (const [vi, sim] of [base, trained].entries()) {
    const expected = summarise(scenarios.map((s, i) => ({ similarity: sim(i), categories: s.categories })));
    const row = report.variants[vi];
    assert.deepEqual(
      row.perCategory.map((c) => c.category),
      Object.keys(expected.byCategory),
    );
    for (const c of row.perCategory) {
      const e = expected.byCategory[c.category];
      assert.equal(c.episodes, e.n);
      assert.equal(c.successes, e.perfect);
      assert.ok(Math.abs(c.meanReward!.estimate! - e.meanSimilarity) < 1e-12, c.category);
      assert.ok(html.includes(`${c.successes}/${c.episodes}`));
    }
  }
  // Seven upstream categories among the first 40 base scenarios, each with its own line in both renderings.
  const categories = report.variants[0].perCategory.map((c) => c.category);
  assert.ok(categories.length >= 6, categories.join());
  const lines = text.split('\n');
  for (const c of report.variants[0].perCategory) {
    const t = report.variants[1].perCategory.find((x) => x.category === c.category)!;
    const line = lines.find((l) => l.startsWith(`${c.category} `));
    assert.ok(line, `no line for ${c.category} in\n${text}`);
    assert.match(
      line,
      new RegExp(
        `${c.meanReward!.estimate!.toFixed(3)} .*${c.successes}/${c.episodes}.*${t.meanReward!.estimate!.toFixed(3)} .*${t.successes}/${t.episodes}`,
      ),
    );
    assert.ok(html.includes(`<td>${c.category}</td>`));
  }
  assert.match(html, /<h3>Per category<\/h3>/);
});

test('a summary without categories (other envs) gives no per-category section', () => {
  const eps = episodes('base', () => 1).map(({ categories: _categories, ...e }) => e);
  const summary = summarizeEvaluation({ name: 'base', kind: 'base' }, 'test', 1, 0, eps);
  assert.deepEqual(summary.perCategory, []);
  const report = assembleReport({
    runId: 'r',
    name: 'n',
    env: 'toolsandbox',
    generatedAt: '2026-12-02T00:00:00Z',
    evaluations: [summary],
  });
  assert.doesNotMatch(formatSummary(report), /per category/);
  assert.doesNotMatch(renderReportHtml(report), /Per category/);
});
