import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { assembleReport } from '../core/report.js';
import { renderReportHtml } from '../core/report-html.js';
import { CHROMIUM, checkPage } from '../infra/chromium.js';
import { fullReportInputs } from './helpers/report-fixture.js';

const skip = !CHROMIUM && 'chromium is not installed (scripts/setup.sh installs Debian chromium; it needs apt)';

const PROBE = `JSON.stringify({
  title: document.title,
  sections: [...document.querySelectorAll('h2')].map((h) => h.id),
  tables: document.querySelectorAll('table').length,
  charts: [...document.querySelectorAll('svg[data-chart]')].map((s) => {
    const r = s.getBoundingClientRect();
    return { kind: s.dataset.chart, width: r.width, height: r.height, marks: s.querySelectorAll('rect,polyline,circle,path').length };
  }),
})`;

test(
  'the HTML report renders in headless Chromium with every plot and no console errors',
  { skip, timeout: 120_000 },
  async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'trace-report-'));
    try {
      const file = path.join(dir, 'report.html');
      await writeFile(file, renderReportHtml(assembleReport(fullReportInputs())));
      const url = pathToFileURL(file).href;
      const r = await checkPage(url, PROBE, { screenshot: !!process.env.TRACE_REPORT_SCREENSHOT });
      if (r.screenshot) await writeFile(process.env.TRACE_REPORT_SCREENSHOT!, r.screenshot);
      assert.deepEqual(r.consoleErrors, []);
      assert.deepEqual(r.logErrors, []);
      assert.deepEqual(r.requests, [], 'self-contained: no request beyond the page');
      const page = JSON.parse(r.value as string);
      assert.match(page.title, /TRACE report/);
      assert.deepEqual(page.sections, ['evaluation', 'capabilities', 'training', 'cost', 'links']);
      assert.ok(page.tables >= 4);
      assert.deepEqual(page.charts.map((c: { kind: string }) => c.kind).sort(), [
        'capability-gap',
        'pass-rates',
        'reward-curves',
        'routing-share',
      ]);
      for (const c of page.charts) {
        assert.ok(c.width > 200 && c.height > 40, `${c.kind} is laid out (${c.width}×${c.height})`);
        assert.ok(c.marks > 0, `${c.kind} draws marks`);
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  },
);

test(
  'the Chromium check sees console errors and external requests (so it can fail)',
  { skip, timeout: 120_000 },
  async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'trace-report-'));
    try {
      const file = path.join(dir, 'bad.html');
      await writeFile(
        file,
        '<!doctype html><title>x</title><img src="http://127.0.0.1:9/x.png"><script>console.error("boom"); undefinedFn();</script>',
      );
      const r = await checkPage(pathToFileURL(file).href, 'document.title');
      assert.equal(r.value, 'x');
      assert.ok(
        r.consoleErrors.some((e) => e.includes('boom')),
        JSON.stringify(r.consoleErrors),
      );
      assert.ok(r.consoleErrors.some((e) => /undefinedFn/.test(e)));
      assert.ok(r.requests.some((u) => u.startsWith('http://127.0.0.1:9/')));
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  },
);
