import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { ChatRequest, ScriptedReply } from './scripted-llm.js';

/**
 * Test doubles for stage 2 over the scripted OpenAI-compatible server: recorded generator replies
 * (the good fixture module and variants broken in each gate's way) and a base policy that really
 * plays the fixture environment, solving every other episode.
 */
export const GOOD_SOURCE = readFileSync(path.join(import.meta.dirname, '../fixtures/synthesis/good-env.ts'), 'utf8');
export const GOOD_MANIFEST = {
  name: 'order-spend-lookup',
  capability: 'structured_data_reasoning',
  targetEnv: 'toy-orders',
  transferRationale: 'Answering spend questions needs filtering order records by status and summing them, which the target tasks require before acting.',
  description: 'A customer asks how much they spent on orders with a given status.',
  tools: ['find_customer_by_email', 'list_orders'],
};

function edit(from: string, to: string): string {
  if (!GOOD_SOURCE.includes(from)) throw new Error(`fixture edit: '${from}' not found in good-env.ts`);
  return GOOD_SOURCE.replace(from, to);
}

/** One recorded module per gate failure, in gate order, then the good one. */
export const BROKEN: { gate: string; source: string }[] = [
  { gate: 'compile', source: edit('export default defineEnvironment<State, Inst>({', 'export default defineEnvironment<State, Inst>({{') },
  { gate: 'determinism', source: edit('rng.int(2, 5)', '2 + Math.floor(Math.random() * 4)') },
  { gate: 'solvability', source: edit('say(`You spent ${total.toFixed(2)}', 'say(`You spent ${(total + 1).toFixed(2)}') },
  { gate: 'non_triviality', source: edit('communicated(messages, [instance.expect.total])', 'communicated(messages, [])') },
  {
    gate: 'calibration',
    source: edit(
      "lookup: [0.3, calledWith(calls, 'list_orders', { customer_id: instance.expect.customer_id })],",
      "lookup: [1, calledWith(calls, 'find_customer_by_email', { email: Object.values(instance.initialState.customers)[0].email })],",
    ).replace("communicate: [0.7, communicated(messages, [instance.expect.total]).ok],", ''),
  },
];

export const generatorReply = (source: string, manifest = GOOD_MANIFEST): ScriptedReply => ({ content: JSON.stringify({ manifest, source }) });

/**
 * The base policy: finds the customer from the email in the first user message; on even-numbered
 * episodes lists the orders and reports the right total, on odd ones gives up after the lookup.
 * Episodes must run one at a time (calibration concurrency 1) for the alternation to be exact.
 */
export function alternatingPolicy(): (req: ChatRequest) => ScriptedReply {
  let episode = -1;
  return (req) => {
    const msgs = req.messages;
    const last = msgs[msgs.length - 1];
    const goal = String(msgs.find((m) => m.role === 'user')?.content ?? '');
    if (msgs.length === 2) episode++;
    if (last.role === 'user') {
      const email = /[\w.+-]+@[\w.-]+\.\w+/.exec(goal)?.[0] ?? 'unknown@example.com';
      return { toolCalls: [{ name: 'find_customer_by_email', arguments: JSON.stringify({ email }) }] };
    }
    const content = String(last.content ?? '');
    if (last.role === 'tool' && content.includes('customer_id')) {
      if (episode % 2 === 1) return { content: 'Sorry, I cannot tell you that.' };
      return { toolCalls: [{ name: 'list_orders', arguments: JSON.stringify({ customer_id: JSON.parse(content).customer_id }) }] };
    }
    if (last.role === 'tool' && content.startsWith('[')) {
      const status = /my (\w+) orders/.exec(goal)?.[1];
      const total = (JSON.parse(content) as { status: string; total: number }[]).filter((o) => o.status === status).reduce((s, o) => s + o.total, 0);
      return { content: `You spent ${total.toFixed(2)} in total.` };
    }
    return { content: 'Sorry, something went wrong.' };
  };
}
