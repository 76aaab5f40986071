import { gen, addDays } from './data.js';
import type { Rng } from './rng.js';
import { stableHash } from './state.js';
import type { ToolSchema } from '../../core/messages.js';
import TAU2_AIRLINE_SCHEMAS from '../../data/tau2/airline/derived/tools_openai_schema.json' with { type: 'json' };
import { ToolError, toolsFromSchemas, type ToolContext, type ToolDef } from './tools.js';

/**
 * A synthetic airline DB in τ²-airline's shapes, served by tools with τ²-airline's exact schemas
 * (upstream data/tau2/airline) and observation shapes (a subset: user/reservation lookup, cancel,
 * baggage and passenger updates, calculate, certificates, transfer). Environments targeting tau2-airline build their state with
 * `airlineUser` and pick the tools they need from `airlineTools`.
 */
export type Cabin = 'basic_economy' | 'economy' | 'business';
export interface Passenger {
  first_name: string;
  last_name: string;
  dob: string;
}
export interface PaymentMethod {
  source: 'credit_card' | 'gift_card' | 'certificate';
  id: string;
  brand?: string;
  last_four?: string;
  amount?: number;
}
export interface FlightSegment {
  flight_number: string;
  origin: string;
  destination: string;
  date: string;
  price: number;
}
export interface Reservation {
  reservation_id: string;
  user_id: string;
  origin: string;
  destination: string;
  flight_type: 'one_way' | 'round_trip';
  cabin: Cabin;
  flights: FlightSegment[];
  passengers: Passenger[];
  payment_history: { payment_id: string; amount: number }[];
  created_at: string;
  total_baggages: number;
  nonfree_baggages: number;
  insurance: 'yes' | 'no';
  status: 'cancelled' | null;
}
export interface AirlineUser {
  user_id: string;
  name: { first_name: string; last_name: string };
  email: string;
  dob: string;
  payment_methods: Record<string, PaymentMethod>;
  saved_passengers: Passenger[];
  membership: 'regular' | 'silver' | 'gold';
  reservations: string[];
}
export interface AirlineDb {
  users: Record<string, AirlineUser>;
  reservations: Record<string, Reservation>;
}

function reservationOf(db: AirlineDb, id: string): Reservation {
  const r = db.reservations[id];
  if (!r) throw new ToolError('Reservation not found');
  return r;
}

function userOf(db: AirlineDb, id: string): AirlineUser {
  const u = db.users[id];
  if (!u) throw new ToolError('User not found');
  return u;
}

/** Charges `amount` to a payment method of the reservation's user (gift cards and certificates must cover it). */
function charge(db: AirlineDb, r: Reservation, paymentId: string, amount: number): void {
  const pm = userOf(db, r.user_id).payment_methods[paymentId];
  if (!pm) throw new ToolError('Payment method not found');
  if (pm.source !== 'credit_card') {
    if ((pm.amount ?? 0) < amount) throw new ToolError('Gift card balance is not enough');
    pm.amount = Math.round(((pm.amount ?? 0) - amount) * 100) / 100;
  }
  if (amount > 0) r.payment_history.push({ payment_id: paymentId, amount });
}

type Run<A> = (args: A, ctx: ToolContext<AirlineDb>) => unknown;

const impls = {
  get_user_details: (({ user_id }, { state }) => userOf(state, user_id)) as Run<{ user_id: string }>,
  get_reservation_details: (({ reservation_id }, { state }) => reservationOf(state, reservation_id)) as Run<{
    reservation_id: string;
  }>,
  cancel_reservation: (({ reservation_id }, { state }) => {
    const r = reservationOf(state, reservation_id);
    if (r.status === 'cancelled') throw new ToolError('Reservation is already cancelled');
    r.payment_history.push(...r.payment_history.map((p) => ({ payment_id: p.payment_id, amount: -p.amount })));
    r.status = 'cancelled';
    return r;
  }) as Run<{ reservation_id: string }>,
  update_reservation_baggages: (({ reservation_id, total_baggages, nonfree_baggages, payment_id }, { state }) => {
    const r = reservationOf(state, reservation_id);
    charge(state, r, payment_id, 50 * Math.max(0, nonfree_baggages - r.nonfree_baggages));
    r.total_baggages = total_baggages;
    r.nonfree_baggages = nonfree_baggages;
    return r;
  }) as Run<{ reservation_id: string; total_baggages: number; nonfree_baggages: number; payment_id: string }>,
  update_reservation_passengers: (({ reservation_id, passengers }, { state }) => {
    const r = reservationOf(state, reservation_id);
    if (passengers.length !== r.passengers.length) throw new ToolError('Number of passengers does not match');
    // Upstream's schema also admits free-form objects; like τ²'s pydantic model, require the three fields.
    const bad = passengers.findIndex(
      (p) =>
        !['first_name', 'last_name', 'dob'].every(
          (k) => typeof (p as unknown as Record<string, unknown>)[k] === 'string',
        ),
    );
    if (bad >= 0) throw new ToolError(`passengers[${bad}] needs string first_name, last_name and dob`);
    r.passengers = passengers.map((p) => ({ first_name: p.first_name, last_name: p.last_name, dob: p.dob }));
    return r;
  }) as Run<{ reservation_id: string; passengers: Passenger[] }>,
  send_certificate: (({ user_id, amount }, { state }) => {
    const u = userOf(state, user_id);
    const id = `certificate_${parseInt(stableHash([user_id, amount, Object.keys(u.payment_methods)]).slice(0, 8), 16) % 10_000_000}`;
    u.payment_methods[id] = { source: 'certificate', id, amount };
    return `Certificate ${id} added to user ${user_id} with amount ${amount}.`;
  }) as Run<{ user_id: string; amount: number }>,
  calculate: (({ expression }) => String(Math.round(evaluateArithmetic(expression) * 100) / 100)) as Run<{
    expression: string;
  }>,
  transfer_to_human_agents: (() => 'Transfer successful') as Run<{ summary: string }>,
};

/** τ² airline's own agent tool schemas (upstream `tools_openai_schema.json`), all 14 tools. */
export const AIRLINE_TOOL_SCHEMAS = TAU2_AIRLINE_SCHEMAS as ToolSchema[];

/** Implementations over `AirlineDb` for a subset of τ² airline's tools, with the upstream schemas. */
export const airlineTools = Object.fromEntries(
  toolsFromSchemas(AIRLINE_TOOL_SCHEMAS, impls).map((t) => [t.name, t]),
) as Record<keyof typeof impls, ToolDef<AirlineDb>>;

/** Arithmetic over + - * / and parentheses (no eval). */
export function evaluateArithmetic(expr: string): number {
  if (!/^[\d+\-*/().\s]+$/.test(expr)) throw new ToolError('Invalid characters in expression');
  const tokens = expr.match(/\d+(?:\.\d+)?|[-+*/()]/g) ?? [];
  let i = 0;
  const peek = () => tokens[i];
  const primary = (): number => {
    const t = tokens[i++];
    if (t === '(') {
      const v = sum();
      if (tokens[i++] !== ')') throw new ToolError('Unbalanced parentheses');
      return v;
    }
    if (t === '-') return -primary();
    if (t === undefined || Number.isNaN(Number(t))) throw new ToolError('Invalid expression');
    return Number(t);
  };
  const product = (): number => {
    let v = primary();
    while (peek() === '*' || peek() === '/') v = tokens[i++] === '*' ? v * primary() : v / primary();
    return v;
  };
  const sum = (): number => {
    let v = product();
    while (peek() === '+' || peek() === '-') v = tokens[i++] === '+' ? v + product() : v - product();
    return v;
  };
  const v = sum();
  if (i !== tokens.length || !Number.isFinite(v)) throw new ToolError('Invalid expression');
  return v;
}

export const AIRLINE_POLICY = `# Airline Agent Policy
The current time is 2024-05-15 15:00:00 EST.
As an airline agent, you can help users book, modify, or cancel flight reservations.
- Before taking any action that updates the booking database, obtain explicit user confirmation (yes) to proceed.
- Only make one tool call at a time; if you make a tool call, do not respond to the user at the same time.
- Deny requests that are against this policy.
- Transfer to a human agent only if the request cannot be handled within the scope of your actions.
## Cancel flight
A reservation can be cancelled if it was booked within the last 24 hours, or the flight was cancelled by the airline, or it is in business class, or the user has travel insurance and the reason is covered. Refunds go to the original payment methods.
## Baggage
Each passenger gets free checked bags by membership and cabin: regular 0/1/2, silver 1/2/3, gold 2/3/3 (basic economy/economy/business). Each extra bag costs $50. Bags can be added but not removed.
## Passengers
The number of passengers cannot change; names and dates of birth can be updated.`;

/**
 * A user with `reservations` reservations in τ²-airline shapes (booked before 2024-05-15, flying
 * after it). Pass `cabins` to fix cabins; prices, routes, dates and passengers vary with the seed.
 */
export function airlineUser(
  rng: Rng,
  opts: { reservations: number; cabins?: Cabin[]; membership?: AirlineUser['membership'] },
): AirlineDb {
  const p = gen.person(rng);
  const dob = gen.date(rng, '1950-01-01', '2004-12-31');
  const user_id = gen.userId(rng, p);
  const card = gen.id(rng, 'credit_card_');
  const gift = gen.id(rng, 'gift_card_');
  const payment_methods: Record<string, PaymentMethod> = {
    [card]: {
      source: 'credit_card',
      id: card,
      brand: rng.pick(['visa', 'mastercard']),
      last_four: rng.string(4, '0123456789'),
    },
    [gift]: { source: 'gift_card', id: gift, amount: gen.price(rng, 50, 400) },
  };
  const saved: Passenger[] = gen.list(rng, rng.int(1, 3), (r) => ({
    ...gen.person(r),
    dob: gen.date(r, '1950-01-01', '2010-12-31'),
  }));
  const reservations: Record<string, Reservation> = {};
  const ids = new Set<string>();
  for (let k = 0; k < opts.reservations; k++) {
    let id = gen.locator(rng);
    while (ids.has(id)) id = gen.locator(rng);
    ids.add(id);
    const [a, b] = rng.sample(['BOS', 'ORD', 'DEN', 'SEA', 'MIA', 'JFK', 'LAX', 'SFO', 'ATL', 'DFW'], 2);
    const roundTrip = rng.bool();
    const date = gen.date(rng, '2024-05-16', '2024-06-30');
    const cabin: Cabin = opts.cabins?.[k] ?? rng.pick(['basic_economy', 'economy', 'business'] as const);
    const seg = (o: string, d: string, day: string): FlightSegment => ({
      flight_number: gen.flightNumber(rng),
      origin: o,
      destination: d,
      date: day,
      price: Math.round(gen.price(rng, 60, cabin === 'business' ? 1800 : 600)),
    });
    const flights = roundTrip ? [seg(a, b, date), seg(b, a, addDays(date, rng.int(2, 10)))] : [seg(a, b, date)];
    const passengers: Passenger[] = [
      { first_name: p.first_name, last_name: p.last_name, dob },
      ...rng.sample(saved, rng.int(0, saved.length)),
    ];
    const total = flights.reduce((s, f) => s + f.price, 0) * passengers.length;
    const bags = rng.int(0, passengers.length);
    reservations[id] = {
      reservation_id: id,
      user_id,
      origin: a,
      destination: b,
      flight_type: roundTrip ? 'round_trip' : 'one_way',
      cabin,
      flights,
      passengers,
      payment_history: [{ payment_id: card, amount: total }],
      created_at: gen.dateTime(rng, gen.date(rng, '2024-04-01', '2024-05-14'), 60),
      total_baggages: bags,
      nonfree_baggages: 0,
      insurance: rng.bool(0.3) ? 'yes' : 'no',
      status: null,
    };
  }
  const user: AirlineUser = {
    user_id,
    name: p,
    email: gen.email(rng, p),
    dob,
    payment_methods,
    saved_passengers: saved,
    membership: opts.membership ?? rng.pick(['regular', 'silver', 'gold'] as const),
    reservations: [...ids],
  };
  return { users: { [user_id]: user }, reservations };
}
