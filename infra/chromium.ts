import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Readable, Writable } from 'node:stream';

/**
 * Debian's headless Chromium driven over the DevTools protocol on a pipe (--remote-debugging-pipe:
 * JSON messages separated by NUL on fds 3/4), so tests need no browser download and no npm driver.
 */
export const CHROMIUM = ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => existsSync(p));

export interface PageCheck {
  /** Console messages of level error/assert and uncaught exceptions. */
  consoleErrors: string[];
  /** Browser log entries of level error (failed loads, CSP, …). */
  logErrors: string[];
  /** Every URL the page requested other than the page itself. */
  requests: string[];
  /** The value of `expression`, evaluated after load. */
  value: unknown;
  /** PNG screenshot of the page, when asked for. */
  screenshot?: Buffer;
}

const FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-dev-shm-usage',
  '--remote-debugging-pipe',
];

type Pending = { resolve(v: any): void; reject(e: Error): void };

class Cdp {
  private nextId = 1;
  private buffer = '';
  private pending = new Map<number, Pending>();
  private listeners: ((m: { method: string; params: any; sessionId?: string }) => void)[] = [];

  constructor(
    private readonly out: Writable,
    input: Readable,
  ) {
    input.setEncoding('utf8');
    input.on('data', (chunk: string) => {
      this.buffer += chunk;
      let i: number;
      while ((i = this.buffer.indexOf('\0')) >= 0) {
        const msg = JSON.parse(this.buffer.slice(0, i));
        this.buffer = this.buffer.slice(i + 1);
        if (msg.id !== undefined) {
          const p = this.pending.get(msg.id);
          this.pending.delete(msg.id);
          if (msg.error) p?.reject(new Error(`${msg.error.message} (${msg.error.code})`));
          else p?.resolve(msg.result);
        } else {
          for (const l of this.listeners) l(msg);
        }
      }
    });
  }

  send(method: string, params: object = {}, sessionId?: string): Promise<any> {
    const id = this.nextId++;
    this.out.write(JSON.stringify({ id, method, params, ...(sessionId ? { sessionId } : {}) }) + '\0');
    return new Promise((resolve, reject) => this.pending.set(id, { resolve, reject }));
  }

  on(listener: (m: { method: string; params: any; sessionId?: string }) => void) {
    this.listeners.push(listener);
  }

  failAll(err: Error) {
    for (const p of this.pending.values()) p.reject(err);
    this.pending.clear();
  }
}

export interface PageOptions {
  screenshot?: boolean;
  /** Capture the whole page rather than the viewport (default true). */
  fullPage?: boolean;
  timeoutMs?: number;
  /** Viewport size (CSS pixels). */
  width?: number;
  height?: number;
  /** After load, poll this expression until it is truthy (pages that render from fetched data). */
  waitFor?: string;
  /** Then wait this long (e.g. for the last data to paint). */
  settleMs?: number;
}

/**
 * Opens `url` in a fresh headless Chromium profile, waits for load (and `settleMs`), evaluates
 * `expression`. Used by the report test and by scripts/ui-screenshots.ts.
 */
export async function checkPage(url: string, expression: string, opts: PageOptions = {}): Promise<PageCheck> {
  if (!CHROMIUM) throw new Error('chromium not installed');
  const profile = await mkdtemp(path.join(tmpdir(), 'trace-chromium-'));
  const child: ChildProcess = spawn(CHROMIUM, [...FLAGS, `--user-data-dir=${profile}`, 'about:blank'], {
    stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr = (stderr + d).slice(-4000)));
  const cdp = new Cdp(child.stdio[3] as Writable, child.stdio[4] as Readable);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.once('exit', (code) =>
    cdp.failAll(new Error(`chromium exited (${code}): ${stderr.trim().split('\n').slice(-3).join(' | ')}`)),
  );
  const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 60_000);
  try {
    const result: PageCheck = { consoleErrors: [], logErrors: [], requests: [], value: undefined };
    const { targetId } = await cdp.send('Target.createTarget', { url: 'about:blank' });
    const { sessionId } = await cdp.send('Target.attachToTarget', { targetId, flatten: true });
    let loaded!: () => void;
    const load = new Promise<void>((r) => (loaded = r));
    cdp.on((m) => {
      if (m.sessionId !== sessionId) return;
      if (m.method === 'Runtime.consoleAPICalled' && (m.params.type === 'error' || m.params.type === 'assert')) {
        result.consoleErrors.push(
          m.params.args
            .map((a: { value?: unknown; description?: string }) => String(a.value ?? a.description))
            .join(' '),
        );
      } else if (m.method === 'Runtime.exceptionThrown') {
        result.consoleErrors.push(m.params.exceptionDetails.exception?.description ?? m.params.exceptionDetails.text);
      } else if (m.method === 'Log.entryAdded' && m.params.entry.level === 'error') {
        result.logErrors.push(`${m.params.entry.source}: ${m.params.entry.text} ${m.params.entry.url ?? ''}`.trim());
      } else if (m.method === 'Network.requestWillBeSent' && m.params.request.url !== url) {
        result.requests.push(m.params.request.url);
      } else if (m.method === 'Page.loadEventFired') {
        loaded();
      }
    });
    for (const domain of ['Runtime', 'Log', 'Network', 'Page']) await cdp.send(`${domain}.enable`, {}, sessionId);
    const viewport = { width: opts.width ?? 1280, height: opts.height ?? 900, deviceScaleFactor: 1, mobile: false };
    await cdp.send('Emulation.setDeviceMetricsOverride', viewport, sessionId);
    await cdp.send('Page.navigate', { url }, sessionId);
    await load;
    for (let waited = 0; opts.waitFor; waited += 250) {
      const ready = await cdp.send(
        'Runtime.evaluate',
        { expression: `Boolean(${opts.waitFor})`, returnByValue: true },
        sessionId,
      );
      if (ready.result?.value === true) break;
      if (waited > (opts.timeoutMs ?? 60_000) / 2) throw new Error(`page never satisfied: ${opts.waitFor}`);
      await new Promise((r) => setTimeout(r, 250));
    }
    if (opts.settleMs) await new Promise((r) => setTimeout(r, opts.settleMs));
    const ev = await cdp.send('Runtime.evaluate', { expression, returnByValue: true }, sessionId);
    if (ev.exceptionDetails)
      throw new Error(`evaluate failed: ${ev.exceptionDetails.exception?.description ?? ev.exceptionDetails.text}`);
    result.value = ev.result.value;
    if (opts.screenshot) {
      const shot = await cdp.send(
        'Page.captureScreenshot',
        { format: 'png', captureBeyondViewport: opts.fullPage ?? true },
        sessionId,
      );
      result.screenshot = Buffer.from(shot.data, 'base64');
    }
    await cdp.send('Browser.close').catch(() => undefined);
    return result;
  } finally {
    clearTimeout(timer);
    if (child.exitCode === null && child.signalCode === null) {
      const grace = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(grace);
    }
    await rm(profile, { recursive: true, force: true });
  }
}
