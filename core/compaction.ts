import type { Message } from './messages.js';
import type { Trajectory } from './trajectory.js';

/**
 * Deterministic compaction of a trajectory into analyst-readable text within a char budget.
 * The outcome header (success, reward and its components, termination, failure details) is always
 * kept; tool outputs and arguments are truncated with a marker first, then the middle of the
 * conversation is dropped, keeping the opening turn and as many of the last messages as fit.
 */

export function truncate(text: string, max: number): string {
  if (text.length <= max) return text;
  const omitted = text.length - max;
  return `${text.slice(0, max)}…[truncated ${omitted} chars]`;
}

interface Caps {
  content: number;
  toolOutput: number;
  toolArgs: number;
}

const START_CAPS: Caps = { content: 1200, toolOutput: 600, toolArgs: 300 };
const MIN_CAPS: Caps = { content: 200, toolOutput: 80, toolArgs: 60 };
/** Messages kept from the start when the middle must go: the opening user request. */
const HEAD_MESSAGES = 2;

function oneLine(s: string): string {
  return s.replace(/\s+/g, ' ').trim();
}

function renderMessage(m: Message, index: number, caps: Caps): string {
  switch (m.role) {
    case 'system':
      return `[${index}] system: ${truncate(oneLine(m.content), caps.content)}`;
    case 'user':
      return `[${index}] user: ${truncate(oneLine(m.content), caps.content)}`;
    case 'tool':
      return `[${index}] tool result: ${truncate(oneLine(m.content), caps.toolOutput)}`;
    case 'assistant': {
      const parts: string[] = [];
      if (m.content) parts.push(truncate(oneLine(m.content), caps.content));
      for (const c of m.tool_calls ?? [])
        parts.push(`→ ${c.function.name}(${truncate(oneLine(c.function.arguments), caps.toolArgs)})`);
      return `[${index}] assistant: ${parts.join(' ') || '(empty)'}`;
    }
  }
}

export function renderHeader(t: Trajectory, max: number): string {
  const comps = Object.entries(t.rewardInfo.components)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([k, v]) => `${k}=${v}`)
    .join(', ');
  const lines = [
    `trajectory ${t.id} (task ${t.taskId}, trial ${t.trial})`,
    `outcome: ${t.success ? 'SUCCESS' : 'FAILURE'}; reward ${t.reward}${comps ? ` (${comps})` : ''}; termination: ${t.termination}; ${t.steps} steps`,
  ];
  if (t.rewardInfo.details && Object.keys(t.rewardInfo.details).length) {
    lines.push(`evaluation details: ${JSON.stringify(t.rewardInfo.details)}`);
  }
  return truncate(lines.join('\n'), max);
}

function renderAll(messages: readonly { m: Message; i: number }[], caps: Caps): string[] {
  return messages.map(({ m, i }) => renderMessage(m, i, caps));
}

/** The conversation without the system prompt (the policy is shown to the analyst once, separately). */
function conversation(t: Trajectory): { m: Message; i: number }[] {
  return t.messages.map((m, i) => ({ m, i })).filter(({ m }) => m.role !== 'system');
}

export function compactTrajectory(t: Trajectory, budget: number): string {
  const header = renderHeader(t, Math.max(200, Math.floor(budget / 4)));
  const msgs = conversation(t);
  const room = Math.max(0, budget - header.length - 1);
  const fits = (lines: string[]) => lines.reduce((n, l) => n + l.length + 1, 0) <= room;

  let caps = { ...START_CAPS };
  let lines = renderAll(msgs, caps);
  while (
    !fits(lines) &&
    (caps.content > MIN_CAPS.content || caps.toolOutput > MIN_CAPS.toolOutput || caps.toolArgs > MIN_CAPS.toolArgs)
  ) {
    caps = {
      content: Math.max(MIN_CAPS.content, Math.floor(caps.content / 2)),
      toolOutput: Math.max(MIN_CAPS.toolOutput, Math.floor(caps.toolOutput / 2)),
      toolArgs: Math.max(MIN_CAPS.toolArgs, Math.floor(caps.toolArgs / 2)),
    };
    lines = renderAll(msgs, caps);
  }
  if (!fits(lines)) lines = keepHeadAndTail(lines, room);
  return truncate([header, ...lines].join('\n'), budget);
}

/** Keeps the opening messages and the longest suffix that fits, with a marker for the gap. */
function keepHeadAndTail(lines: string[], room: number): string[] {
  const head = lines.slice(0, HEAD_MESSAGES);
  let used = head.reduce((n, l) => n + l.length + 1, 0);
  const tail: string[] = [];
  for (let k = lines.length - 1; k >= HEAD_MESSAGES; k--) {
    const marker = `[… ${k - HEAD_MESSAGES} messages omitted …]`;
    if (used + lines[k].length + 1 + marker.length + 1 > room) break;
    tail.unshift(lines[k]);
    used += lines[k].length + 1;
  }
  const omitted = lines.length - head.length - tail.length;
  return omitted > 0 ? [...head, `[… ${omitted} messages omitted …]`, ...tail] : [...head, ...tail];
}
