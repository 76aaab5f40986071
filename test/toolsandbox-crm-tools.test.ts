import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { SandboxContext, type Namespace, type Row } from '../envs/toolsandbox/context.js';
import { defaultProcess, extract, partialRatio, wratio } from '../envs/toolsandbox/fuzz.js';
import { usHolidays } from '../envs/toolsandbox/holidays.js';
import { validatePhoneNumber } from '../envs/toolsandbox/phonenumbers.js';
import { callTool, parseToolArguments } from '../envs/toolsandbox/tools.js';

/**
 * The contact, messaging and reminder tools and the third-party semantics they rest on, against
 * upstream's own outputs (test/fixtures/toolsandbox/README.md): rapidfuzz's WRatio / partial_ratio /
 * process.extract, phonenumbers.parse, and 120 probe sequences of 10 tool calls each.
 */
const fuzzy = JSON.parse(
  readFileSync(new URL('./fixtures/toolsandbox/fuzzy-expected.json', import.meta.url), 'utf8'),
) as {
  pairs: { a: string; b: string; pa: string; wratio: number; partial_ratio: number }[];
  extracts: { query: string; choices: (string | null)[]; threshold: number; result: [number, number][] }[];
  phones: { input: string; exception: string | null }[];
};

test(`rapidfuzz: default_process, WRatio and partial_ratio agree exactly on ${fuzzy.pairs.length} pairs, process.extract on ${fuzzy.extracts.length} searches`, () => {
  const bad: string[] = [];
  for (const p of fuzzy.pairs) {
    const got = [defaultProcess(p.a), wratio(p.a, p.b), partialRatio(defaultProcess(p.a), defaultProcess(p.b))];
    if (JSON.stringify(got) !== JSON.stringify([p.pa, p.wratio, p.partial_ratio]))
      bad.push(`${JSON.stringify([p.a, p.b])}: ${JSON.stringify(got)}`);
  }
  for (const e of fuzzy.extracts) {
    const got = extract(e.query, e.choices, e.threshold);
    if (JSON.stringify(got) !== JSON.stringify(e.result))
      bad.push(`extract ${JSON.stringify(e.query)}: ${JSON.stringify(got)} vs ${JSON.stringify(e.result)}`);
  }
  assert.deepEqual(bad, []);
  // Not a trivial sample: scores spread over the range and searches keep up to five rows.
  assert.ok(fuzzy.pairs.filter((p) => p.wratio > 0 && p.wratio < 100).length > 2000);
  assert.ok(fuzzy.extracts.some((e) => e.result.length === 5));
});

test(`phonenumbers.parse without a region: raises where upstream does, with its message, on ${fuzzy.phones.length} inputs`, () => {
  const bad: string[] = [];
  for (const p of fuzzy.phones) {
    let got: string | null = null;
    try {
      validatePhoneNumber(p.input);
    } catch (e) {
      got = `phonenumbers.phonenumberutil.NumberParseException: ${(e as Error).message}`;
    }
    if (got !== p.exception) bad.push(`${JSON.stringify(p.input)}: ${got} vs ${p.exception}`);
  }
  assert.deepEqual(bad, []);
  assert.ok(new Set(fuzzy.phones.map((p) => p.exception?.slice(0, 54))).size >= 5);
});

interface Step {
  tool: string;
  args_json: string;
  content: string;
  exception: string | null;
  trace: unknown;
  changed: Partial<Record<Namespace, Row[]>>;
}
interface Sequence {
  tables: Record<'SETTING' | 'CONTACT' | 'MESSAGING' | 'REMINDER', string | null>;
  cellular: boolean;
  steps: Step[];
}
const sequences = JSON.parse(
  readFileSync(new URL('./fixtures/toolsandbox/crm-probes.json', import.meta.url), 'utf8'),
) as Sequence[];
const tables = (
  JSON.parse(readFileSync(new URL('../data/toolsandbox/scenarios.json', import.meta.url), 'utf8')) as {
    tables: Record<string, Row[]>;
  }
).tables;

/** The memory address in polars' predicate repr differs run to run upstream. */
const noAddress = (s: string | null) => s?.replace(/ at 0x[0-9A-Fa-f]+>/, ' at 0x0>') ?? null;

test(`contact, messaging and reminder tools: outputs, errors, traces and databases agree with upstream on ${sequences.length * 10} calls`, () => {
  let n = 0;
  const newId = () => `00000000-0000-0000-0000-${(++n).toString(16).padStart(12, '0')}`;
  const bad: string[] = [];
  for (const [si, seq] of sequences.entries()) {
    const ctx = SandboxContext.empty();
    ctx.newId = newId;
    for (const ns of ['SETTING', 'CONTACT', 'MESSAGING', 'REMINDER'] as const) {
      const name = seq.tables[ns];
      if (!name) continue;
      const rows = tables[name]
        .map(({ sandbox_message_index: _i, ...r }) => r)
        .filter((r) => Object.values(r).some((v) => v !== null));
      if (ns === 'SETTING') ctx.updateDatabase('SETTING', rows);
      else ctx.addToDatabase(ns, rows);
    }
    if (!seq.cellular)
      ctx.updateDatabase(
        'SETTING',
        ctx.getDatabase('SETTING').map((r) => ({ ...r, cellular: false })),
      );
    ctx.addToDatabase('SANDBOX', [{ sender: 'USER', recipient: 'AGENT', content: 'hi' }]);
    for (const [i, s] of seq.steps.entries()) {
      ctx.addToDatabase('SANDBOX', [{ sender: 'AGENT', recipient: 'EXECUTION_ENVIRONMENT', content: s.tool }]);
      const { args, floats } = parseToolArguments(s.args_json);
      const out = callTool(ctx, s.tool, args, floats);
      ctx.addToDatabase('SANDBOX', [{ sender: 'EXECUTION_ENVIRONMENT', recipient: 'AGENT', content: out.content }]);
      const where = `sequence ${si} step ${i} ${s.tool}(${s.args_json})`;
      if (noAddress(out.content) !== noAddress(s.content))
        bad.push(`${where}: content\n  ours     ${out.content}\n  upstream ${s.content}`);
      if (noAddress(out.exception) !== noAddress(s.exception)) bad.push(`${where}: exception ${out.exception}`);
      if (JSON.stringify(out.trace === null ? null : JSON.parse(out.trace)) !== JSON.stringify(s.trace))
        bad.push(`${where}: trace ${out.trace}`);
      for (const [ns, rows] of Object.entries(s.changed)) {
        if (JSON.stringify(ctx.getDatabase(ns as Namespace)) !== JSON.stringify(rows))
          bad.push(`${where}: ${ns} ${JSON.stringify(ctx.getDatabase(ns as Namespace)).slice(0, 300)}`);
      }
    }
  }
  assert.deepEqual(bad.slice(0, 20), []);
  const steps = sequences.flatMap((q) => q.steps);
  // Every tool succeeds somewhere and the dependency errors are exercised.
  for (const t of new Set(steps.map((s) => s.tool)))
    assert.ok(
      steps.some((s) => s.tool === t && !s.exception),
      t,
    );
  for (const e of ['ConnectionError', 'DuplicateError', 'NoDataError', 'NumberParseException'])
    assert.ok(
      steps.some((s) => s.exception?.includes(e)),
      e,
    );
});

const holidayYears = (
  JSON.parse(readFileSync(new URL('./fixtures/toolsandbox/holidays-expected.json', import.meta.url), 'utf8')) as {
    years: Record<string, [string, string][]>;
  }
).years;
const holidayProbes = JSON.parse(
  readFileSync(new URL('./fixtures/toolsandbox/holiday-probes.json', import.meta.url), 'utf8'),
) as { wifi: boolean; args_json: string; content: string; exception: string | null; trace: unknown }[];

test(`US holidays: the same dates and names as python-holidays for ${Object.keys(holidayYears).length} years; search_holiday agrees with upstream on ${holidayProbes.length} calls`, () => {
  const bad: string[] = [];
  for (const [y, days] of Object.entries(holidayYears)) {
    const key = (xs: [string, string][]) =>
      xs
        .map((x) => x.join(' '))
        .sort()
        .join(', ');
    if (key(usHolidays(Number(y))) !== key(days)) bad.push(`${y}: ${key(usHolidays(Number(y)))}`);
  }
  for (const p of holidayProbes) {
    const ctx = SandboxContext.empty();
    if (!p.wifi)
      ctx.updateDatabase(
        'SETTING',
        ctx.getDatabase('SETTING').map((r) => ({ ...r, wifi: false })),
      );
    ctx.addToDatabase('SANDBOX', [{ sender: 'AGENT', recipient: 'EXECUTION_ENVIRONMENT', content: 'x' }]);
    const { args, floats } = parseToolArguments(p.args_json);
    const out = callTool(ctx, 'search_holiday', args, floats);
    const trace = out.trace === null ? null : JSON.parse(out.trace);
    if (out.content !== p.content || out.exception !== p.exception || JSON.stringify(trace) !== JSON.stringify(p.trace))
      bad.push(`search_holiday(${p.args_json}): ours ${out.content} upstream ${p.content}`);
  }
  assert.deepEqual(bad, []);
  assert.ok(holidayProbes.filter((p) => p.content !== 'None' && !p.exception).length > 100);
});
