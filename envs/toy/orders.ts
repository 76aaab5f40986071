import { createHash } from 'node:crypto';
import type { Message, ToolCall, ToolSchema } from '../../core/messages.js';
import type { RewardInfo, Termination } from '../../core/trajectory.js';
import type { AgentAction, Environment, Episode, ResetRequest, StepResult, TaskRef } from '../environment.js';
import { buildTasks, generateDb, orderTotal, type Db, type GoldAction, type ToyTask } from './orders-data.js';

const CANCEL_REASONS = ['no_longer_needed', 'ordered_by_mistake'] as const;

const TOOLS: ToolSchema[] = [
  tool('find_customer_by_email', 'Look up a customer by email. Returns the customer id and name.', {
    email: { type: 'string' },
  }),
  tool('list_orders', "List a customer's order ids with their statuses.", { customer_id: { type: 'string' } }),
  tool('get_order', 'Get the details of an order: status, items (sku, qty, unit price), shipping address.', {
    order_id: { type: 'string' },
  }),
  tool('cancel_order', 'Cancel a pending order.', {
    order_id: { type: 'string' },
    reason: { type: 'string', enum: [...CANCEL_REASONS] },
  }),
  tool('update_shipping_address', 'Change the shipping address of a pending order.', {
    order_id: { type: 'string' },
    address: { type: 'string' },
  }),
];

function tool(
  name: string,
  description: string,
  properties: Record<string, { type: string; enum?: string[] }>,
): ToolSchema {
  return {
    type: 'function',
    function: {
      name,
      description,
      parameters: { type: 'object', properties, required: Object.keys(properties), additionalProperties: false },
    },
  };
}

const POLICY = `You are a customer service agent for an online store. Help the user with their orders using the tools.
<policy>
- Before reading or changing any order, verify the user's identity: ask for their email and look them up with find_customer_by_email. Only act on orders that belong to that customer.
- Only pending orders can be cancelled or have their shipping address changed. Shipped or delivered orders cannot; tell the user the order's status instead.
- A cancellation needs a reason, which must be one of: no_longer_needed, ordered_by_mistake. Ask the user for it.
- Make one tool call at a time. State amounts with two decimals (e.g. 57.50).
- When the user's request is resolved, tell them the result.
</policy>`;

class ToolError extends Error {}

function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v && typeof v === 'object') {
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical((v as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v);
}

export function dbHash(db: Db): string {
  return createHash('sha256').update(canonical(db)).digest('hex');
}

/** Validates arguments against the tool's JSON schema subset used above (required strings, enums, no extras). */
function checkArgs(schema: ToolSchema, args: unknown): Record<string, string> {
  if (!args || typeof args !== 'object' || Array.isArray(args)) throw new ToolError('arguments must be a JSON object');
  const params = schema.function.parameters as {
    properties: Record<string, { type: string; enum?: string[] }>;
    required: string[];
  };
  const a = args as Record<string, unknown>;
  for (const k of Object.keys(a)) if (!(k in params.properties)) throw new ToolError(`unexpected argument '${k}'`);
  for (const k of params.required) {
    if (a[k] === undefined) throw new ToolError(`missing required argument '${k}'`);
    if (typeof a[k] !== 'string') throw new ToolError(`argument '${k}' must be a string`);
    const allowed = params.properties[k].enum;
    if (allowed && !allowed.includes(a[k] as string))
      throw new ToolError(`argument '${k}' must be one of ${allowed.join(', ')}`);
  }
  return a as Record<string, string>;
}

function runTool(db: Db, name: string, a: Record<string, string>): unknown {
  const order = () => {
    const o = db.orders[a.order_id];
    if (!o) throw new ToolError(`order ${a.order_id} not found`);
    return o;
  };
  switch (name) {
    case 'find_customer_by_email': {
      const c = Object.values(db.customers).find((x) => x.email === a.email.trim().toLowerCase());
      if (!c) throw new ToolError(`no customer with email ${a.email}`);
      return { customer_id: c.id, name: c.name };
    }
    case 'list_orders': {
      if (!db.customers[a.customer_id]) throw new ToolError(`customer ${a.customer_id} not found`);
      return Object.values(db.orders)
        .filter((o) => o.customerId === a.customer_id)
        .map((o) => ({ order_id: o.id, status: o.status }));
    }
    case 'get_order': {
      const o = order();
      return {
        order_id: o.id,
        customer_id: o.customerId,
        status: o.status,
        items: o.items,
        shipping_address: o.address,
        total: orderTotal(o),
      };
    }
    case 'cancel_order': {
      const o = order();
      if (o.status !== 'pending') throw new ToolError(`order ${o.id} is ${o.status} and cannot be cancelled`);
      o.status = 'cancelled';
      o.cancelReason = a.reason;
      return { order_id: o.id, status: o.status };
    }
    case 'update_shipping_address': {
      const o = order();
      if (o.status !== 'pending') throw new ToolError(`order ${o.id} is ${o.status}; its address cannot be changed`);
      o.address = a.address;
      return { order_id: o.id, shipping_address: o.address };
    }
  }
  throw new ToolError(`unknown tool '${name}'`);
}

export function applyTool(db: Db, call: ToolCall): { content: string; error: boolean } {
  try {
    const schema = TOOLS.find((t) => t.function.name === call.function.name);
    if (!schema)
      throw new ToolError(
        `unknown tool '${call.function.name}'; available: ${TOOLS.map((t) => t.function.name).join(', ')}`,
      );
    let parsed: unknown;
    try {
      parsed = JSON.parse(call.function.arguments || '{}');
    } catch (e) {
      throw new ToolError(`arguments are not valid JSON: ${(e as Error).message}`);
    }
    return { content: JSON.stringify(runTool(db, call.function.name, checkArgs(schema, parsed))), error: false };
  } catch (e) {
    if (e instanceof ToolError) return { content: `Error: ${e.message}`, error: true };
    throw e;
  }
}

const STOP = '###STOP###';
const MAX_USER_TURNS = 8;

/** A deterministic scripted customer: answers what it is asked from the task, otherwise ends. */
export function userReply(
  task: ToyTask,
  agentText: string,
  state: { gaveEmail: boolean; turns: number },
): { content: string; done: boolean } {
  const t = agentText.toLowerCase();
  state.turns++;
  if (state.turns > MAX_USER_TURNS) return { content: STOP, done: true };
  if (t.includes('email') && !state.gaveEmail) {
    state.gaveEmail = true;
    return { content: `My email is ${task.email}.`, done: false };
  }
  if (task.reason && t.includes('reason')) return { content: task.reason, done: false };
  if (task.address && t.includes('address') && !t.includes(task.address.toLowerCase()))
    return { content: `The new address is ${task.address}.`, done: false };
  if (/\b(confirm|proceed|shall i|should i|would you like me|do you want me)\b/.test(t))
    return { content: 'Yes, please go ahead.', done: false };
  return { content: `Thanks, that's all. ${STOP}`, done: true };
}

class OrdersEpisode implements Episode {
  constructor(
    readonly id: string,
    private readonly task: ToyTask,
    private readonly db: Db,
    private readonly user: { gaveEmail: boolean; turns: number },
  ) {}

  get taskId() {
    return this.task.id;
  }

  initialMessages(): Message[] {
    return [{ role: 'user', content: this.task.opening }];
  }

  async step(action: AgentAction): Promise<StepResult> {
    if (action.type === 'tool_call') {
      const r = applyTool(this.db, action.call);
      return {
        observation: { role: 'tool', tool_call_id: action.call.id, content: r.content },
        error: r.error,
        done: false,
      };
    }
    const r = userReply(this.task, action.content, this.user);
    return {
      observation: { role: 'user', content: r.content },
      error: false,
      done: r.done,
      ...(r.done ? { termination: 'user_stop' as Termination } : {}),
    };
  }

  async evaluate(messages: Message[]): Promise<RewardInfo> {
    const gold = generateDb();
    for (const g of this.task.gold) applyGold(gold, g);
    const dbMatch = dbHash(gold) === dbHash(this.db);
    const said = messages
      .filter((m) => m.role === 'assistant')
      .map((m) => m.content ?? '')
      .join('\n')
      .toLowerCase();
    const missing = this.task.communicate.filter((v) => !said.includes(v.toLowerCase()));
    const DB = dbMatch ? 1 : 0;
    const COMMUNICATE = missing.length ? 0 : 1;
    return {
      reward: DB * COMMUNICATE,
      components: { DB, COMMUNICATE },
      success: DB * COMMUNICATE === 1,
      details: { dbMatch, ...(missing.length ? { notCommunicated: missing } : {}) },
    };
  }

  async fork(): Promise<Episode> {
    return new OrdersEpisode(`${this.id}-fork`, this.task, structuredClone(this.db), { ...this.user });
  }

  async close() {}
}

function applyGold(db: Db, g: GoldAction) {
  const r = applyTool(db, {
    id: 'gold',
    type: 'function',
    function: { name: g.tool, arguments: JSON.stringify(g.args) },
  });
  if (r.error) throw new Error(`toy-orders: gold action ${g.tool} failed: ${r.content}`);
}

export function createToyOrdersEnv(): Environment {
  const tasks = buildTasks(generateDb());
  let episodes = 0;
  return {
    info: {
      name: 'toy-orders',
      kind: 'target',
      description: 'Built-in order-management customer-service environment (5 tools, 8 tasks).',
    },
    tools: () => structuredClone(TOOLS),
    systemPrompt: () => POLICY,
    listTasks: async (): Promise<TaskRef[]> => tasks.map((t) => ({ id: t.id, split: t.split })),
    async reset(req: ResetRequest): Promise<Episode> {
      const task =
        'taskId' in req
          ? tasks.find((t) => t.id === req.taskId)
          : tasks[((req.seed % tasks.length) + tasks.length) % tasks.length];
      if (!task) throw new Error(`toy-orders: unknown taskId '${(req as { taskId: string }).taskId}'`);
      return new OrdersEpisode(`toy-orders-${++episodes}`, task, generateDb(), { gaveEmail: false, turns: 0 });
    },
  };
}
