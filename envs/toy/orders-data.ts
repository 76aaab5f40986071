/**
 * toy-orders: a small order-management target environment built into the project, so stage 1 runs
 * before the τ² port lands. The database is generated from a fixed seed; every task's success is
 * verifiable from the final DB state and the values the agent must communicate.
 */

import { seededRandom } from '../../core/stats.js';

export type OrderStatus = 'pending' | 'shipped' | 'delivered' | 'cancelled';

export interface Customer {
  id: string;
  name: string;
  email: string;
}

export interface Order {
  id: string;
  customerId: string;
  status: OrderStatus;
  items: { sku: string; qty: number; price: number }[];
  address: string;
  cancelReason?: string;
}

export interface Db {
  customers: Record<string, Customer>;
  orders: Record<string, Order>;
}

export type GoldAction =
  | { tool: 'cancel_order'; args: { order_id: string; reason: string } }
  | { tool: 'update_shipping_address'; args: { order_id: string; address: string } };

export interface ToyTask {
  id: string;
  split: 'train' | 'test';
  /** The customer's first message. */
  opening: string;
  email: string;
  /** What the scripted user says when asked for a reason / new address. */
  reason?: string;
  address?: string;
  gold: GoldAction[];
  /** Values the agent must state to the user (case-insensitive substring). */
  communicate: string[];
}

const NAMES = ['Ada Park', 'Bo Chen', 'Cleo Diaz', 'Dev Patel'];
const SKUS = ['lamp', 'mug', 'kettle', 'chair', 'rug', 'clock'];
const STREETS = ['1 Oak Rd', '22 Pine Ave', '7 Birch Ln', '301 Cedar Ct'];
/** Order statuses fixed per order so the tasks below stay meaningful for any seed. */
const STATUS_PLAN: OrderStatus[] = [
  'delivered',
  'pending',
  'shipped',
  'pending',
  'delivered',
  'pending',
  'delivered',
  'delivered',
];

export const DB_SEED = 7;

export function generateDb(seed = DB_SEED): Db {
  const rand = seededRandom(seed);
  const customers: Record<string, Customer> = {};
  NAMES.forEach((name, i) => {
    const id = `C-${100 + i}`;
    customers[id] = { id, name, email: `${name.split(' ')[0].toLowerCase()}@example.com` };
  });
  const orders: Record<string, Order> = {};
  STATUS_PLAN.forEach((status, i) => {
    const id = `O-${1001 + i}`;
    const customerId = `C-${100 + (i % 2)}`;
    const n = 1 + Math.floor(rand() * 3);
    const items = Array.from({ length: n }, () => ({
      sku: SKUS[Math.floor(rand() * SKUS.length)],
      qty: 1 + Math.floor(rand() * 3),
      price: Math.round((5 + rand() * 45) * 4) / 4,
    }));
    orders[id] = { id, customerId, status, items, address: STREETS[i % STREETS.length] };
  });
  return { customers, orders };
}

export function orderTotal(o: Order): number {
  return Math.round(o.items.reduce((s, it) => s + it.qty * it.price, 0) * 100) / 100;
}

export function money(x: number): string {
  return x.toFixed(2);
}

/** Tasks whose expected answers are computed from the generated DB, not typed by hand. */
export function buildTasks(db: Db): ToyTask[] {
  const o = db.orders;
  const ada = db.customers['C-100'];
  const bo = db.customers['C-101'];
  const delivered = (c: string) =>
    Object.values(o).filter((x) => x.customerId === c && x.status === 'delivered').length;
  const pendingTotal = (c: string) =>
    Object.values(o)
      .filter((x) => x.customerId === c && x.status === 'pending')
      .reduce((s, x) => s + orderTotal(x), 0);
  return [
    {
      id: 'order_total',
      split: 'train',
      opening: 'Hi, how much did I pay in total for order O-1001?',
      email: ada.email,
      gold: [],
      communicate: [money(orderTotal(o['O-1001']))],
    },
    {
      id: 'cancel_pending',
      split: 'train',
      opening: 'Please cancel my order O-1002.',
      email: bo.email,
      reason: 'I ordered it by mistake.',
      gold: [{ tool: 'cancel_order', args: { order_id: 'O-1002', reason: 'ordered_by_mistake' } }],
      communicate: [],
    },
    {
      id: 'cancel_shipped',
      split: 'train',
      opening: 'I want to cancel order O-1003 right now.',
      email: ada.email,
      reason: 'I no longer need it.',
      gold: [],
      communicate: ['shipped'],
    },
    {
      id: 'change_address',
      split: 'train',
      opening: 'Can you change the shipping address of my order O-1004?',
      email: bo.email,
      address: '12 Elm St, Springfield',
      gold: [{ tool: 'update_shipping_address', args: { order_id: 'O-1004', address: '12 Elm St, Springfield' } }],
      communicate: [],
    },
    {
      id: 'count_delivered',
      split: 'train',
      opening: 'How many of my orders have been delivered so far?',
      email: ada.email,
      gold: [],
      communicate: [String(delivered(ada.id))],
    },
    {
      id: 'order_status',
      split: 'train',
      opening: 'What is the status of my order O-1007?',
      email: ada.email,
      gold: [],
      communicate: [o['O-1007'].status],
    },
    {
      id: 'cancel_pending_2',
      split: 'test',
      opening: 'Cancel order O-1006 please.',
      email: bo.email,
      reason: 'I no longer need it.',
      gold: [{ tool: 'cancel_order', args: { order_id: 'O-1006', reason: 'no_longer_needed' } }],
      communicate: [],
    },
    {
      id: 'pending_total',
      split: 'test',
      opening: 'What is the combined total of all my pending orders?',
      email: bo.email,
      gold: [],
      communicate: [money(pendingTotal(bo.id))],
    },
  ];
}
