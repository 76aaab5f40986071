import {
  defineEnvironment,
  airlineTools,
  airlineUser,
  AIRLINE_POLICY,
  call,
  say,
  statesMatch,
  calledWith,
  type AirlineDb,
  type AgentAction,
  type Passenger,
} from '#env-sdk';

/**
 * Tool-calling precision: the request is clear, the skill is turning it into exactly right
 * arguments — ids looked up from the profile, counts computed from the current record, dates
 * reformatted to YYYY-MM-DD, untouched list items kept in order. Reward 1.0 only when the DB
 * matches the gold DB. Failure modes that score 0: wrong payment id, absolute instead of updated
 * bag counts, dates in the user's format, dropping or reordering other passengers, no tool calls.
 */
type Inst = {
  initialState: AirlineDb;
  userGoal: string;
  gold: AgentAction[];
  expect: { tool: string; args: Record<string, unknown> };
};
const MONTHS = [
  'January',
  'February',
  'March',
  'April',
  'May',
  'June',
  'July',
  'August',
  'September',
  'October',
  'November',
  'December',
];

export default defineEnvironment<AirlineDb, Inst>({
  metadata: {
    name: 'airline-precise-updates',
    capability: 'tool_calling_precision',
    targetEnv: 'tau2-airline',
    transferRationale:
      'Most τ² airline failures after the right decision are malformed or imprecise write calls; this trains building exact ids, counts, dates and full passenger lists for the same update tools.',
    description:
      'A user asks for one reservation update (passenger correction or paid bags) whose arguments must be derived exactly.',
  },
  systemPrompt: AIRLINE_POLICY,
  tools: [
    airlineTools.get_user_details,
    airlineTools.get_reservation_details,
    airlineTools.update_reservation_passengers,
    airlineTools.update_reservation_baggages,
    airlineTools.calculate,
  ],
  generate(seed, rng) {
    const db = airlineUser(rng, { reservations: rng.int(2, 3) });
    const user = Object.values(db.users)[0];
    const r = db.reservations[rng.pick(user.reservations)];
    const hello = `Hi, my user id is ${user.user_id}.`;
    if (rng.bool()) {
      const gift = Object.values(user.payment_methods).find((p) => p.source === 'gift_card')!;
      gift.amount = Math.max(gift.amount ?? 0, 300);
      const add = rng.int(1, 3);
      const args = {
        reservation_id: r.reservation_id,
        total_baggages: r.total_baggages + add,
        nonfree_baggages: r.nonfree_baggages + add,
        payment_id: gift.id,
      };
      return {
        initialState: db,
        userGoal: `${hello} Please add ${add} more checked bag${add > 1 ? 's' : ''} to reservation ${r.reservation_id}. I know they are all paid bags — charge them to my gift card. Yes, go ahead.`,
        gold: [
          call('get_user_details', { user_id: user.user_id }),
          call('get_reservation_details', { reservation_id: r.reservation_id }),
          call('update_reservation_baggages', args),
          say(`Done: reservation ${r.reservation_id} now has ${args.total_baggages} bags.`),
        ],
        expect: { tool: 'update_reservation_baggages', args },
      };
    }
    const i = rng.int(0, r.passengers.length - 1);
    const y = rng.int(1950, 2010),
      m = rng.int(1, 12),
      d = rng.int(1, 28);
    const fixed: Passenger = {
      first_name: rng.pick(['Ana', 'Jon', 'Kai', 'Lea', 'Max', 'Ivy', 'Eli', 'Zoe']),
      last_name: r.passengers[i].last_name,
      dob: `${y}-${String(m).padStart(2, '0')}-${String(d).padStart(2, '0')}`,
    };
    const passengers = r.passengers.map((p, k) => (k === i ? fixed : p));
    const args = { reservation_id: r.reservation_id, passengers };
    return {
      initialState: db,
      userGoal: `${hello} On reservation ${r.reservation_id}, passenger ${r.passengers[i].first_name} ${r.passengers[i].last_name} was entered wrong: it should be ${fixed.first_name} ${fixed.last_name}, born ${MONTHS[m - 1]} ${d}, ${y}. Everyone else stays as is. Please fix it — yes, I confirm.`,
      gold: [
        call('get_reservation_details', { reservation_id: r.reservation_id }),
        call('update_reservation_passengers', args),
        say(`Updated passenger ${fixed.first_name} ${fixed.last_name} on ${r.reservation_id}.`),
      ],
      expect: { tool: 'update_reservation_passengers', args },
    };
  },
  evaluate: ({ state, goldState, calls, instance }) => {
    const db = statesMatch(state, goldState);
    return {
      reward: db ? 1 : 0,
      components: { DB: db ? 1 : 0 },
      details: { exactCall: calledWith(calls, instance.expect.tool, instance.expect.args) },
    };
  },
});
