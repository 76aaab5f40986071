/**
 * Red-team harness for the sandbox (issue 13's reruns): runs every attack of a table in fresh
 * sandboxes, at the strongest isolation level this machine has, and says which got through.
 *
 * An attack is the body of an async function the env's `attack` tool runs at each request (and
 * optional code run while the module loads, which may hold imports). Each attack runs in a fresh
 * sandbox for four requests with a pause between the second and third (900 ms, with 10 host
 * processes spawned in it: they move machine-wide counters), and in another fresh sandbox for four
 * requests without the pause. It got through when
 *   - the two runs read differently (and a third run without the pause reads as the first: else the
 *     attack itself is nondeterministic, "inconclusive"): the module sensed real time;
 *   - a reading holds the real time (a number within a day of the real clock in s, ms, µs or ns, or
 *     today's date as text), or host data (a secret in the worker's environment, the content of a
 *     host file, the host's name, kernel, CPU model, boot id or machine id);
 *   - a reading holds the text FORGED, which attacks on the protocol put in what they forge
 *     (written so that the source never holds it whole).
 * Errors are readings too ("error: <reason>"): a crash is contained unless it holds the above.
 *
 * Run: node --import tsx bench/sandbox-redteam.ts bench/redteam/<table>.ts [--only a,b] [--json out.json]
 * A table default-exports Record<name, string | { body: string; atImport?: string }>.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import { sandboxIsolation, startSandboxedEnv } from '../envs/sandbox/index.js';
import { ATTACK, attackSource } from '../test/fixtures/sandbox/attack-source.js';

export type Attack = string | { body: string; atImport?: string };

/** Where the harness leaves a host file an attack may try to read (its content is a fresh secret). */
export const HOST_SECRET_FILE = path.join(os.tmpdir(), 'trace-redteam-secret.txt');
/** Host servers that answer every connection with the file's secret: loopback TCP, an abstract and a path unix socket. */
export const HOST_SECRET_PORT = 47321;
export const HOST_SECRET_ABSTRACT = '\0trace-redteam';
export const HOST_SECRET_SOCKET = path.join(os.tmpdir(), 'trace-redteam.sock');

const PAUSE_MS = 900;
const REQUESTS = 4;

type Verdict = 'contained' | 'through' | 'inconclusive';
interface Result {
  name: string;
  verdict: Verdict;
  why: string;
  readings: string[];
}

const envSecret = `sk-redteam-${randomBytes(8).toString('hex')}`;
const fileSecret = `host-file-${randomBytes(8).toString('hex')}`;
process.env.TRACE_REDTEAM_SECRET = envSecret;
writeFileSync(HOST_SECRET_FILE, fileSecret);

const readIf = (file: string) => {
  try {
    return readFileSync(file, 'utf8').trim();
  } catch {
    return undefined;
  }
};

/** Host data no reading may hold, by what it is. */
const HOST_DATA: [string, string][] = (
  [
    ['env secret', envSecret],
    ['host file', fileSecret],
    ['host name', os.hostname()],
    ['kernel', os.release()],
    ['CPU model', os.cpus()[0]?.model],
    ['boot id', readIf('/proc/sys/kernel/random/boot_id')],
    ['machine id', readIf('/etc/machine-id')],
  ] as [string, string | undefined][]
).filter((e): e is [string, string] => typeof e[1] === 'string' && e[1].length >= 4);

const DAY_MS = 86_400_000;

/** Why `reading` holds the real time or host data, if it does. */
function leak(reading: string): string | undefined {
  for (const [what, value] of HOST_DATA) if (reading.includes(value)) return `holds the ${what}`;
  if (reading.includes('FOR' + 'GED')) return 'a forged answer was served';
  const now = Date.now();
  const today = new Date(now).toISOString().slice(0, 10);
  if (reading.includes(today) || reading.includes(new Date(now).toUTCString().slice(0, 16)))
    return `holds today's date (${today})`;
  for (const m of reading.matchAll(/\d{9,22}(\.\d+)?/g)) {
    const n = Number(m[0]);
    for (const [unit, scale] of [
      ['s', 1e-3],
      ['ms', 1],
      ['µs', 1e3],
      ['ns', 1e6],
    ] as const)
      if (Math.abs(n / scale - now) < DAY_MS) return `holds the real time in ${unit} (${m[0]})`;
  }
  return undefined;
}

/** Four readings of one attack in a fresh sandbox; a pause (and host activity) after the second if asked. */
async function readings(attack: Attack, pause: boolean): Promise<string[]> {
  const { body, atImport } = typeof attack === 'string' ? { body: attack, atImport: '' } : attack;
  const out: string[] = [];
  let env;
  try {
    env = await startSandboxedEnv({ source: attackSource(body, atImport ?? '') });
  } catch (e) {
    return [`error at start: ${(e as Error).message}`];
  }
  try {
    const ep = await env.reset({ taskId: 'attack' });
    for (let n = 0; n < REQUESTS; n++) {
      if (pause && n === 2) {
        const t = Date.now();
        for (let i = 0; i < 10; i++) spawnSync('true');
        await sleep(Math.max(0, PAUSE_MS - (Date.now() - t)));
      }
      try {
        out.push(unkeyed((await ep.step(ATTACK)).observation.content ?? ''));
      } catch (e) {
        out.push(unkeyed(`error: ${(e as Error).message}`));
        break;
      }
    }
  } catch (e) {
    out.push(`error: ${(e as Error).message}`);
  } finally {
    await env.close().catch(() => {});
  }
  return out;
}

/** A line's MAC differs with each session's key, an episode id with each run: not readings. */
const unkeyed = (s: string) =>
  s
    .replace(/\b[0-9a-f]{64}\b/g, '<mac>')
    .replace(/\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b/g, '<uuid>');

const same = (a: string[], b: string[]) => JSON.stringify(a) === JSON.stringify(b);

export async function runAttack(name: string, attack: Attack): Promise<Result> {
  const still = await readings(attack, false);
  const paused = await readings(attack, true);
  for (const r of [...still, ...paused]) {
    const why = leak(r);
    if (why) return { name, verdict: 'through', why, readings: paused };
  }
  if (same(still, paused)) return { name, verdict: 'contained', why: '', readings: paused };
  const again = await readings(attack, false);
  if (!same(still, again))
    return {
      name,
      verdict: 'inconclusive',
      why: 'differs between two runs without a pause',
      readings: [...still, '|', ...again],
    };
  return { name, verdict: 'through', why: 'moved with the pause', readings: [...still, '|', ...paused] };
}

async function main() {
  const args = process.argv.slice(2);
  const table = args.find((a) => !a.startsWith('--') && /\.[cm]?[jt]s$/.test(a));
  if (!table) {
    console.error('usage: node --import tsx bench/sandbox-redteam.ts <table.ts> [--only a,b] [--json out.json]');
    process.exit(2);
  }
  const opt = (k: string) => (args.includes(k) ? args[args.indexOf(k) + 1] : undefined);
  const only = opt('--only')?.split(',');
  const attacks = (await import(pathToFileURL(path.resolve(table)).href)).default as Record<string, Attack>;
  const names = Object.keys(attacks).filter((n) => !only || only.includes(n));
  rmSync(HOST_SECRET_SOCKET, { force: true });
  const servers = [HOST_SECRET_PORT, HOST_SECRET_ABSTRACT, HOST_SECRET_SOCKET].map((at) =>
    net.createServer((c) => c.end(fileSecret)).listen(typeof at === 'number' ? { port: at, host: '127.0.0.1' } : at),
  );
  console.log(`# sandbox isolation: ${(await sandboxIsolation()).summary}`);
  console.log(`# ${names.length} attacks from ${table}`);
  const results: Result[] = [];
  for (const name of names) {
    const r = await runAttack(name, attacks[name]);
    results.push(r);
    const shown = r.readings.map((x) => (x.length > 160 ? `${x.slice(0, 160)}…` : x)).join(' ; ');
    console.log(`${r.verdict.padEnd(12)} ${name}${r.why ? ` (${r.why})` : ''}: ${shown}`);
  }
  const count = (v: Verdict) => results.filter((r) => r.verdict === v).length;
  console.log(
    `# ${results.length} attacks: ${count('contained')} contained, ${count('through')} through, ${count('inconclusive')} inconclusive`,
  );
  const json = opt('--json');
  if (json) writeFileSync(json, JSON.stringify(results, null, 2));
  for (const s of servers) s.close();
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await main();
