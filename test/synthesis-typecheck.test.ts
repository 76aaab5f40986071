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
