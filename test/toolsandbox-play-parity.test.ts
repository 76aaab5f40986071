import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import type OpenAI from 'openai';
import type { AgentAction, Episode } from '../envs/environment.js';
import type { Row, SandboxContext } from '../envs/toolsandbox/context.js';
import { createToolSandboxEnvironment, scenarioVariants } from '../envs/toolsandbox/environment.js';

/**
 * The Environment against upstream's own play: for the 91 offline base scenarios upstream ran
 * Scenario.play with its OpenAI agent and user roles, their model calls scripted (random tool calls
 * from the scenario's allow list, messages, the user ending with end_conversation), then
 * Evaluation.evaluate (test/fixtures/toolsandbox/README.md). The same scripts through our episode
 * must show the agent and the user simulator the same requests, and give the same SANDBOX messages (content, tool-call code, traces, exceptions, conversation
 * state), the same final databases, and the same similarity and turn count.
 */
interface Fixture {
  scenario: string;
  agent: ({ type: 'message'; content: string } | { type: 'tool_call'; id: string; name: string; arguments: string })[];
  user: ({ type: 'message'; content: string } | { type: 'end' })[];
  sandbox: Row[];
  sandbox_from: number;
  dbs: Record<string, Row[]>;
  /** What upstream's agent role sent its model first, and every request of its user role. */
  agent_first_request: { messages: { role: string; content: string }[]; tools: unknown[] | null };
  user_requests?: { messages: { role: string; content: string }[]; tools: unknown[] | null }[];
  expected: { similarity: number; milestone_similarity: number; minefield_similarity: number; turn_count: number };
}
const load = (file: string) =>
  JSON.parse(readFileSync(new URL(`./fixtures/toolsandbox/${file}`, import.meta.url), 'utf8')) as Fixture[];
const fixtures = load('play-expected.json');
/** The same for the augmented variants on top of 3 distraction tools (the user's requests not kept). */
const variantFixtures = load('play-variants-expected.json');
/** The same on the variant scenarios that draw unit_conversion (runnable since it is ported). */
const unitFixtures = load('play-variants-unit-conversion-expected.json');

/**
 * uuid4 ids (new contacts, messages, reminders) are random upstream (the data's own ids are uuid5),
 * and polars' predicate repr ends in a memory address.
 */
const norm = (v: unknown): string =>
  JSON.stringify(v)
    .replace(/[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}/g, '<uuid4>')
    .replace(/ at 0x[0-9A-Fa-f]+>/g, ' at 0x0>');
const traces = (t: unknown) => (Array.isArray(t) ? t.map((x) => JSON.parse(x as string)) : t);

function scriptedUser(script: Fixture['user'], seen: { messages: unknown; tools: unknown }[]) {
  const queue = [...script];
  const create = async (req: { messages: unknown; tools: unknown }) => {
    seen.push({ messages: req.messages, tools: req.tools ?? null });
    const a = queue.shift() ?? { type: 'end' };
    const message =
      a.type === 'message'
        ? { role: 'assistant', content: a.content }
        : {
            role: 'assistant',
            content: null,
            tool_calls: [{ id: 'user_end', type: 'function', function: { name: 'end_conversation', arguments: '{}' } }],
          };
    return { choices: [{ index: 0, message }] };
  };
  return { client: { chat: { completions: { create } } } as unknown as OpenAI, model: 'scripted' };
}

async function compare(f: Fixture, bad: string[]): Promise<void> {
  {
    const userRequests: { messages: unknown; tools: unknown }[] = [];
    const variant = VARIANTS.find((v) => f.scenario.endsWith(`_${v}`));
    const env = createToolSandboxEnvironment({
      userSimulator: scriptedUser(f.user, userRequests),
      ...(variant ? { variant } : {}),
    });
    const ep = await env.reset({ taskId: f.scenario });
    // The agent's first request: system prompt, first user turn, and the scenario's tools in upstream's order and form.
    const first = {
      messages: [{ role: 'system', content: env.systemPrompt() }, ...ep.initialMessages()],
      tools: ep.tools!(),
    };
    if (JSON.stringify(first) !== JSON.stringify(f.agent_first_request))
      bad.push(`${f.scenario}: agent request ${JSON.stringify(first).slice(0, 300)}`);
    const agent = [...f.agent];
    for (let i = 0; i < 40; i++) {
      const a = agent.shift() ?? { type: 'message' as const, content: 'Done.' };
      const action: AgentAction =
        a.type === 'message'
          ? a
          : {
              type: 'tool_call',
              call: { id: a.id, type: 'function', function: { name: a.name, arguments: a.arguments } },
            };
      if ((await ep.step(action)).done) break;
    }
    const ctx = (ep as Episode & { context(): SandboxContext }).context();
    const ours = ctx
      .getDatabase('SANDBOX', { allHistory: true, keepIndex: true })
      .filter((r) => (r.sandbox_message_index as number) >= f.sandbox_from);
    const shape = (rows: Row[]) => rows.map((r) => norm({ ...r, tool_trace: traces(r.tool_trace) }));
    const [o, e] = [shape(ours), shape(f.sandbox)];
    for (let i = 0; i < Math.max(o.length, e.length); i++) {
      if (o[i] !== e[i]) {
        bad.push(`${f.scenario} row ${i}:\n  ours     ${o[i]}\n  upstream ${e[i]}`);
        break;
      }
    }
    // The user simulator saw exactly what upstream's user role sent its model (prompt, few-shot dialogue, flipped roles, end_conversation).
    if (f.user_requests && norm(userRequests) !== norm(f.user_requests))
      bad.push(
        `${f.scenario}: user requests differ: ${norm(userRequests).slice(0, 400)}\n  upstream ${norm(f.user_requests).slice(0, 400)}`,
      );
    for (const [ns, rows] of Object.entries(f.dbs))
      if (norm(ctx.getDatabase(ns as 'CONTACT')) !== norm(rows)) bad.push(`${f.scenario}: ${ns} differs`);
    const r = await ep.evaluate([], 'user_stop');
    const x = f.expected;
    if (
      Math.abs(r.reward - x.similarity) > 1e-9 ||
      Math.abs(r.components.milestone_similarity - x.milestone_similarity) > 1e-9 ||
      (r.details as { turn_count: number }).turn_count !== x.turn_count
    ) {
      bad.push(
        `${f.scenario}: similarity ${r.reward} turn ${(r.details as { turn_count: number }).turn_count}, upstream ${x.similarity} turn ${x.turn_count}`,
      );
    }
  }
}

const VARIANTS = scenarioVariants().sort((a, b) => b.length - a.length);

test(`episodes play as upstream's Scenario.play: requests, messages, databases and similarity agree on ${fixtures.length} base scenarios`, async () => {
  const bad: string[] = [];
  for (const f of fixtures) await compare(f, bad);
  assert.deepEqual(bad.slice(0, 10), []);
  // Not degenerate: perfect, partial and zero scores, and tool errors the agent saw.
  const sims = fixtures.map((f) => f.expected.similarity);
  assert.ok(sims.some((s) => s === 1) && sims.some((s) => s === 0) && sims.some((s) => s > 0 && s < 1));
  assert.ok(fixtures.some((f) => f.sandbox.some((r) => r.tool_call_exception !== null)));
});

test(`augmented variants play as upstream's: scrambled names / descriptions / argument types and distraction tools on ${variantFixtures.length} scenarios`, async () => {
  const bad: string[] = [];
  for (const f of variantFixtures) await compare(f, bad);
  assert.deepEqual(bad.slice(0, 10), []);
  const kinds = new Set(variantFixtures.map((f) => VARIANTS.find((v) => f.scenario.endsWith(`_${v}`))));
  assert.equal(kinds.size, 5, [...kinds].join(', '));
  // Name scrambling reached the agent: its tools and its calls use the scrambled names.
  assert.ok(
    variantFixtures.some(
      (f) =>
        f.scenario.endsWith('tool_name_scrambled') &&
        f.sandbox.some((r) => /^[a-z_]+_\d+$/.test(String(r.openai_function_name))),
    ),
  );
});

test(`variant scenarios drawing unit_conversion play as upstream's on ${unitFixtures.length} scenarios`, async () => {
  const bad: string[] = [];
  for (const f of unitFixtures) await compare(f, bad);
  assert.deepEqual(bad.slice(0, 10), []);
  // The scripts called the tool, with results and errors.
  const calls = unitFixtures.flatMap((f) =>
    f.sandbox.filter((r) => /unit_conversion|utilities_\d+\(/.test(String(r.content))),
  );
  assert.ok(calls.length > 20, String(calls.length));
  assert.ok(unitFixtures.some((f) => f.scenario.endsWith('_10_distraction_tools')));
});
