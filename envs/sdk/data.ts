import type { Rng } from './rng.js';

/** Realistic-looking data drawn from an `Rng`: names, ids, dates, prices and nested records. */
const FIRST = [
  'Olivia',
  'Liam',
  'Emma',
  'Noah',
  'Ava',
  'Mei',
  'Raj',
  'Sofia',
  'Mateo',
  'Amara',
  'Yusuf',
  'Chloe',
  'Ivan',
  'Lena',
  'Kenji',
  'Fatima',
  'Omar',
  'Isabella',
  'Lucas',
  'Aisha',
  'Ethan',
  'Mia',
  'James',
  'Harper',
  'Daniel',
  'Zoe',
  'Anya',
  'Diego',
  'Nora',
  'Samuel',
];
const LAST = [
  'Smith',
  'Garcia',
  'Nguyen',
  'Patel',
  'Kim',
  'Muller',
  'Rossi',
  'Silva',
  'Khan',
  'Johnson',
  'Lopez',
  'Brown',
  'Ito',
  'Novak',
  'Ahmed',
  'Wilson',
  'Martin',
  'Lee',
  'Davis',
  'Hernandez',
  'Clark',
  'Lewis',
  'Walker',
  'Young',
  'Hall',
  'Allen',
  'Wright',
  'Scott',
  'Green',
  'Baker',
];
const CITIES = [
  'Boston',
  'Chicago',
  'Denver',
  'Seattle',
  'Miami',
  'Austin',
  'Phoenix',
  'Atlanta',
  'Portland',
  'Dallas',
  'Houston',
  'Detroit',
  'Newark',
  'Orlando',
  'Philadelphia',
];
const STREETS = ['Maple', 'Oak', 'Pine', 'Cedar', 'Elm', 'Lake', 'Hill', 'Main', 'Park', 'River'];
export const AIRPORTS = [
  { code: 'BOS', city: 'Boston' },
  { code: 'ORD', city: 'Chicago' },
  { code: 'DEN', city: 'Denver' },
  { code: 'SEA', city: 'Seattle' },
  { code: 'MIA', city: 'Miami' },
  { code: 'AUS', city: 'Austin' },
  { code: 'PHX', city: 'Phoenix' },
  { code: 'ATL', city: 'Atlanta' },
  { code: 'JFK', city: 'New York' },
  { code: 'LAX', city: 'Los Angeles' },
  { code: 'SFO', city: 'San Francisco' },
  { code: 'DFW', city: 'Dallas' },
  { code: 'IAH', city: 'Houston' },
  { code: 'DTW', city: 'Detroit' },
  { code: 'EWR', city: 'Newark' },
  { code: 'MCO', city: 'Orlando' },
  { code: 'PHL', city: 'Philadelphia' },
  { code: 'LAS', city: 'Las Vegas' },
] as const;
const WORDS = [
  'report',
  'dentist',
  'groceries',
  'invoice',
  'gym',
  'call mom',
  'water plants',
  'team sync',
  'pay rent',
  'pick up kids',
  'book review',
  'car service',
];

export interface Person {
  first_name: string;
  last_name: string;
}

export const gen = {
  firstName: (rng: Rng) => rng.pick(FIRST),
  lastName: (rng: Rng) => rng.pick(LAST),
  person: (rng: Rng): Person => ({ first_name: rng.pick(FIRST), last_name: rng.pick(LAST) }),
  city: (rng: Rng) => rng.pick(CITIES),
  airport: (rng: Rng) => rng.pick(AIRPORTS),
  address: (rng: Rng) => ({
    address1: `${rng.int(1, 999)} ${rng.pick(STREETS)} Street`,
    city: rng.pick(CITIES),
    zip: String(rng.int(10000, 99999)),
  }),
  email: (rng: Rng, p: Person) => `${p.first_name}.${p.last_name}${rng.int(1, 99)}@example.com`.toLowerCase(),
  phone: (rng: Rng) => `+1-${rng.int(200, 989)}-${rng.int(200, 989)}-${String(rng.int(0, 9999)).padStart(4, '0')}`,
  /** τ²-style user id, e.g. `mia_kim_4821`. */
  userId: (rng: Rng, p: Person) => `${p.first_name}_${p.last_name}_${rng.int(1000, 9999)}`.toLowerCase(),
  /** A 6-character reservation/record locator, e.g. `K3X9QZ`. */
  locator: (rng: Rng) => rng.string(6, 'ABCDEFGHJKLMNPQRSTUVWXYZ23456789'),
  /** A prefixed id, e.g. gen.id(rng, 'credit_card_') → `credit_card_4829174`. */
  id: (rng: Rng, prefix: string, digits = 7) => `${prefix}${rng.string(digits, '0123456789')}`,
  flightNumber: (rng: Rng) => `HAT${String(rng.int(1, 999)).padStart(3, '0')}`,
  /** Price with cents, in [min, max]. */
  price: (rng: Rng, min: number, max: number) => rng.float(min, max, 2),
  /** Calendar date `YYYY-MM-DD` between two dates (inclusive), computed in UTC. */
  date: (rng: Rng, from: string, to: string) => {
    const a = Date.parse(`${from}T00:00:00Z`);
    const b = Date.parse(`${to}T00:00:00Z`);
    if (!(b >= a)) throw new RangeError(`gen.date: bad range ${from}..${to}`);
    return new Date(a + rng.int(0, Math.round((b - a) / 86_400_000)) * 86_400_000).toISOString().slice(0, 10);
  },
  /** ISO timestamp `YYYY-MM-DDTHH:MM:00` on a given date, minutes rounded to `stepMinutes`. */
  dateTime: (rng: Rng, date: string, stepMinutes = 15) => {
    const m = rng.int(0, Math.floor((24 * 60) / stepMinutes) - 1) * stepMinutes;
    return `${date}T${String(Math.floor(m / 60)).padStart(2, '0')}:${String(m % 60).padStart(2, '0')}:00`;
  },
  task: (rng: Rng) => rng.pick(WORDS),
  /** `n` records from a factory, e.g. gen.list(rng, 3, (r, i) => ({ id: i, price: gen.price(r, 5, 50) })). */
  list: <T>(rng: Rng, n: number, make: (rng: Rng, index: number) => T): T[] =>
    Array.from({ length: n }, (_, i) => make(rng, i)),
};

/** Adds whole days to a `YYYY-MM-DD` date (UTC). */
/** A Unix timestamp's UTC calendar fields, as Python's datetime names them (isoweekday: Monday 1 … Sunday 7). */
export function utcFields(seconds: number) {
  const d = new Date(seconds * 1000);
  return {
    year: d.getUTCFullYear(),
    month: d.getUTCMonth() + 1,
    day: d.getUTCDate(),
    hour: d.getUTCHours(),
    minute: d.getUTCMinutes(),
    second: d.getUTCSeconds(),
    isoweekday: d.getUTCDay() || 7,
  };
}

export function addDays(date: string, days: number): string {
  return new Date(Date.parse(`${date}T00:00:00Z`) + days * 86_400_000).toISOString().slice(0, 10);
}
