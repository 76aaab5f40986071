import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { checkPage } from './chromium.js';

/**
 * Screenshots of the Temporal Web UI (headless Chromium) for the README: the workflow list and each
 * given workflow's page.
 *   node --import tsx infra/ui-screenshots.ts --ui http://127.0.0.1:8233 --workflow [name=]<id> … --out docs/screenshots
 */
const { values } = parseArgs({
  options: {
    ui: { type: 'string', default: 'http://127.0.0.1:8233' },
    namespace: { type: 'string', default: 'default' },
    workflow: { type: 'string', multiple: true, default: [] },
    out: { type: 'string', default: 'docs/screenshots' },
    settle: { type: 'string', default: '3000' },
  },
});
const base = `${values.ui}/namespaces/${encodeURIComponent(values.namespace!)}`;
const pages = [
  { file: 'workflows.png', url: `${base}/workflows` },
  // --workflow <id> or <file-name>=<id>
  ...values.workflow!.map((w) => {
    const [name, id] = w.includes('=')
      ? [w.slice(0, w.indexOf('=')), w.slice(w.indexOf('=') + 1)]
      : [w.replace(/[^A-Za-z0-9_.-]/g, '_'), w];
    return { file: `${name}.png`, url: `${base}/workflows/${encodeURIComponent(id)}` };
  }),
];
await mkdir(values.out!, { recursive: true });
for (const p of pages) {
  const r = await checkPage(p.url, 'document.title', {
    screenshot: true,
    fullPage: false,
    width: 1440,
    height: 960,
    // The UI renders from data it fetches: wait for the workflow rows or the workflow's header.
    waitFor: `/completed|running/i.test(document.body.innerText) && document.body.innerText.length > 600`,
    settleMs: Number(values.settle),
    timeoutMs: 120_000,
  });
  await writeFile(path.join(values.out!, p.file), r.screenshot!);
  console.log(`${p.file}: ${p.url} (${r.value})`);
}
