import { buildTasks, generateDb } from '../../envs/toy/orders-data.js';
import type { ChatRequest, ScriptedReply } from './scripted-llm.js';

/**
 * A scripted policy for the toy-orders env over the real OpenAI wire protocol: with the
 * capability hint of the prompt-only baseline in its system prompt it states the pending total
 * (a success on that held-out task); otherwise it gives up (a failure).
 */
export const toyTasks = buildTasks(generateDb());
export const pendingTotalTask = toyTasks.find((t) => t.id === 'pending_total')!;

export const openingOf = (req: ChatRequest) => req.messages.find((m) => m.role === 'user')?.content ?? '';
const systemOf = (req: ChatRequest) => req.messages.find((m) => m.role === 'system')?.content ?? '';

/** A served TRACE agent (an external OpenAI-compatible endpoint): it states the pending total, and nothing else. */
export function traceAgentReply(req: ChatRequest): ScriptedReply {
  return openingOf(req) === pendingTotalTask.opening
    ? { content: `Your pending orders total ${pendingTotalTask.communicate[0]}.` }
    : { content: 'Done.' };
}

export function toyPolicy(req: ChatRequest): ScriptedReply {
  if (systemOf(req).includes('<capabilities>') && openingOf(req) === pendingTotalTask.opening) {
    return { content: `Your pending orders total ${pendingTotalTask.communicate[0]}.` };
  }
  return { content: 'Sorry, I cannot help with that.' };
}
