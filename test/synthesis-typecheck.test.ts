import { test } from 'node:test';
import assert from 'node:assert/strict';
import { typeErrors } from '../activities/synthesis/candidate.js';
import { GOOD_SOURCE } from './fixtures/synthesis/scripts.js';

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
