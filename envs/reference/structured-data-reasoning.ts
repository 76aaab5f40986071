import {
  defineEnvironment,
  airlineTools,
  airlineUser,
  AIRLINE_POLICY,
  call,
  say,
  communicated,
  statesMatch,
  dbThenCommunication,
  type AirlineDb,
  type AgentAction,
  type Cabin,
} from '#env-sdk';

/**
 * Structured data reasoning (paper K.1): aggregate over records returned by lookups, then act on
 * the one the aggregate picks out. Reward 1.0 when the DB and the communicated total match, 0.3
 * when only the DB matches. Failure modes that score low: summing cancelled reservations or all
 * cabins (wrong total → 0.3), cancelling the wrong reservation (0), answering from the user's
 * message alone or stopping (0).
 */
type Inst = {
  initialState: AirlineDb;
  userGoal: string;
  gold: AgentAction[];
  expect: { total: number; cancel: string };
};
const LABEL: Record<Cabin, string> = { basic_economy: 'basic economy', economy: 'economy', business: 'business' };

export default defineEnvironment<AirlineDb, Inst>({
  metadata: {
    name: 'airline-spend-audit',
    capability: 'structured_data_reasoning',
    targetEnv: 'tau2-airline',
    transferRationale:
      'τ² airline tasks hinge on reading several reservation records, filtering by cabin and status and computing totals before acting; this isolates that with the same lookup tools and JSON shapes.',
    description:
      'A user asks what they paid in total for their active reservations of one cabin and to cancel the most expensive of them.',
  },
  systemPrompt: AIRLINE_POLICY,
  tools: [
    airlineTools.get_user_details,
    airlineTools.get_reservation_details,
    airlineTools.calculate,
    airlineTools.cancel_reservation,
  ],
  generate(seed, rng) {
    const cabin = rng.pick(['basic_economy', 'economy', 'business'] as const);
    const others = (['basic_economy', 'economy', 'business'] as const).filter((c) => c !== cabin);
    const n = rng.int(4, 6);
    const cabins: Cabin[] = rng.shuffle([
      cabin,
      cabin,
      cabin,
      ...Array.from({ length: n - 3 }, () => rng.pick(others)),
    ]);
    const db = airlineUser(rng, { reservations: n, cabins });
    const user = Object.values(db.users)[0];
    const mine = user.reservations.map((id) => db.reservations[id]).filter((r) => r.cabin === cabin);
    // One same-cabin reservation is already cancelled (refunded): it must not count.
    const gone = mine[rng.int(0, mine.length - 1)];
    gone.payment_history.push(...gone.payment_history.map((p) => ({ payment_id: p.payment_id, amount: -p.amount })));
    gone.status = 'cancelled';
    const active = mine.filter((r) => r.status !== 'cancelled');
    const paid = (id: string) => db.reservations[id].payment_history.reduce((s, p) => s + p.amount, 0);
    if (paid(active[0].reservation_id) === paid(active[1].reservation_id)) active[0].payment_history[0].amount += 7;
    const total = active.reduce((s, r) => s + paid(r.reservation_id), 0);
    const top = [...active].sort((a, b) => paid(b.reservation_id) - paid(a.reservation_id))[0].reservation_id;
    return {
      initialState: db,
      userGoal: `Hi, I'm ${user.name.first_name} (user id ${user.user_id}). How much have I paid in total for my ${LABEL[cabin]} reservations that are still active? After that, please cancel the most expensive of those — yes, I confirm the cancellation.`,
      gold: [
        call('get_user_details', { user_id: user.user_id }),
        ...user.reservations.map((id) => call('get_reservation_details', { reservation_id: id })),
        call('cancel_reservation', { reservation_id: top }),
        say(
          `You paid ${total} in total for your active ${LABEL[cabin]} reservations. I cancelled ${top}, the most expensive one.`,
        ),
      ],
      expect: { total, cancel: top },
    };
  },
  evaluate: ({ state, goldState, messages, instance }) => {
    const comm = communicated(messages, [instance.expect.total]);
    return dbThenCommunication(statesMatch(state, goldState), comm.ok, 0.3, { missing: comm.missing });
  },
});
