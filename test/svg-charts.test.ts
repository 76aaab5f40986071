import { test } from 'node:test';
import assert from 'node:assert/strict';
import { capabilityGapChart } from '../core/svg/capability-gap.js';
import { ticks } from '../core/svg/common.js';
import { passRateChart } from '../core/svg/pass-rates.js';
import { rewardCurvesChart } from '../core/svg/reward-curves.js';
import { routingShareChart } from '../core/svg/routing-share.js';

const count = (s: string, re: RegExp) => (s.match(re) ?? []).length;

test('ticks are round and cover the range', () => {
  assert.deepEqual(ticks(0, 1), [0, 0.2, 0.4, 0.6, 0.8, 1]);
  assert.deepEqual(ticks(0, 40, 8), [0, 5, 10, 15, 20, 25, 30, 35, 40]);
});

test('capability gap chart: two bars per capability, threshold lines, selected marked, deterministic', () => {
  const data = [
    { name: 'a_cap', meanDelta: 0.4, stdDelta: 0.1, meanCoverage: 0.3, stdCoverage: 0.05, selected: true },
    { name: 'b<cap>', meanDelta: -0.1, stdDelta: 0, meanCoverage: 0.02, stdCoverage: 0, selected: false },
    { name: 'c_cap', meanDelta: null, stdDelta: null, meanCoverage: null, stdCoverage: null, selected: false },
  ];
  const svg = capabilityGapChart(data, { delta: 0.2, coverage: 0.1 });
  assert.equal(svg, capabilityGapChart(data, { delta: 0.2, coverage: 0.1 }));
  assert.equal(
    count(svg, /<rect x="[\d.]+" y="[\d.]+" width/g),
    4,
    'two bars each for the two capabilities with numbers',
  );
  assert.match(svg, /δ=0\.2/);
  assert.match(svg, /ρ=0\.1/);
  assert.match(svg, /font-weight="bold">a_cap ✓/);
  assert.match(svg, /b&lt;cap&gt;/);
  assert.match(svg, /n\/a/);
  // Ranked by mean Δ: a_cap is drawn first (top).
  assert.ok(svg.indexOf('a_cap') < svg.indexOf('b&lt;cap'));
  // No data beyond the thresholds: δ is the axis maximum and its label stays inside the frame.
  const edge = capabilityGapChart([data[2]], { delta: 0.2, coverage: 0.1 });
  assert.match(edge, /text-anchor="end" y="[\d.]+" fill="[^"]+">δ=0\.2</);
  assert.doesNotMatch(edge, /text-anchor="end" y="[\d.]+" fill="[^"]+">ρ=0\.1</);
});

test('reward curves: one polyline per trained capability, points inside the frame', () => {
  const svg = rewardCurvesChart([
    {
      capability: 'x',
      points: [
        { iteration: 0, meanReward: 0.1 },
        { iteration: 1, meanReward: 0.5 },
        { iteration: 2, meanReward: 0.9 },
      ],
    },
    {
      capability: 'y',
      points: [
        { iteration: 0, meanReward: 0.3 },
        { iteration: 2, meanReward: 0.2 },
      ],
    },
    { capability: 'untrained', points: [] },
  ]);
  assert.equal(count(svg, /<polyline/g), 2);
  assert.equal(count(svg, /<circle/g), 5);
  assert.doesNotMatch(svg, /untrained/);
  for (const m of svg.matchAll(/cx="([\d.-]+)" cy="([\d.-]+)"/g)) {
    const [cx, cy] = [Number(m[1]), Number(m[2])];
    assert.ok(cx >= 46 && cx <= 460 && cy >= 16 && cy <= 244, `point ${cx},${cy} outside plot`);
  }
  // higher reward is drawn higher (smaller y)
  const ys = [...svg.matchAll(/<circle cx="[\d.]+" cy="([\d.]+)"/g)].map((m) => Number(m[1]));
  assert.ok(ys[0] > ys[1] && ys[1] > ys[2]);
  assert.match(rewardCurvesChart([]), /no adapter was trained/);
});

test('routing share and pass-rate bars scale with their values', () => {
  const svg = routingShareChart([
    { capability: 'a', share: 0.75 },
    { capability: 'b', share: 0.25 },
  ]);
  const widths = [...svg.matchAll(/<rect x="200" y="[\d.]+" width="([\d.]+)"/g)].map((m) => Number(m[1]));
  assert.equal(widths.length, 2);
  assert.ok(Math.abs(widths[0] / widths[1] - 3) < 1e-6);
  assert.match(routingShareChart([]), /no gate was fitted/);
  const pr = passRateChart([
    { name: 'base', estimate: 0.5, low: 0.3, high: 0.7 },
    { name: 'n/a', estimate: null, low: null, high: null },
  ]);
  assert.equal(count(pr, /<path d="M/g), 1, 'one CI whisker');
  assert.match(pr, /not evaluated/);
});
