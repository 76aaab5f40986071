import {
  defineEnvironment,
  defineTool,
  ToolError,
  gen,
  call,
  say,
  communicated,
  weighted,
  type AgentAction,
} from '#env-sdk';

/**
 * Permission-error recovery (paper K.2, ToolSandbox): sending a message fails with a
 * PermissionError while cellular service is off, and cellular service cannot be enabled while
 * low-battery mode is on. The agent must read the error, fix the blocking setting(s) and retry.
 * Reward = 0.6·action (the right message reached the right number) + 0.4·communication (the user
 * is told the message was sent and which settings were changed). Failure modes: giving up after
 * the first error (0), retrying without changing settings (0), not telling the user (0.6).
 */
type State = {
  settings: { cellular_service: boolean; low_battery_mode: boolean };
  contacts: { name: string; phone_number: string }[];
  sent: { phone_number: string; content: string }[];
};
type Inst = {
  initialState: State;
  userGoal: string;
  gold: AgentAction[];
  expect: { phone_number: string; content: string; mention: string[] };
};

const onOff = {
  type: 'object',
  properties: { on: { type: 'boolean', description: 'True to turn it on, false to turn it off.' } },
  required: ['on'],
};
const none = { type: 'object', properties: {} };
const norm = (s: string) =>
  s
    .trim()
    .toLowerCase()
    .replace(/[.!]+$/, '');

export default defineEnvironment<State, Inst>({
  metadata: {
    name: 'phone-settings-blockers',
    capability: 'permission_error_recovery',
    targetEnv: 'toolsandbox',
    transferRationale:
      'ToolSandbox tasks fail when agents stop at the first PermissionError instead of resolving the setting that blocks the tool; this drills reading the error, fixing the dependency chain and retrying.',
    description:
      'Send a text message to a contact on a phone whose cellular service is off and which may be in low-battery mode.',
  },
  systemPrompt:
    "You are a helpful assistant on the user's phone. Use the tools to carry out the user's request. If a tool fails, find out why and fix it if you can. Tell the user what you did.",
  tools: [
    defineTool<State, { name?: string }>({
      name: 'search_contacts',
      description: 'Search the contact book by (part of a) name. Returns matching contacts with phone numbers.',
      parameters: { type: 'object', properties: { name: { type: 'string', description: 'Name or part of it.' } } },
      run: ({ name }, { state }) =>
        state.contacts.filter((c) => !name || c.name.toLowerCase().includes(name.toLowerCase())),
    }),
    defineTool<State, { phone_number: string; content: string }>({
      name: 'send_message_with_phone_number',
      description: 'Send a text message to a phone number.',
      parameters: {
        type: 'object',
        properties: { phone_number: { type: 'string' }, content: { type: 'string' } },
        required: ['phone_number', 'content'],
      },
      run: (a, { state }) => {
        if (!state.settings.cellular_service) throw new ToolError('PermissionError: Cellular service is not enabled.');
        state.sent.push({ phone_number: a.phone_number, content: a.content });
        return 'Message sent.';
      },
    }),
    defineTool<State>({
      name: 'get_cellular_service_status',
      description: 'Whether cellular service is on.',
      parameters: none,
      run: (_a, { state }) => state.settings.cellular_service,
    }),
    defineTool<State, { on: boolean }>({
      name: 'set_cellular_service_status',
      description: 'Turn cellular service on or off.',
      parameters: onOff,
      run: ({ on }, { state }) => {
        if (on && state.settings.low_battery_mode)
          throw new ToolError('PermissionError: Cellular service cannot be turned on while low battery mode is on.');
        state.settings.cellular_service = on;
        return `Cellular service is now ${on ? 'on' : 'off'}.`;
      },
    }),
    defineTool<State>({
      name: 'get_low_battery_mode_status',
      description: 'Whether low battery mode is on.',
      parameters: none,
      run: (_a, { state }) => state.settings.low_battery_mode,
    }),
    defineTool<State, { on: boolean }>({
      name: 'set_low_battery_mode_status',
      description: 'Turn low battery mode on or off.',
      parameters: onOff,
      run: ({ on }, { state }) => {
        state.settings.low_battery_mode = on;
        return `Low battery mode is now ${on ? 'on' : 'off'}.`;
      },
    }),
  ],
  generate(seed, rng) {
    const people = gen
      .list(rng, rng.int(3, 6), (r) => ({ name: `${gen.firstName(r)} ${gen.lastName(r)}`, phone_number: gen.phone(r) }))
      .filter((c, i, all) => all.findIndex((x) => x.name.split(' ')[0] === c.name.split(' ')[0]) === i);
    const to = rng.pick(people);
    const content = rng.pick([
      'Running 10 minutes late',
      'Can you call me back?',
      `Dinner at ${rng.int(6, 9)}pm?`,
      `The code is ${rng.int(1000, 9999)}`,
      'Landed safely',
      `Meeting moved to room ${rng.int(100, 499)}`,
    ]);
    const lowBattery = rng.bool(0.6);
    const gold: AgentAction[] = [call('search_contacts', { name: to.name.split(' ')[0] })];
    if (lowBattery) gold.push(call('set_low_battery_mode_status', { on: false }));
    gold.push(
      call('set_cellular_service_status', { on: true }),
      call('send_message_with_phone_number', { phone_number: to.phone_number, content }),
    );
    const mention = lowBattery ? ['low battery', 'cellular'] : ['cellular'];
    gold.push(
      say(
        `Your message was sent to ${to.name}. I turned on cellular service${lowBattery ? ' after turning off low battery mode' : ''}.`,
      ),
    );
    return {
      initialState: { settings: { cellular_service: false, low_battery_mode: lowBattery }, contacts: people, sent: [] },
      userGoal: `Text ${to.name.split(' ')[0]}: "${content}"`,
      gold,
      expect: { phone_number: to.phone_number, content, mention },
    };
  },
  evaluate: ({ state, messages, instance }) => {
    const { phone_number, content, mention } = instance.expect;
    const action = state.sent.some((m) => m.phone_number === phone_number && norm(m.content) === norm(content));
    const comm = communicated(messages, ['sent', ...mention]);
    return weighted({ action: [0.6, action], communication: [0.4, action && comm.ok] }, { missing: comm.missing });
  },
});
