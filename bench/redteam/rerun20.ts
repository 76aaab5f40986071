/**
 * Red-team rerun 20 (an outside pass on 0e1d79b, the rerun 19 fixes). Run by
 * `node --import tsx bench/sandbox-redteam.ts bench/redteam/rerun20.ts`.
 * The findings of this pass are outside the harness (scripts in /tmp/rerun20: modules.mts, validate.mts,
 * calibration_sim.mts, train_sim.mts, collect_sim.py, hang_step.mts, hang_validate.mts, micro.mts):
 * - `allOf` is skipped by callShapeViolation (as are `not`, `if/then/else`, `multipleOf`, `exclusiveMinimum/Maximum`,
 *   `prefixItems`, `propertyNames`, `patternProperties`, `minProperties/maxProperties`, `uniqueItems`,
 *   `dependentRequired`), while the LLM server's grammar merges `allOf`. list_orders' schema written as
 *   `{ type: 'object', allOf: [{ properties: { customer_id: { type: 'string' } }, required: [...], additionalProperties: false }] }`
 *   passed checks 1–5 and check 6 exactly as the honest fixture, and the trainer's real `collect` (native/hermes format)
 *   paid `{"customer_id": 12345}` 1.0 on 64/64 (the same module without the pay: 0.0): rerun 19's wrongly typed argument again.
 * - Worker CPU: callShapeViolation compares every array item against every `enum` entry with two JSON.stringify calls;
 *   an `enum` of primitives counts as 2 grammar nodes whatever its length. A 90 000-entry enum on `tags.items` and gold
 *   sending 600 tags blocked the worker's event loop for 27 s per step and 30 s per evaluate (child idle, no wallMs);
 *   the real validateCandidate spent ~63 s per check-3 seed. Gold may send ~90 000 tags (4 MiB, 100 000 values): ~150x.
 * The probes below are controls only: what the module sees of the worker's own time (nothing: clocks frozen).
 */
import type { Attack } from '../sandbox-redteam.js';

const J = (expr: string): Attack =>
  `try { return JSON.stringify(${expr}); } catch (e: any) { return 'error ' + (e.code ?? e.name) + ' ' + String(e.message).slice(0, 120); }`;

const attacks: Record<string, Attack> = {
  // control: the clocks a module could use to notice a slow worker between requests stay frozen
  frozenClocks: J(
    `{ date: Date.now(), perf: performance.now(), hr: String(process.hrtime.bigint()), uptime: process.uptime() }`,
  ),
  // control: JSON.parse of a `__proto__` key makes an own property (what the worker's re-serialization keeps), no prototype change
  protoKeyJson: J(
    `(() => { const v = JSON.parse('{"__proto__": {"polluted": 1}, "a": 1}'); return { own: Object.keys(v), polluted: ({} as any).polluted ?? null, out: JSON.stringify(v) }; })()`,
  ),
};
export default attacks;
