import {
  defineEnvironment,
  airlineTools,
  airlineUser,
  AIRLINE_POLICY,
  call,
  say,
  statesMatch,
  calledWith,
  agentText,
  type AirlineDb,
  type AgentAction,
} from '#env-sdk';

/**
 * Precondition verification: before a write, check the record against the policy's conditions.
 * A user asks to cancel a reservation; about half the time the policy allows it (booked in the
 * last 24 h, business cabin, or insured with a covered health reason), otherwise it must be
 * refused. Reward: 0 without looking the reservation up; then 1.0 if the DB matches gold and the
 * outcome is told (cancelled / cannot), 0.5 if only the DB matches. Failure modes: cancelling
 * without checking (0 on forbidden cases), refusing without checking (0), stopping (0).
 */
type Inst = {
  initialState: AirlineDb;
  userGoal: string;
  gold: AgentAction[];
  expect: { reservation_id: string; allowed: boolean };
};
const REFUSAL = /\b(cannot|can't|can not|unable|not able|not eligible|ineligible|not allowed)\b/;

export default defineEnvironment<AirlineDb, Inst>({
  metadata: {
    name: 'airline-cancellation-eligibility',
    capability: 'precondition_verification',
    targetEnv: 'tau2-airline',
    transferRationale:
      'τ² airline rewards agents that verify cabin, booking time and insurance before cancelling and penalises unconditional writes; this isolates that check with the same tools and policy.',
    description:
      'A user asks to cancel a reservation; the agent must check eligibility under the cancellation policy and cancel or refuse.',
  },
  systemPrompt: AIRLINE_POLICY,
  tools: [airlineTools.get_user_details, airlineTools.get_reservation_details, airlineTools.cancel_reservation],
  generate(seed, rng) {
    const db = airlineUser(rng, { reservations: rng.int(1, 3) });
    const user = Object.values(db.users)[0];
    const r = db.reservations[rng.pick(user.reservations)];
    const scenario = rng.pick(['recent', 'business', 'insured_sick', 'denied', 'denied', 'denied_insured'] as const);
    r.cabin = scenario === 'business' ? 'business' : rng.pick(['basic_economy', 'economy'] as const);
    r.created_at =
      scenario === 'recent'
        ? `2024-05-14T${rng.int(16, 23)}:${rng.pick(['05', '20', '45'])}:00`
        : `2024-04-${String(rng.int(1, 30)).padStart(2, '0')}T${rng.int(10, 20)}:00:00`;
    r.insurance =
      scenario === 'insured_sick' || scenario === 'denied_insured' ? 'yes' : scenario === 'denied' ? 'no' : r.insurance;
    const sick = scenario === 'insured_sick' || (scenario !== 'denied_insured' && rng.bool());
    const allowed = scenario !== 'denied' && scenario !== 'denied_insured';
    const reason = sick
      ? 'I got sick and a doctor told me not to travel'
      : rng.pick(['my plans changed', 'I found a cheaper flight', 'the meeting was moved']);
    return {
      initialState: db,
      userGoal: `Hello, user id ${user.user_id}. I want to cancel reservation ${r.reservation_id} because ${reason}. Please go ahead.`,
      gold: [
        call('get_reservation_details', { reservation_id: r.reservation_id }),
        ...(allowed
          ? [
              call('cancel_reservation', { reservation_id: r.reservation_id }),
              say(`Reservation ${r.reservation_id} is cancelled; the refund goes to the original payment method.`),
            ]
          : [say(`I'm sorry, reservation ${r.reservation_id} cannot be cancelled under our policy.`)]),
      ],
      expect: { reservation_id: r.reservation_id, allowed },
    };
  },
  evaluate: ({ state, goldState, calls, messages, instance }) => {
    const checked = calledWith(calls, 'get_reservation_details', { reservation_id: instance.expect.reservation_id });
    const db = statesMatch(state, goldState);
    const text = agentText(messages);
    const told = instance.expect.allowed ? /cancel/.test(text) && !REFUSAL.test(text) : REFUSAL.test(text);
    const reward = !checked || !db ? 0 : told ? 1 : 0.5;
    return { reward, components: { CHECKED: checked ? 1 : 0, DB: db ? 1 : 0, COMMUNICATE: told ? 1 : 0 } };
  },
});
