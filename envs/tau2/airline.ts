import { construct, dict, float, int, list, literal, model, opt, str, union, type Obj } from './model.js';
import { pyStr } from './python-format.js';
import { CALCULATE_TOOL, params as p, Tau2Db, TRANSFER_TOOL, valueError as err, type ToolDef } from './toolkit.js';

/** tau2 airline: the pydantic models of data_model.py and every tool of tools.py (AirlineTools). */
const Cabin = literal('business', 'economy', 'basic_economy');
const Name = model('Name', [
  ['first_name', str],
  ['last_name', str],
]);
const Address = model('Address', [
  ['address1', str],
  ['address2', opt(str), null],
  ['city', str],
  ['country', str],
  ['state', str],
  ['zip', str],
]);
const Payment = model('Payment', [
  ['payment_id', str],
  ['amount', int],
]);
const Certificate = model('Certificate', [
  ['source', literal('certificate')],
  ['id', str],
  ['amount', float],
]);
const PaymentMethod = union('source', {
  credit_card: model('CreditCard', [
    ['source', literal('credit_card')],
    ['id', str],
    ['brand', str],
    ['last_four', str],
  ]),
  gift_card: model('GiftCard', [
    ['source', literal('gift_card')],
    ['id', str],
    ['amount', float],
  ]),
  certificate: Certificate,
});
const Passenger = model('Passenger', [
  ['first_name', str],
  ['last_name', str],
  ['dob', str],
]);
const FlightDateStatus = union('status', {
  available: model('FlightDateStatusAvailable', [
    ['status', str],
    ['available_seats', dict(int)],
    ['prices', dict(int)],
  ]),
  'on time': model('FlightDataStatusOnTime', [
    ['status', str],
    ['estimated_departure_time_est', str],
    ['estimated_arrival_time_est', str],
  ]),
  flying: model('FlightDataStatusFlying', [
    ['status', str],
    ['actual_departure_time_est', str],
    ['estimated_arrival_time_est', str],
  ]),
  landed: model('FlightDateStatusLanded', [
    ['status', str],
    ['actual_departure_time_est', str],
    ['actual_arrival_time_est', str],
  ]),
  cancelled: model('FlightDateStatusCancelled', [['status', str]]),
  delayed: model('FlightDateStatusDelayed', [
    ['status', str],
    ['estimated_departure_time_est', str],
    ['estimated_arrival_time_est', str],
  ]),
});
const Flight = model('Flight', [
  ['flight_number', str],
  ['origin', str],
  ['destination', str],
  ['scheduled_departure_time_est', str],
  ['scheduled_arrival_time_est', str],
  ['dates', dict(FlightDateStatus)],
]);
const DirectFlight = model('DirectFlight', [
  ['flight_number', str],
  ['origin', str],
  ['destination', str],
  ['status', literal('available')],
  ['scheduled_departure_time_est', str],
  ['scheduled_arrival_time_est', str],
  ['date', opt(str), null],
  ['available_seats', dict(int)],
  ['prices', dict(int)],
]);
const ReservationFlight = model('ReservationFlight', [
  ['flight_number', str],
  ['origin', str],
  ['destination', str],
  ['date', str],
  ['price', int],
]);
const FlightInfo = model('FlightInfo', [
  ['flight_number', str],
  ['date', str],
]);
const User = model('User', [
  ['user_id', str],
  ['name', Name],
  ['address', Address],
  ['email', str],
  ['dob', str],
  ['payment_methods', dict(PaymentMethod)],
  ['saved_passengers', list(Passenger)],
  ['membership', literal('gold', 'silver', 'regular')],
  ['reservations', list(str)],
]);
const Reservation = model('Reservation', [
  ['reservation_id', str],
  ['user_id', str],
  ['origin', str],
  ['destination', str],
  ['flight_type', literal('round_trip', 'one_way')],
  ['cabin', Cabin],
  ['flights', list(ReservationFlight)],
  ['passengers', list(Passenger)],
  ['payment_history', list(Payment)],
  ['created_at', str],
  ['total_baggages', int],
  ['nonfree_baggages', int],
  ['insurance', literal('yes', 'no')],
  ['status', opt(literal('cancelled')), null],
]);
const AirportCode = model('AirportCode', [
  ['iata', str],
  ['city', str],
]);
export const FlightDB = model('FlightDB', [
  ['flights', dict(Flight)],
  ['users', dict(User)],
  ['reservations', dict(Reservation)],
]);

type PaymentMethodT = { source: string; id: string; amount?: number };
type UserT = { user_id: string; payment_methods: Map<string, PaymentMethodT>; reservations: string[] } & Obj;
type ReservationFlightT = { flight_number: string; date: string; price: number } & Obj;
type ReservationT = {
  user_id: string;
  cabin: string;
  flights: ReservationFlightT[];
  passengers: Obj[];
  payment_history: { payment_id: string; amount: number }[];
  nonfree_baggages: number;
  total_baggages: unknown;
  status: string | null;
} & Obj;
type DateStatusT = { status: string; available_seats: Map<string, number>; prices: Map<string, number> } & Obj;
type FlightT = {
  flight_number: string;
  origin: string;
  destination: string;
  scheduled_departure_time_est: string;
  scheduled_arrival_time_est: string;
  dates: Map<string, DateStatusT>;
};

const AIRPORTS: [string, string][] = [
  ['SFO', 'San Francisco'],
  ['JFK', 'New York'],
  ['LAX', 'Los Angeles'],
  ['ORD', 'Chicago'],
  ['DFW', 'Dallas'],
  ['DEN', 'Denver'],
  ['SEA', 'Seattle'],
  ['ATL', 'Atlanta'],
  ['MIA', 'Miami'],
  ['BOS', 'Boston'],
  ['PHX', 'Phoenix'],
  ['IAH', 'Houston'],
  ['LAS', 'Las Vegas'],
  ['MCO', 'Orlando'],
  ['EWR', 'Newark'],
  ['CLT', 'Charlotte'],
  ['MSP', 'Minneapolis'],
  ['DTW', 'Detroit'],
  ['PHL', 'Philadelphia'],
  ['LGA', 'LaGuardia'],
];
/** tau2 mints at most three of each per task, always in this order. */
const NEW_RESERVATION_IDS = ['HATHAT', 'HATHAU', 'HATHAV'];
const NEW_CERTIFICATE_IDS = ['certificate_3221322', 'certificate_3221323', 'certificate_3221324'];
const NOW = '2024-05-15T15:00:00';

const user = (db: Tau2Db, id: unknown): UserT => {
  return db.get<UserT>('users', id, `User ${pyStr(id)} not found`);
};
const reservation = (db: Tau2Db, id: unknown): ReservationT => {
  return db.get<ReservationT>('reservations', id, `Reservation ${pyStr(id)} not found`);
};
const flight = (db: Tau2Db, n: unknown): FlightT => {
  return db.get<FlightT>('flights', n, `Flight ${pyStr(n)} not found`);
};
const flightInstance = (db: Tau2Db, n: unknown, date: unknown): DateStatusT => {
  const d = flight(db, n).dates.get(date as string);
  if (!d) throw err(`Flight ${pyStr(n)} not found on date ${pyStr(date)}`);
  return d;
};
/** Python `d[key]`, whose KeyError prints as the key's repr. */
const at = <T>(m: Map<string, T>, key: unknown): T => {
  if (!m.has(key as string)) throw err(typeof key === 'string' ? `'${key}'` : pyStr(key));
  return m.get(key as string)!;
};
const allDicts = (xs: unknown) =>
  Array.isArray(xs) && xs.every((x) => typeof x === 'object' && x !== null && !Array.isArray(x));
const asModels = (xs: unknown, t: typeof Passenger): Obj[] =>
  allDicts(xs) ? (xs as Obj[]).map((x) => construct(t, x)) : (xs as Obj[]);

function searchDirect(db: Tau2Db, date: unknown, origin: unknown, destination: unknown, leaveAfter?: string): Obj[] {
  const out: Obj[] = [];
  for (const f of db.table<FlightT>('flights').values()) {
    const d = f.dates.get(date as string);
    if (
      (origin === null || f.origin === origin) &&
      (destination === null || f.destination === destination) &&
      d !== undefined &&
      d.status === 'available' &&
      (leaveAfter === undefined || f.scheduled_departure_time_est >= leaveAfter)
    ) {
      out.push({
        flight_number: f.flight_number,
        origin: f.origin,
        destination: f.destination,
        status: 'available',
        scheduled_departure_time_est: f.scheduled_departure_time_est,
        scheduled_arrival_time_est: f.scheduled_arrival_time_est,
        date: null,
        available_seats: new Map(d.available_seats),
        prices: new Map(d.prices),
      });
    }
  }
  return out;
}

/** `_payment_for_update`: checks and charges `payment_id`; returns the Payment, or null for 0. */
function paymentForUpdate(db: Tau2Db, u: UserT, paymentId: unknown, total: number): Obj | null {
  const pm = u.payment_methods.get(paymentId as string);
  if (!pm) throw err('Payment method not found');
  if (pm.source === 'certificate') throw err('Certificate cannot be used to update reservation');
  if (pm.source === 'gift_card' && pm.amount! < total) throw err('Gift card balance is not enough');
  if (pm.source === 'gift_card')
    db.own<UserT>('users', u.user_id).payment_methods.get(paymentId as string)!.amount! -= total;
  return total !== 0 ? construct(Payment, { payment_id: paymentId as string, amount: total }) : null;
}

export const airlineTools: ToolDef<Tau2Db>[] = [
  {
    name: 'book_reservation',
    type: 'write',
    returns: Reservation,
    params: p(
      'user_id',
      'origin',
      'destination',
      'flight_type',
      'cabin',
      'flights',
      'passengers',
      'payment_methods',
      'total_baggages',
      'nonfree_baggages',
      'insurance',
    ),
    run(db, a) {
      const flights = asModels(a.flights, FlightInfo) as { flight_number: string; date: string }[];
      const passengers = asModels(a.passengers, Passenger);
      const payments = asModels(a.payment_methods, Payment) as { payment_id: string; amount: number }[];
      const u = user(db, a.user_id);
      const id = NEW_RESERVATION_IDS.find((r) => !db.table('reservations').has(r));
      if (!id) throw err('Too many reservations');
      const res = construct(Reservation, {
        reservation_id: id,
        user_id: a.user_id,
        origin: a.origin,
        destination: a.destination,
        flight_type: a.flight_type,
        cabin: a.cabin,
        flights: [],
        passengers: structuredClone(passengers),
        payment_history: structuredClone(payments),
        created_at: NOW,
        total_baggages: a.total_baggages,
        nonfree_baggages: a.nonfree_baggages,
        insurance: a.insurance,
      }) as ReservationT;
      const cabin = res.cabin;
      let total = 0;
      const taken: [string, string][] = [];
      for (const fi of flights) {
        const f = flight(db, fi.flight_number);
        const d = flightInstance(db, fi.flight_number, fi.date);
        if (d.status !== 'available') throw err(`Flight ${fi.flight_number} not available on date ${fi.date}`);
        if (d.available_seats.get(cabin)! < passengers.length)
          throw err(`Not enough seats on flight ${fi.flight_number}`);
        const price = d.prices.get(cabin)!;
        res.flights.push({
          flight_number: fi.flight_number,
          origin: f.origin,
          destination: f.destination,
          date: fi.date,
          price,
        });
        taken.push([fi.flight_number, fi.date]);
        total += price * passengers.length;
      }
      if (a.insurance === 'yes') total += 30 * passengers.length;
      total += 50 * (a.nonfree_baggages as number);
      for (const pm of payments) {
        const upm = u.payment_methods.get(pm.payment_id);
        if (!upm) throw err(`Payment method ${pm.payment_id} not found`);
        if ((upm.source === 'gift_card' || upm.source === 'certificate') && upm.amount! < pm.amount) {
          throw err(`Not enough balance in payment method ${pm.payment_id}`);
        }
      }
      const paid = payments.reduce((s, pm) => s + pm.amount, 0);
      if (paid !== total) throw err(`Payment amount does not add up, total price is ${total}, but paid ${paid}`);
      const owner = db.own<UserT>('users', u.user_id);
      for (const pm of payments) {
        const upm = owner.payment_methods.get(pm.payment_id)!;
        if (upm.source === 'gift_card') upm.amount! -= pm.amount;
        else if (upm.source === 'certificate') owner.payment_methods.delete(pm.payment_id);
      }
      for (const [n, date] of taken) {
        const seats = db.own<FlightT>('flights', n).dates.get(date)!.available_seats;
        seats.set(cabin, seats.get(cabin)! - passengers.length);
      }
      db.insert('reservations', id, res);
      owner.reservations.push(id);
      return res;
    },
  },
  CALCULATE_TOOL,
  {
    name: 'cancel_reservation',
    type: 'write',
    returns: Reservation,
    params: p('reservation_id'),
    run(db, a) {
      reservation(db, a.reservation_id);
      const r = db.own<ReservationT>('reservations', a.reservation_id as string);
      const refunds = r.payment_history.map((x) => ({ payment_id: x.payment_id, amount: -x.amount }));
      r.payment_history.push(...refunds);
      r.status = 'cancelled';
      // Upstream does not release the seats of a cancelled reservation ("not implemented").
      return r;
    },
  },
  {
    name: 'get_reservation_details',
    type: 'read',
    returns: Reservation,
    params: p('reservation_id'),
    run: (db, a) => reservation(db, a.reservation_id),
  },
  { name: 'get_user_details', type: 'read', returns: User, params: p('user_id'), run: (db, a) => user(db, a.user_id) },
  {
    name: 'list_all_airports',
    type: 'read',
    returns: list(AirportCode),
    params: [],
    run: () => AIRPORTS.map(([iata, city]) => ({ iata, city })),
  },
  {
    name: 'search_direct_flight',
    type: 'read',
    returns: list(DirectFlight),
    params: p('origin', 'destination', 'date'),
    run: (db, a) => searchDirect(db, a.date, a.origin, a.destination),
  },
  {
    name: 'search_onestop_flight',
    type: 'read',
    returns: list(list(DirectFlight)),
    params: p('origin', 'destination', 'date'),
    run(db, a) {
      const date = a.date as string;
      const out: Obj[][] = [];
      for (const first of searchDirect(db, date, a.origin, null)) {
        first.date = date;
        const arrival = first.scheduled_arrival_time_est as string;
        let date2 = date;
        if (arrival.includes('+1')) {
          const day = date.slice(-2);
          if (!/^\s*[+-]?\d+\s*$/.test(day)) throw err(`invalid literal for int() with base 10: '${day}'`);
          date2 = `2024-05-${Number.parseInt(day, 10) + 1}`;
        }
        for (const second of searchDirect(db, date2, first.destination, a.destination, arrival)) {
          second.date = date2;
          out.push([first, second]);
        }
      }
      return out;
    },
  },
  {
    name: 'send_certificate',
    type: 'write',
    returns: str,
    params: p('user_id', 'amount'),
    run(db, a) {
      const u = user(db, a.user_id);
      const id = NEW_CERTIFICATE_IDS.find((c) => !u.payment_methods.has(c));
      if (!id) throw err('Too many certificates');
      const cert = construct(Certificate, { id, amount: a.amount, source: 'certificate' });
      db.own<UserT>('users', u.user_id).payment_methods.set(id, cert as unknown as PaymentMethodT);
      return `Certificate ${id} added to user ${pyStr(a.user_id)} with amount ${pyStr(a.amount)}.`;
    },
  },
  TRANSFER_TOOL,
  {
    name: 'update_reservation_baggages',
    type: 'write',
    returns: Reservation,
    params: p('reservation_id', 'total_baggages', 'nonfree_baggages', 'payment_id'),
    run(db, a) {
      const r0 = reservation(db, a.reservation_id);
      const u = user(db, r0.user_id);
      const total = 50 * Math.max(0, (a.nonfree_baggages as number) - r0.nonfree_baggages);
      const payment = paymentForUpdate(db, u, a.payment_id, total);
      const r = db.own<ReservationT>('reservations', a.reservation_id as string);
      if (payment) r.payment_history.push(payment as ReservationT['payment_history'][number]);
      r.total_baggages = a.total_baggages;
      r.nonfree_baggages = a.nonfree_baggages as number;
      return r;
    },
  },
  {
    name: 'update_reservation_flights',
    type: 'write',
    returns: Reservation,
    params: p('reservation_id', 'cabin', 'flights', 'payment_id'),
    run(db, a) {
      const flights = asModels(a.flights, FlightInfo) as { flight_number: string; date: string }[];
      reservation(db, a.reservation_id);
      const r = db.own<ReservationT>('reservations', a.reservation_id as string);
      const u = user(db, r.user_id);
      const cabin = a.cabin as string;
      const n = r.passengers.length;
      let total = 0;
      const next: ReservationFlightT[] = [];
      for (const fi of flights) {
        const same = r.flights.find(
          (x) => x.flight_number === fi.flight_number && x.date === fi.date && cabin === r.cabin,
        );
        if (same) {
          total += same.price * n;
          next.push(same);
          continue;
        }
        const f = flight(db, fi.flight_number);
        const d = flightInstance(db, fi.flight_number, fi.date);
        if (d.status !== 'available') throw err(`Flight ${fi.flight_number} not available on date ${fi.date}`);
        if (at(d.available_seats, cabin) < n) throw err(`Not enough seats on flight ${fi.flight_number}`);
        const rf = construct(ReservationFlight, {
          flight_number: fi.flight_number,
          date: fi.date,
          price: at(d.prices, cabin),
          origin: f.origin,
          destination: f.destination,
        }) as ReservationFlightT;
        total += rf.price * n;
        next.push(rf);
      }
      total -= r.flights.reduce((s, x) => s + x.price, 0) * n;
      const payment = paymentForUpdate(db, u, a.payment_id, total);
      if (payment) r.payment_history.push(payment as ReservationT['payment_history'][number]);
      r.flights = next;
      r.cabin = cabin;
      // Upstream leaves the flights' seat counts unchanged here too.
      return r;
    },
  },
  {
    name: 'update_reservation_passengers',
    type: 'write',
    returns: Reservation,
    params: p('reservation_id', 'passengers'),
    run(db, a) {
      const passengers = asModels(a.passengers, Passenger);
      const r0 = reservation(db, a.reservation_id);
      if (passengers.length !== r0.passengers.length) throw err('Number of passengers does not match');
      const r = db.own<ReservationT>('reservations', a.reservation_id as string);
      r.passengers = structuredClone(passengers);
      return r;
    },
  },
  {
    name: 'get_flight_status',
    type: 'read',
    returns: str,
    params: p('flight_number', 'date'),
    run: (db, a) => flightInstance(db, a.flight_number, a.date).status,
  },
];
