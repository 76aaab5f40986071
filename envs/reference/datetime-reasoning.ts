import { defineEnvironment, defineTool, ToolError, gen, call, say, utcFields, type AgentAction } from '#env-sdk';

/**
 * Datetime reasoning (ToolSandbox): set a reminder at a time given relative to "now" ("next
 * Tuesday at 3:30 PM", "in 3 days at 09:15", "2 hours and 20 minutes from now"). The agent must
 * read the current timestamp and do calendar arithmetic (weekdays, month ends) with timestamp
 * tools; all times are UTC. Reward 1.0 when a reminder with the right content is set for exactly
 * the right minute, else 0. Failure modes: guessing the date (0), "next Tuesday" off by a week
 * (0), 12/24-hour slips (0), no reminder (0).
 */
type State = { now: number; reminders: { content: string; reminder_timestamp: number }[] };
type Inst = {
  initialState: State;
  userGoal: string;
  gold: AgentAction[];
  expect: { content: string; timestamp: number };
};

const DAYS = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];
const int = { type: 'integer' };
const clock = (h: number, m: number) => `${((h + 11) % 12) + 1}:${String(m).padStart(2, '0')} ${h < 12 ? 'AM' : 'PM'}`;

export default defineEnvironment<State, Inst>({
  metadata: {
    name: 'relative-time-reminders',
    capability: 'datetime_reasoning',
    targetEnv: 'toolsandbox',
    transferRationale:
      'ToolSandbox reminder and calendar tasks fail on relative dates and timestamp conversion; this isolates converting phrases like "next Friday at 5 PM" into exact timestamps with the same tools.',
    description: 'Set a reminder at a time the user states relative to the current time.',
  },
  systemPrompt:
    "You are a helpful assistant on the user's phone. Use the tools to carry out the user's request. All times are in UTC. Tell the user what you did.",
  tools: [
    defineTool<State>({
      name: 'get_current_timestamp',
      description: 'Current POSIX timestamp in seconds.',
      parameters: { type: 'object', properties: {} },
      run: (_a, { state }) => state.now,
    }),
    defineTool<State, { timestamp: number }>({
      name: 'timestamp_to_datetime_info',
      description: 'Convert a POSIX timestamp to date and time fields (UTC); isoweekday is 1 = Monday … 7 = Sunday.',
      parameters: { type: 'object', properties: { timestamp: { type: 'number' } }, required: ['timestamp'] },
      run: ({ timestamp }) => utcFields(timestamp),
    }),
    defineTool<State, { year: number; month: number; day: number; hour: number; minute: number; second?: number }>({
      name: 'datetime_info_to_timestamp',
      description: 'Convert date and time fields (UTC) to a POSIX timestamp.',
      parameters: {
        type: 'object',
        properties: { year: int, month: int, day: int, hour: int, minute: int, second: int },
        required: ['year', 'month', 'day', 'hour', 'minute'],
      },
      run: (a) => {
        const ms = Date.UTC(a.year, a.month - 1, a.day, a.hour, a.minute, a.second ?? 0);
        const back = new Date(ms);
        if (back.getUTCMonth() !== a.month - 1 || back.getUTCDate() !== a.day || a.hour > 23 || a.minute > 59)
          throw new ToolError('ValueError: invalid date or time');
        return ms / 1000;
      },
    }),
    defineTool<State, { timestamp: number; weeks?: number; days?: number; hours?: number; minutes?: number }>({
      name: 'shift_timestamp',
      description: 'Shift a POSIX timestamp by weeks, days, hours and minutes (each may be negative).',
      parameters: {
        type: 'object',
        properties: { timestamp: { type: 'number' }, weeks: int, days: int, hours: int, minutes: int },
        required: ['timestamp'],
      },
      run: (a) =>
        a.timestamp + (((a.weeks ?? 0) * 7 + (a.days ?? 0)) * 24 * 60 + (a.hours ?? 0) * 60 + (a.minutes ?? 0)) * 60,
    }),
    defineTool<State, { content: string; reminder_timestamp: number }>({
      name: 'add_reminder',
      description: 'Add a reminder with content at a POSIX timestamp.',
      parameters: {
        type: 'object',
        properties: { content: { type: 'string' }, reminder_timestamp: { type: 'number' } },
        required: ['content', 'reminder_timestamp'],
      },
      run: (a, { state }) => {
        state.reminders.push({ content: a.content, reminder_timestamp: a.reminder_timestamp });
        return 'Reminder added.';
      },
    }),
  ],
  generate(seed, rng) {
    const now = Date.UTC(2024, 0, 1) / 1000 + rng.int(0, 730 * 24 * 60) * 60;
    const today = utcFields(now);
    const content = gen.task(rng);
    const hour = rng.int(7, 21),
      minute = rng.pick([0, 15, 30, 45]);
    const at = (days: number) => Date.UTC(today.year, today.month - 1, today.day + days, hour, minute) / 1000;
    const kind = rng.pick(['in_days', 'next_weekday', 'tomorrow', 'from_now'] as const);
    let phrase: string, target: number;
    const gold: AgentAction[] = [call('get_current_timestamp'), call('timestamp_to_datetime_info', { timestamp: now })];
    if (kind === 'from_now') {
      const h = rng.int(1, 30),
        m = rng.int(1, 59);
      phrase = `${h} hours and ${m} minutes from now`;
      target = now + (h * 60 + m) * 60;
      gold.push(call('shift_timestamp', { timestamp: now, hours: h, minutes: m }));
    } else {
      const wd = rng.int(0, 6);
      const days =
        kind === 'tomorrow' ? 1 : kind === 'in_days' ? rng.int(2, 20) : (wd - (today.isoweekday % 7) + 7) % 7 || 7;
      phrase =
        kind === 'tomorrow'
          ? `tomorrow at ${clock(hour, minute)}`
          : kind === 'in_days'
            ? `in ${days} days at ${clock(hour, minute)}`
            : `next ${DAYS[wd]} at ${clock(hour, minute)}`;
      target = at(days);
      const t = utcFields(target);
      gold.push(
        call('datetime_info_to_timestamp', {
          year: t.year,
          month: t.month,
          day: t.day,
          hour: t.hour,
          minute: t.minute,
        }),
      );
    }
    gold.push(
      call('add_reminder', { content, reminder_timestamp: target }),
      say(`Done: "${content}" is set for ${new Date(target * 1000).toISOString()}.`),
    );
    return {
      initialState: { now, reminders: [] },
      userGoal: `Remind me to ${content} ${phrase}.${kind === 'next_weekday' ? ' (If today is that day, I mean the one a week from today.)' : ''}`,
      gold,
      expect: { content, timestamp: target },
    };
  },
  evaluate: ({ state, instance }) => {
    const same = (c: string) => c.trim().toLowerCase().includes(instance.expect.content.toLowerCase());
    const content = state.reminders.some((r) => same(r.content));
    const exact = state.reminders.some((r) => same(r.content) && r.reminder_timestamp === instance.expect.timestamp);
    return { reward: exact ? 1 : 0, components: { CONTENT: content ? 1 : 0, TIME: exact ? 1 : 0 } };
  },
});
