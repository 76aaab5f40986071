import { bool, construct, dict, float, list, literal, model, opt, str, union, type Obj } from './model.js';
import { pyJsonDumps, pyRound2, pyStr } from './python-format.js';
import { CALCULATE_TOOL, params as p, Tau2Db, TRANSFER_TOOL, valueError as err, type ToolDef } from './toolkit.js';

/** tau2 retail: the pydantic models of data_model.py and every tool of tools.py (RetailTools). */
const Variant = model('Variant', [
  ['item_id', str],
  ['options', dict(str)],
  ['available', bool],
  ['price', float],
]);
const Product = model('Product', [
  ['name', str],
  ['product_id', str],
  ['variants', dict(Variant)],
]);
const UserName = model('UserName', [
  ['first_name', str],
  ['last_name', str],
]);
const UserAddress = model('UserAddress', [
  ['address1', str],
  ['address2', str],
  ['city', str],
  ['country', str],
  ['state', str],
  ['zip', str],
]);
const PaymentMethod = union('source', {
  credit_card: model('CreditCard', [
    ['source', literal('credit_card')],
    ['id', str],
    ['brand', str],
    ['last_four', str],
  ]),
  paypal: model('Paypal', [
    ['source', literal('paypal')],
    ['id', str],
  ]),
  gift_card: model('GiftCard', [
    ['source', literal('gift_card')],
    ['id', str],
    ['balance', float],
  ]),
});
const User = model('User', [
  ['user_id', str],
  ['name', UserName],
  ['address', UserAddress],
  ['email', str],
  ['payment_methods', dict(PaymentMethod)],
  ['orders', list(str)],
]);
const OrderFullfilment = model('OrderFullfilment', [
  ['tracking_id', list(str)],
  ['item_ids', list(str)],
]);
const OrderItem = model('OrderItem', [
  ['name', str],
  ['product_id', str],
  ['item_id', str],
  ['price', float],
  ['options', dict(str)],
]);
const OrderPayment = model('OrderPayment', [
  ['transaction_type', literal('payment', 'refund')],
  ['amount', float],
  ['payment_method_id', str],
]);
const Order = model('Order', [
  ['order_id', str],
  ['user_id', str],
  ['address', UserAddress],
  ['items', list(OrderItem)],
  [
    'status',
    literal(
      'processed',
      'pending',
      'pending (item modified)',
      'delivered',
      'cancelled',
      'exchange requested',
      'return requested',
    ),
  ],
  ['fulfillments', list(OrderFullfilment)],
  ['payment_history', list(OrderPayment)],
  ['cancel_reason', opt(literal('no longer needed', 'ordered by mistake')), null],
  ['exchange_items', opt(list(str)), null],
  ['exchange_new_items', opt(list(str)), null],
  ['exchange_payment_method_id', opt(str), null],
  ['exchange_price_difference', opt(float), null],
  ['return_items', opt(list(str)), null],
  ['return_payment_method_id', opt(str), null],
]);
export const RetailDB = model('RetailDB', [
  ['products', dict(Product)],
  ['users', dict(User)],
  ['orders', dict(Order)],
]);

type VariantT = { item_id: string; options: Map<string, string>; available: boolean; price: number };
type ProductT = { name: string; product_id: string; variants: Map<string, VariantT> };
type PaymentMethodT = { source: string; id: string; balance?: number };
type UserT = {
  user_id: string;
  name: { first_name: string; last_name: string };
  address: { zip: string } & Obj;
  email: string;
  payment_methods: Map<string, PaymentMethodT>;
} & Obj;
type OrderItemT = { product_id: string; item_id: string; price: number; options: Map<string, string> } & Obj;
type OrderPaymentT = { transaction_type: string; amount: number; payment_method_id: string };
type OrderT = { user_id: string; status: string; items: OrderItemT[]; payment_history: OrderPaymentT[] } & Obj;

const order = (db: Tau2Db, id: unknown): OrderT => {
  return db.get<OrderT>('orders', id, 'Order not found');
};
const user = (db: Tau2Db, id: unknown): UserT => {
  return db.get<UserT>('users', id, 'User not found');
};
const variant = (db: Tau2Db, productId: string, variantId: unknown): VariantT => {
  const product = db.get<ProductT>('products', productId, 'Product not found');
  const v = product.variants.get(variantId as string);
  if (!v) throw err('Variant not found');
  return v;
};
const paymentMethod = (db: Tau2Db, userId: string, id: unknown): PaymentMethodT => {
  const pm = user(db, userId).payment_methods.get(id as string);
  if (!pm) throw err('Payment method not found');
  return pm;
};
/** The payment method inside this copy's own clone of the user, for balance updates. */
const ownPaymentMethod = (db: Tau2Db, userId: string, id: string): PaymentMethodT =>
  db.own<UserT>('users', userId).payment_methods.get(id)!;
const count = (xs: unknown[], x: unknown) => xs.filter((y) => y === x).length;
/** Python's `sorted()` of a list of strings (code point order). */
const sorted = (xs: unknown) => [...(xs as string[])].sort();
const ADDRESS = ['address1', 'address2', 'city', 'state', 'country', 'zip'];
const address = (a: Obj) => construct(UserAddress, Object.fromEntries(ADDRESS.map((k) => [k, a[k]])));

export const retailTools: ToolDef<Tau2Db>[] = [
  CALCULATE_TOOL,
  {
    name: 'cancel_pending_order',
    type: 'write',
    returns: Order,
    params: p('order_id', 'reason'),
    run(db, a) {
      const o0 = order(db, a.order_id);
      if (o0.status !== 'pending') throw err('Non-pending order cannot be cancelled');
      if (a.reason !== 'no longer needed' && a.reason !== 'ordered by mistake') throw err('Invalid reason');
      const o = db.own<OrderT>('orders', a.order_id as string);
      const refunds: OrderPaymentT[] = [];
      for (const pay of o.payment_history) {
        refunds.push({ transaction_type: 'refund', amount: pay.amount, payment_method_id: pay.payment_method_id });
        const u = user(db, o.user_id);
        if (paymentMethod(db, u.user_id, pay.payment_method_id).source === 'gift_card') {
          const pm = ownPaymentMethod(db, u.user_id, pay.payment_method_id);
          pm.balance = pyRound2(pm.balance! + pay.amount);
        }
      }
      o.status = 'cancelled';
      o.cancel_reason = a.reason;
      o.payment_history.push(...refunds);
      return o;
    },
  },
  {
    name: 'exchange_delivered_order_items',
    type: 'write',
    returns: Order,
    params: p('order_id', 'item_ids', 'new_item_ids', 'payment_method_id'),
    run(db, a) {
      const o0 = order(db, a.order_id);
      if (o0.status !== 'delivered') throw err('Non-delivered order cannot be exchanged');
      const itemIds = a.item_ids as string[];
      const newIds = a.new_item_ids as string[];
      const all = o0.items.map((x) => x.item_id);
      for (const id of itemIds) if (count(itemIds, id) > count(all, id)) throw err(`Number of ${pyStr(id)} not found.`);
      if (itemIds.length !== newIds.length) throw err('The number of items to be exchanged should match.');
      let diff = 0;
      itemIds.forEach((id, i) => {
        const item = o0.items.find((x) => x.item_id === id);
        if (!item) throw err(`Item ${pyStr(id)} not found`);
        const v = variant(db, item.product_id, newIds[i]);
        if (!v.available) throw err(`New item ${pyStr(newIds[i])} not found or available`);
        diff += v.price - item.price;
      });
      const difference = itemIds.length ? pyRound2(diff) : { pyInt: 0 }; // Python: round(0, 2) stays the int 0
      const pm = paymentMethod(db, o0.user_id, a.payment_method_id);
      if (pm.source === 'gift_card' && pm.balance! < pyRound2(diff))
        throw err('Insufficient gift card balance to pay for the price difference');
      const o = db.own<OrderT>('orders', a.order_id as string);
      o.status = 'exchange requested';
      o.exchange_items = sorted(itemIds);
      o.exchange_new_items = sorted(newIds);
      o.exchange_payment_method_id = a.payment_method_id;
      o.exchange_price_difference = difference;
      return o;
    },
  },
  {
    name: 'find_user_id_by_name_zip',
    type: 'read',
    returns: str,
    params: p('first_name', 'last_name', 'zip'),
    run(db, a) {
      for (const [id, u] of db.table<UserT>('users')) {
        if (
          u.name.first_name.toLowerCase() === (a.first_name as string).toLowerCase() &&
          u.name.last_name.toLowerCase() === (a.last_name as string).toLowerCase() &&
          u.address.zip === a.zip
        )
          return id;
      }
      throw err('User not found');
    },
  },
  {
    name: 'find_user_id_by_email',
    type: 'read',
    returns: str,
    params: p('email'),
    run(db, a) {
      for (const [id, u] of db.table<UserT>('users'))
        if (u.email.toLowerCase() === (a.email as string).toLowerCase()) return id;
      throw err('User not found');
    },
  },
  {
    name: 'get_order_details',
    type: 'read',
    returns: Order,
    params: p('order_id'),
    run: (db, a) => order(db, a.order_id),
  },
  {
    name: 'get_product_details',
    type: 'read',
    returns: Product,
    params: p('product_id'),
    run(db, a) {
      return db.get<ProductT>('products', a.product_id, 'Product not found');
    },
  },
  {
    name: 'get_item_details',
    type: 'read',
    returns: Variant,
    params: p('item_id'),
    run(db, a) {
      for (const product of db.table<ProductT>('products').values()) {
        const v = product.variants.get(a.item_id as string);
        if (v) return v;
      }
      throw err('Item not found');
    },
  },
  { name: 'get_user_details', type: 'read', returns: User, params: p('user_id'), run: (db, a) => user(db, a.user_id) },
  {
    name: 'list_all_product_types',
    type: 'read',
    returns: str,
    params: [],
    run(db) {
      const byName = new Map<string, string>();
      for (const product of db.table<ProductT>('products').values()) byName.set(product.name, product.product_id);
      return pyJsonDumps(byName, true);
    },
  },
  {
    name: 'modify_pending_order_address',
    type: 'write',
    returns: Order,
    params: p('order_id', ...ADDRESS),
    run(db, a) {
      if (!order(db, a.order_id).status.includes('pending')) throw err('Non-pending order cannot be modified');
      const addr = address(a);
      const o = db.own<OrderT>('orders', a.order_id as string);
      o.address = addr;
      return o;
    },
  },
  {
    name: 'modify_pending_order_items',
    type: 'write',
    returns: Order,
    params: p('order_id', 'item_ids', 'new_item_ids', 'payment_method_id'),
    run(db, a) {
      const o0 = order(db, a.order_id);
      if (o0.status !== 'pending') throw err('Non-pending order cannot be modified');
      const itemIds = a.item_ids as string[];
      const newIds = a.new_item_ids as string[];
      const all = o0.items.map((x) => x.item_id);
      for (const id of itemIds) if (count(itemIds, id) > count(all, id)) throw err(`${pyStr(id)} not found`);
      if (itemIds.length !== newIds.length) throw err('The number of items to be exchanged should match');
      let diff = 0;
      let last: VariantT | undefined;
      itemIds.forEach((id, i) => {
        if (id === newIds[i]) throw err('The new item id should be different from the old item id');
        const item = o0.items.find((x) => x.item_id === id);
        if (!item) throw err(`Item ${pyStr(id)} not found`);
        last = variant(db, item.product_id, newIds[i]);
        if (!last.available) throw err(`New item ${pyStr(newIds[i])} not found or available`);
        diff += last.price - item.price;
      });
      const pm = paymentMethod(db, o0.user_id, a.payment_method_id);
      if (pm.source === 'gift_card' && pm.balance! < diff)
        throw err('Insufficient gift card balance to pay for the new item');
      const o = db.own<OrderT>('orders', a.order_id as string);
      o.payment_history.push({
        transaction_type: diff > 0 ? 'payment' : 'refund',
        amount: Math.abs(diff),
        payment_method_id: a.payment_method_id as string,
      });
      if (pm.source === 'gift_card') {
        const owned = ownPaymentMethod(db, o.user_id, a.payment_method_id as string);
        owned.balance = pyRound2(owned.balance! - diff);
      }
      itemIds.forEach((id, i) => {
        const item = o.items.find((x) => x.item_id === id)!;
        item.item_id = newIds[i];
        // Upstream quirk: price and options come from the LAST new variant for every modified item.
        item.price = last!.price;
        item.options = last!.options;
      });
      o.status = 'pending (item modified)';
      return o;
    },
  },
  {
    name: 'modify_pending_order_payment',
    type: 'write',
    returns: Order,
    params: p('order_id', 'payment_method_id'),
    run(db, a) {
      const o0 = order(db, a.order_id);
      if (!o0.status.includes('pending')) throw err('Non-pending order cannot be modified');
      const pm = paymentMethod(db, o0.user_id, a.payment_method_id);
      if (o0.payment_history.length !== 1 || o0.payment_history[0].transaction_type !== 'payment') {
        throw err('There should be exactly one payment for a pending order');
      }
      const oldId = o0.payment_history[0].payment_method_id;
      if (oldId === a.payment_method_id) throw err('The new payment method should be different from the current one');
      const amount = o0.payment_history[0].amount;
      if (pm.source === 'gift_card' && pm.balance! < amount)
        throw err('Insufficient gift card balance to pay for the order');
      const o = db.own<OrderT>('orders', a.order_id as string);
      o.payment_history.push(
        { transaction_type: 'payment', amount, payment_method_id: a.payment_method_id as string },
        { transaction_type: 'refund', amount, payment_method_id: oldId },
      );
      if (pm.source === 'gift_card') {
        const owned = ownPaymentMethod(db, o.user_id, a.payment_method_id as string);
        owned.balance = pyRound2(owned.balance! - amount);
      }
      if (paymentMethod(db, o.user_id, oldId).source === 'gift_card') {
        const owned = ownPaymentMethod(db, o.user_id, oldId);
        owned.balance = pyRound2(owned.balance! + amount);
      }
      return o;
    },
  },
  {
    name: 'modify_user_address',
    type: 'write',
    returns: User,
    params: p('user_id', ...ADDRESS),
    run(db, a) {
      user(db, a.user_id);
      const addr = address(a);
      const u = db.own<UserT>('users', a.user_id as string);
      u.address = addr as UserT['address'];
      return u;
    },
  },
  {
    name: 'return_delivered_order_items',
    type: 'write',
    returns: Order,
    params: p('order_id', 'item_ids', 'payment_method_id'),
    run(db, a) {
      const o0 = order(db, a.order_id);
      if (o0.status !== 'delivered') throw err('Non-delivered order cannot be returned');
      const u = user(db, o0.user_id);
      const pm = paymentMethod(db, u.user_id, a.payment_method_id);
      if (pm.source !== 'gift_card' && a.payment_method_id !== o0.payment_history[0].payment_method_id) {
        throw err('Payment method should be the original payment method');
      }
      const itemIds = a.item_ids as string[];
      const all = o0.items.map((x) => x.item_id);
      for (const id of itemIds) if (count(itemIds, id) > count(all, id)) throw err('Some item not found');
      const o = db.own<OrderT>('orders', a.order_id as string);
      o.status = 'return requested';
      o.return_items = sorted(itemIds);
      o.return_payment_method_id = a.payment_method_id;
      return o;
    },
  },
  TRANSFER_TOOL,
];
