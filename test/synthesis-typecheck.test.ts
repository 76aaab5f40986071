import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { TYPECHECK_LIMITS, TypeCheckError, typeErrors } from '../activities/synthesis/candidate.js';
import { checkCompile } from '../activities/synthesis/validate.js';
import { GOOD_MANIFEST, GOOD_SOURCE } from './fixtures/synthesis/scripts.js';

/** Issue 13 item 10: the type-check (seconds of synchronous tsc work) runs off the worker's event loop. */
test('type-checking a candidate leaves the event loop free (timers keep firing during the check)', async () => {
  let ticks = 0;
  const timer = setInterval(() => ticks++, 10);
  try {
    const t0 = performance.now();
    const broken = await typeErrors(GOOD_SOURCE.replace('return orders;', 'return orders.nope;'));
    const ms = performance.now() - t0;
    assert.match(broken[0] ?? '', /Property 'nope' does not exist/);
    // A blocked loop fires no timer while the check runs; a free one fires about every 10 ms.
    assert.ok(ticks >= Math.min(5, ms / 100), `${ticks} timer ticks during a ${ms.toFixed(0)} ms type-check`);
    console.log(`# first type-check ${ms.toFixed(0)} ms, ${ticks} timer ticks meanwhile`);
    assert.deepEqual(await typeErrors(GOOD_SOURCE), []);
  } finally {
    clearInterval(timer);
  }
});

/** tsc runs outside the sandbox on the module's text: types that spin, exhaust or crash it fail check 1 with the limit. */
test("a module's types that crash, spin or exhaust the type-checker fail check 1 naming what broke; the next check runs", async () => {
  // Each alias doubles the last: a 2^27 × 8-character string type is past V8's longest string
  // (before: typeErrors rejected with a plain error and checkCompile threw, failing the activity).
  let doubling = `type D0 = 'abcdefgh';\n`;
  for (let i = 1; i <= 27; i++)
    doubling += `type D${i} = \`\${D${i - 1}}\${D${i - 1}}\`;\nexport type E${i} = D${i};\n`;
  const crashed = await checkCompile(`${doubling}${GOOD_SOURCE}`, GOOD_MANIFEST, {
    runner: 'in-process',
    typecheck: true,
  });
  assert.equal(crashed.result.passed, false);
  assert.match(
    crashed.result.reason!,
    /^the module crashed the type-checker: Invalid string length: simplify its types$/,
  );

  // 60 string types built by 999 recursive steps each: seconds of CPU, stopped at the limit.
  let spin = `type Rep<S extends string, N extends unknown[] = []> = N['length'] extends 999 ? S : Rep<\`\${S}a\`, [...N, 0]>;\n`;
  for (let i = 0; i < 60; i++)
    spin += `export type Z${i} = Rep<'${i}'>; declare const z${i}: Z${i}; export const l${i}: number = z${i}.length;\n`;
  await assert.rejects(
    typeErrors(spin, 5, { cpuSeconds: 2, memoryMb: TYPECHECK_LIMITS.memoryMb }),
    (e: Error) => e instanceof TypeCheckError && /busy past its CPU limit \(2 s\)/.test(e.message),
  );
  // The lib and node typings alone need more than 64 MiB of heap.
  await assert.rejects(
    typeErrors(GOOD_SOURCE, 5, { cpuSeconds: TYPECHECK_LIMITS.cpuSeconds, memoryMb: 64 }),
    (e: Error) => e instanceof TypeCheckError && /out of memory \(limit 64 MiB\)/.test(e.message),
  );
  assert.deepEqual(await typeErrors(GOOD_SOURCE), []);
});

/** An outside pass (2026-12-04): tsc read host files the module named and quoted their types in the reasons. */
test('the type-checker sees no host file outside the candidates, the repo code the SDK needs and node_modules', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'trace-host-'));
  try {
    writeFileSync(path.join(dir, 'config.ts'), "export const API_KEY = 'sk-host-secret-1234';");
    writeFileSync(path.join(dir, 'creds.json'), '{ "client_secret": "x" }');
    const probe = (ref: string, type: string) => `/// <reference path="${ref}" />
type K = typeof import/**/('${dir}/config.js');
export const leak: K['API_KEY'] = 0;
type J = typeof import/**/('${dir}/creds.json', { with: { type: 'json' } });
export const leak2: J = 0;
export const there: ${type} = 1;
`;
    const errs = (await typeErrors(probe(`${dir}/config.ts`, 'number'), 10)).join('\n');
    assert.doesNotMatch(errs, /sk-host-secret|client_secret/);
    // A host file that exists reads as one that does not: no existence oracle.
    const missing = (await typeErrors(probe(`${dir}/none.ts`, 'number'), 10)).join('\n');
    assert.equal(errs.replaceAll('config.ts', 'none.ts'), missing);
    // The repo's own code and node_modules are still seen.
    assert.deepEqual(
      await typeErrors(
        "import { z } from 'zod';\nimport type { Message } from '../../../../core/messages.js';\nexport const m: Message['role'] = 'user'; export const s = z.string();",
      ),
      [],
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
