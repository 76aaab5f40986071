import {
  defineEnvironment,
  airlineTools,
  airlineUser,
  AIRLINE_POLICY,
  call,
  say,
  statesMatch,
  stableHash,
  type AirlineDb,
  type AgentAction,
} from '#env-sdk';

/**
 * Multi-step task completion: a user with several requests, revealed one per turn ("also…"), each
 * on a different reservation. The agent must finish every one and not stop after the first.
 * Reward: 1.0 when the final DB equals the gold DB; otherwise 0.8 × (share of requests whose
 * reservation ends exactly as in gold). Failure modes: ending after the first request (≈0.27),
 * skipping the lookup that a bag or passenger update needs (wrong counts → partial), stopping (0).
 */
type Task = { kind: 'cancel' | 'bags' | 'dob'; reservation_id: string };
type Inst = {
  initialState: AirlineDb;
  userGoal: string;
  userTurns: string[];
  gold: AgentAction[];
  expect: { tasks: Task[] };
};

export default defineEnvironment<AirlineDb, Inst>({
  metadata: {
    name: 'airline-request-queue',
    capability: 'multi_step_task_completion',
    targetEnv: 'tau2-airline',
    transferRationale:
      'τ² airline users often bundle several changes; agents that handle the first and end the conversation fail the task. This trains carrying every request to completion with the same tools.',
    description:
      'A user asks for a cancellation, a bag addition and a date-of-birth correction, one after another, on different reservations.',
  },
  systemPrompt: AIRLINE_POLICY,
  tools: [
    airlineTools.get_user_details,
    airlineTools.get_reservation_details,
    airlineTools.cancel_reservation,
    airlineTools.update_reservation_baggages,
    airlineTools.update_reservation_passengers,
  ],
  generate(seed, rng) {
    const db = airlineUser(rng, { reservations: 4 });
    const user = Object.values(db.users)[0];
    const card = Object.values(user.payment_methods).find((p) => p.source === 'credit_card')!.id;
    const kinds = rng.sample(['cancel', 'bags', 'dob'] as const, rng.int(2, 3));
    const ids = rng.sample(user.reservations, kinds.length);
    const tasks: Task[] = kinds.map((kind, i) => ({ kind, reservation_id: ids[i] }));
    const asks: string[] = [];
    const gold: AgentAction[] = [];
    for (const t of tasks) {
      const r = db.reservations[t.reservation_id];
      gold.push(call('get_reservation_details', { reservation_id: r.reservation_id }));
      if (t.kind === 'cancel') {
        asks.push(`please cancel reservation ${r.reservation_id} (I confirm)`);
        gold.push(call('cancel_reservation', { reservation_id: r.reservation_id }));
      } else if (t.kind === 'bags') {
        const add = rng.int(1, 2);
        asks.push(
          `please add ${add} paid checked bag${add > 1 ? 's' : ''} to reservation ${r.reservation_id}, charged to my credit card (I confirm)`,
        );
        gold.push(
          call('update_reservation_baggages', {
            reservation_id: r.reservation_id,
            total_baggages: r.total_baggages + add,
            nonfree_baggages: r.nonfree_baggages + add,
            payment_id: card,
          }),
        );
      } else {
        const dob = `${rng.int(1950, 2004)}-0${rng.int(1, 9)}-1${rng.int(0, 9)}`;
        asks.push(
          `on reservation ${r.reservation_id}, ${r.passengers[0].first_name}'s date of birth should be ${dob} (I confirm)`,
        );
        gold.push(
          call('update_reservation_passengers', {
            reservation_id: r.reservation_id,
            passengers: r.passengers.map((p, k) => (k === 0 ? { ...p, dob } : p)),
          }),
        );
      }
      gold.push(say('Done. Anything else?'));
    }
    return {
      initialState: db,
      userGoal: `Hi, I'm ${user.user_id}. First, ${asks[0]}.`,
      userTurns: asks.slice(1).map((a) => `Thanks. Also, ${a}.`),
      gold,
      expect: { tasks },
    };
  },
  evaluate: ({ state, goldState, instance }) => {
    if (statesMatch(state, goldState)) return { reward: 1, components: { DB: 1, tasks: 1 } };
    const done = instance.expect.tasks.filter(
      (t) => stableHash(state.reservations[t.reservation_id]) === stableHash(goldState.reservations[t.reservation_id]),
    ).length;
    const share = done / instance.expect.tasks.length;
    return { reward: Math.round(0.8 * share * 1e6) / 1e6, components: { DB: 0, tasks: share } };
  },
});
