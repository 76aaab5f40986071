import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { SandboxContext, type Row } from '../envs/toolsandbox/context.js';
import {
  additionSimilarity,
  DEFAULT_COLUMN_MEASURES,
  evaluateContext,
  guardrailSimilarity,
  MilestoneMatcher,
  removalSimilarity,
  snapshotSimilarity,
  summarise,
  toolTraceDependantSimilarity,
  updateSimilarity,
  type Milestone,
} from '../envs/toolsandbox/evaluator.js';
import { pyFixed, pyFormat } from '../envs/toolsandbox/pyvalues.js';
import { porterStem, rougeLFmeasure } from '../envs/toolsandbox/rouge.js';

/**
 * Unit tests of the ToolSandbox evaluator port. Expected values follow upstream's semantics in
 * tool_sandbox/common/evaluation.py (function named in each test); the text measures are checked
 * against NLTK's PorterStemmer and rouge_score themselves (test/fixtures/toolsandbox/text-expected.json,
 * produced by those packages).
 */
const text = JSON.parse(
  readFileSync(new URL('./fixtures/toolsandbox/text-expected.json', import.meta.url), 'utf8'),
) as {
  stems: Record<string, string>;
  rouge_l: [string, string, number][];
};

const SANDBOX = DEFAULT_COLUMN_MEASURES.SANDBOX;
const CONTACT = DEFAULT_COLUMN_MEASURES.CONTACT;
const SETTING = DEFAULT_COLUMN_MEASURES.SETTING;
const msg = (r: Row): Row => ({
  sender: null,
  recipient: null,
  content: null,
  openai_tool_call_id: null,
  openai_function_name: null,
  conversation_active: true,
  tool_call_exception: null,
  tool_trace: null,
  visible_to: null,
  ...r,
});
const trace = (tool_name: string, args: Record<string, unknown>, result: unknown = null) =>
  JSON.stringify({ tool_name, arguments: args, result });
const contact = (
  person_id: string,
  name: string,
  phone_number: string,
  relationship: string | null = null,
  is_self = false,
): Row => ({ person_id, name, phone_number, relationship, is_self });

test('NLTK Porter stemmer (NLTK_EXTENSIONS): every stem of the scenario vocabulary matches nltk', () => {
  const words = Object.keys(text.stems);
  assert.ok(words.length > 400);
  const wrong = words
    .filter((w) => porterStem(w) !== text.stems[w])
    .map((w) => `${w}: ${porterStem(w)} != ${text.stems[w]}`);
  assert.deepEqual(wrong, []);
});

test('ROUGE-L F (column_rouge_l_similarity): own LCS agrees with rouge_score on 302 pairs', () => {
  for (const [target, prediction, expected] of text.rouge_l)
    assert.ok(Math.abs(rougeLFmeasure(target, prediction) - expected) < 1e-12, `${target} | ${prediction}`);
  // A hand-checked case: LCS("cellular servic is turn off", "i turn the cellular off") = 2 → P = R = F = 0.4.
  assert.equal(rougeLFmeasure('Cellular service is turned off', 'I turned the cellular off'), 0.4000000000000001);
});

test('column_exact_match_similarity: equal → 1, different → 0, None target matches null; Python True == 1', () => {
  const snap = [msg({ sender: 'AGENT', recipient: 'USER', content: 'hi' })];
  assert.equal(snapshotSimilarity(snap, [{ sender: 'AGENT', recipient: 'USER' }], SANDBOX), 1);
  assert.equal(snapshotSimilarity(snap, [{ sender: 'USER' }], SANDBOX), 0);
  assert.equal(
    snapshotSimilarity(snap, [{ tool_call_exception: null, sender: 'AGENT' }], {
      ...SANDBOX,
      tool_call_exception: { name: 'column_exact_match_similarity' },
    }),
    1,
  );
  assert.equal(snapshotSimilarity([{ cellular: true }], [{ cellular: 1 }], SETTING), 1);
});

test('column_close_similarity: within atol → 1, outside → 0', () => {
  const m = { ...SETTING, latitude: { name: 'column_close_similarity' as const, atol_dict: { latitude: 0.5 } } };
  assert.equal(snapshotSimilarity([{ latitude: 37.33 }], [{ latitude: 37.7 }], m), 1);
  assert.equal(snapshotSimilarity([{ latitude: 37.33 }], [{ latitude: 38 }], m), 0);
});

test('column_contains_similarity: literal substring, case-sensitive', () => {
  const m = { ...SANDBOX, content: { name: 'column_contains_similarity' as const } };
  assert.equal(snapshotSimilarity([msg({ content: 'It is 142 days till Christmas' })], [{ content: '142' }], m), 1);
  assert.equal(snapshotSimilarity([msg({ content: 'It is 142 days' })], [{ content: 'christmas' }], m), 0);
});

test('column_tool_trace_exact_match_similarity: tool name and every golden argument; extra arguments ignored; any of a list', () => {
  const snap = [msg({ tool_trace: [trace('search_contacts', { name: 'Fredrik Thordendal', relationship: null })] })];
  assert.equal(
    snapshotSimilarity(snap, [{ tool_trace: trace('search_contacts', { name: 'Fredrik Thordendal' }) }], SANDBOX),
    1,
  );
  assert.equal(snapshotSimilarity(snap, [{ tool_trace: trace('search_contacts', { name: 'Fredrik' }) }], SANDBOX), 0);
  // An argument the call did not pass (NOT_GIVEN) never equals a golden one.
  assert.equal(
    snapshotSimilarity(snap, [{ tool_trace: trace('search_contacts', { phone_number: null }) }], SANDBOX),
    0,
  );
  const either = JSON.stringify([
    { tool_name: 'add_contact', arguments: {} },
    { tool_name: 'search_contacts', arguments: {} },
  ]);
  assert.equal(snapshotSimilarity(snap, [{ tool_trace: either }], SANDBOX), 1);
  const close = {
    ...SANDBOX,
    tool_trace: { name: 'column_tool_trace_exact_match_similarity' as const, atol_dict: { latitude: 0.01 } },
  };
  const geo = [msg({ tool_trace: [trace('search_location', { latitude: 37.334 })] })];
  assert.equal(snapshotSimilarity(geo, [{ tool_trace: trace('search_location', { latitude: 37.34 }) }], close), 1);
  assert.equal(snapshotSimilarity(geo, [{ tool_trace: trace('search_location', { latitude: 37.4 }) }], close), 0);
});

test('snapshot_similarity: geometric mean over columns in float32, best 1:1 row assignment, row-count mismatch → 0', () => {
  const rows = [contact('a', 'Homer S', '+1', 'husband'), contact('b', 'Marge S', '+2', 'wife')];
  // Target rows listed in the other order still match 1:1.
  assert.equal(snapshotSimilarity(rows, [{ name: 'Marge S' }, { name: 'Homer S' }], CONTACT), 1);
  assert.equal(snapshotSimilarity(rows, [{ name: 'Marge S' }], CONTACT), 0);
  // Partial ROUGE on one of two columns: exp(-mean(-log f, -log 1)), where polars takes the log of the
  // Float32 similarity as Rust's f32::log(x, e) = ln(x) / ln(e as f32), in float32.
  const s = snapshotSimilarity(
    [contact('a', 'Homer S', '+1', 'my husband')],
    [{ name: 'Homer S', relationship: 'husband' }],
    CONTACT,
  );
  const f = rougeLFmeasure('husband', 'my husband');
  assert.ok(Math.abs(f - 2 / 3) < 1e-12);
  const f32 = Math.fround;
  assert.equal(s, Math.exp(-(-f32(f32(Math.log(f32(f))) / f32(Math.log(f32(Math.E)))) / 2)));
  assert.ok(Math.abs(s - Math.sqrt(2 / 3)) < 1e-7);
  // A zero column makes the row's similarity 0.
  assert.equal(
    snapshotSimilarity([contact('a', 'Homer S', '+1')], [{ name: 'Homer S', phone_number: '+9' }], CONTACT),
    0,
  );
});

test('addition / removal / update similarity compare against the reference snapshot', () => {
  const before = [contact('a', 'Homer S', '+1')];
  const after = [...before, contact('b', 'Bart S', '+3')];
  assert.equal(additionSimilarity('CONTACT', after, [{ name: 'Bart S', phone_number: '+3' }], CONTACT, before), 1);
  // The reference must survive intact.
  assert.equal(additionSimilarity('CONTACT', [contact('b', 'Bart S', '+3')], [{ name: 'Bart S' }], CONTACT, before), 0);
  assert.equal(removalSimilarity('CONTACT', before, [{ person_id: 'b' }], CONTACT, after), 1);
  assert.equal(removalSimilarity('CONTACT', after, [{ person_id: 'b' }], CONTACT, after), 0);
  const updated = [contact('a', 'Homer S', '+7')];
  assert.equal(updateSimilarity('CONTACT', updated, [{ person_id: 'a', phone_number: '+7' }], CONTACT, before), 1);
  assert.equal(updateSimilarity('CONTACT', after, [{ person_id: 'a', phone_number: '+7' }], CONTACT, before), 0);
  // Nulls are filled with ""/0/false before the join (polars never joins on a null), so a null
  // relationship in the snapshot still matches a null one in the reference.
  assert.equal(
    additionSimilarity(
      'CONTACT',
      [contact('a', 'H', '+1', null), contact('b', 'B', '+3', 'y')],
      [{ name: 'B' }],
      CONTACT,
      [contact('a', 'H', '+1', null)],
    ),
    1,
  );
  assert.equal(guardrailSimilarity(before, before), 1);
  assert.equal(guardrailSimilarity(after, before), 0);
});

test('tool_trace_dependant_similarity: values extracted from the reference trace fill the content template', () => {
  const reference = [
    msg({
      sender: 'EXECUTION_ENVIRONMENT',
      recipient: 'AGENT',
      tool_trace: [trace('days_between', {}, { days: 142 })],
    }),
  ];
  const target = [{ sender: 'AGENT', recipient: 'USER', content: '{days}' }];
  const m = { ...SANDBOX, content: { name: 'column_contains_similarity' as const } };
  assert.equal(
    toolTraceDependantSimilarity(
      [msg({ sender: 'AGENT', recipient: 'USER', content: 'It is 142 days' })],
      target,
      m,
      reference,
      'content',
      'days_extractor',
    ),
    1,
  );
  assert.equal(
    toolTraceDependantSimilarity(
      [msg({ sender: 'AGENT', recipient: 'USER', content: 'It is 141 days' })],
      target,
      m,
      reference,
      'content',
      'days_extractor',
    ),
    0,
  );
  // A template naming a field the extractor does not produce is a KeyError upstream → 0.
  assert.equal(
    toolTraceDependantSimilarity(
      [msg({ sender: 'AGENT', recipient: 'USER', content: '142' })],
      [{ ...target[0], content: '{weeks}' }],
      m,
      reference,
      'content',
      'days_extractor',
    ),
    0,
  );
});

test('Python formatting helpers: half-even ties on the binary value, str.format named fields', () => {
  assert.equal(pyFixed(2.5, 0), '2');
  assert.equal(pyFixed(3.5, 0), '4');
  assert.equal(pyFixed(0.25, 1), '0.2');
  assert.equal(pyFixed(0.35, 1), '0.3'); // 0.35 is slightly below in binary, no tie
  assert.equal(pyFixed(-1.5, 0), '-2');
  assert.equal(pyFormat('It is {days} days {{x}}', { days: 3 }), 'It is 3 days {x}');
});

/** A context after the usual opening: system, then the first user message at index 1. */
function opened(): SandboxContext {
  const ctx = SandboxContext.empty();
  ctx.addToDatabase('SANDBOX', [
    { sender: 'SYSTEM', recipient: 'AGENT', content: 'sys' },
    { sender: 'USER', recipient: 'AGENT', content: 'Turn off cellular and tell me' },
  ]);
  return ctx;
}
const settingMilestone: Milestone = {
  snapshot_constraints: [
    {
      database_namespace: 'SETTING',
      snapshot_constraint: { name: 'snapshot_similarity' },
      reference_milestone_node_index: null,
      target_dataframe: [{ cellular: false }],
    },
  ],
};
const replyMilestone: Milestone = {
  snapshot_constraints: [
    {
      database_namespace: 'SANDBOX',
      snapshot_constraint: { name: 'snapshot_similarity' },
      reference_milestone_node_index: null,
      target_dataframe: [{ sender: 'AGENT', recipient: 'USER', content: 'Cellular service is turned off' }],
    },
  ],
};

function turnOffCellular(ctx: SandboxContext): void {
  ctx.addToDatabase('SANDBOX', [
    { sender: 'AGENT', recipient: 'EXECUTION_ENVIRONMENT', content: 'set_cellular_service_status(on=False)' },
  ]);
  const row = ctx.getDatabase('SETTING')[0];
  ctx.updateDatabase('SETTING', [{ ...row, cellular: false }]);
  ctx.addToDatabase('SANDBOX', [
    {
      sender: 'EXECUTION_ENVIRONMENT',
      recipient: 'AGENT',
      content: 'None',
      tool_trace: [trace('set_cellular_service_status', { on: false })],
    },
  ]);
}

test('milestones: perfect trajectory = 1.0; milestones must be met in DAG order (a reply before the change cannot count)', () => {
  const ctx = opened();
  turnOffCellular(ctx);
  ctx.addToDatabase('SANDBOX', [{ sender: 'AGENT', recipient: 'USER', content: 'Cellular service is turned off' }]);
  const r = evaluateContext(
    { milestones: [settingMilestone, replyMilestone], milestone_edge_list: [[0, 1]], minefields: [] },
    ctx,
  );
  assert.equal(r.similarity, 1);
  assert.deepEqual(
    r.milestone_mapping.map(([m, [s]]) => [m, s]),
    [
      [0, 3],
      [1, 4],
    ],
  );

  const early = opened();
  early.addToDatabase('SANDBOX', [{ sender: 'AGENT', recipient: 'USER', content: 'Cellular service is turned off' }]);
  turnOffCellular(early);
  const e = evaluateContext(
    { milestones: [settingMilestone, replyMilestone], milestone_edge_list: [[0, 1]], minefields: [] },
    early,
  );
  // The setting milestone matches; the only later agent→user text is none, so the reply scores < 1.
  assert.ok(e.similarity < 1 && e.similarity >= 0.5, String(e.similarity));
});

test('guardrails: a database no milestone constrains must not change between matched snapshots (MilestoneMatcher._add_guardrail_constraints)', () => {
  // The first milestone is a message (it cannot slide later), the second the reply; a contact added
  // between them breaks the reply's CONTACT guardrail, so the reply milestone scores 0.
  const traceMilestone: Milestone = {
    snapshot_constraints: [
      {
        database_namespace: 'SANDBOX',
        snapshot_constraint: { name: 'snapshot_similarity' },
        reference_milestone_node_index: null,
        target_dataframe: [
          {
            sender: 'EXECUTION_ENVIRONMENT',
            recipient: 'AGENT',
            tool_trace: trace('set_cellular_service_status', { on: false }),
          },
        ],
      },
    ],
  };
  const spec = {
    milestones: [traceMilestone, replyMilestone],
    milestone_edge_list: [[0, 1]] as [number, number][],
    minefields: [],
  };
  const matcher = new MilestoneMatcher({ milestones: spec.milestones, edge_list: spec.milestone_edge_list });
  const guarded = matcher.milestones[1].snapshot_constraints
    .filter((c) => c.snapshot_constraint.name === 'guardrail_similarity')
    .map((c) => c.database_namespace);
  assert.deepEqual(guarded.sort(), ['CONTACT', 'MESSAGING', 'REMINDER', 'SETTING']);
  const clean = opened();
  turnOffCellular(clean);
  clean.addToDatabase('SANDBOX', [{ sender: 'AGENT', recipient: 'USER', content: 'Cellular service is turned off' }]);
  assert.equal(evaluateContext(spec, clean).similarity, 1);
  const ctx = opened();
  turnOffCellular(ctx);
  ctx.addToDatabase('SANDBOX', [{ sender: 'AGENT', recipient: 'EXECUTION_ENVIRONMENT', content: 'add_contact(...)' }]);
  ctx.addToDatabase('CONTACT', [contact('z', 'Stranger', '+0')]);
  ctx.addToDatabase('SANDBOX', [{ sender: 'EXECUTION_ENVIRONMENT', recipient: 'AGENT', content: 'z' }]);
  ctx.addToDatabase('SANDBOX', [{ sender: 'AGENT', recipient: 'USER', content: 'Cellular service is turned off' }]);
  assert.equal(evaluateContext(spec, ctx).similarity, 0.5);
});

test('minefield rule: any minefield matched with non-zero similarity forces the similarity to 0', () => {
  const ctx = opened();
  turnOffCellular(ctx);
  ctx.addToDatabase('SANDBOX', [{ sender: 'AGENT', recipient: 'USER', content: 'Cellular service is turned off' }]);
  const forbidden: Milestone = {
    snapshot_constraints: [
      {
        database_namespace: 'SANDBOX',
        snapshot_constraint: { name: 'snapshot_similarity' },
        reference_milestone_node_index: null,
        target_dataframe: [
          { sender: 'EXECUTION_ENVIRONMENT', recipient: 'AGENT', tool_trace: trace('set_cellular_service_status', {}) },
        ],
      },
    ],
  };
  const hit = evaluateContext({ milestones: [settingMilestone, replyMilestone], minefields: [forbidden] }, ctx);
  assert.equal(hit.milestone_similarity, 1);
  assert.equal(hit.minefield_similarity, 1);
  assert.equal(hit.similarity, 0);
  const notHit = evaluateContext(
    {
      milestones: [settingMilestone, replyMilestone],
      minefields: [
        {
          ...forbidden,
          snapshot_constraints: [
            {
              ...forbidden.snapshot_constraints[0],
              target_dataframe: [
                {
                  sender: 'EXECUTION_ENVIRONMENT',
                  recipient: 'AGENT',
                  tool_trace: trace('send_message_with_phone_number', {}),
                },
              ],
            },
          ],
        },
      ],
    },
    ctx,
  );
  assert.equal(notHit.minefield_similarity, 0);
  assert.equal(notHit.similarity, 1);
  // No milestones at all: milestone similarity defaults to 1, no minefields to 0.
  assert.equal(evaluateContext({ milestones: [], minefields: [] }, ctx).similarity, 1);
});

test('summarise: mean similarity, perfect count and per-category breakdown', () => {
  const s = summarise([
    { similarity: 1, categories: ['A', 'B'] },
    { similarity: 0.5, categories: ['A'] },
    { similarity: 0, categories: ['B'] },
  ]);
  assert.equal(s.n, 3);
  assert.equal(s.meanSimilarity, 0.5);
  assert.equal(s.perfect, 1);
  assert.deepEqual(s.byCategory, {
    A: { n: 2, meanSimilarity: 0.75, perfect: 1 },
    B: { n: 2, meanSimilarity: 0.5, perfect: 1 },
  });
});
