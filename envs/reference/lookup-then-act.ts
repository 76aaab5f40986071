import {
  defineEnvironment,
  deskHotel,
  deskTools,
  DESK_POLICY,
  call,
  statesMatch,
  type AgentAction,
  type DeskDb,
} from '#env-sdk';

/**
 * Lookup then act (showcase-desk), its second step: the guest gives only a name, and the episode
 * opens after the lookup (`prefix`: the agent's find_booking call for that name and its real
 * result). The agent must cancel with the code the lookup returned, not repeat the lookup, invent
 * a code or answer in prose. Reward 1.0 when exactly that booking is cancelled, else 0.
 *
 * Why only the second step: with both steps to do, the base 135M policy almost never completes the
 * sequence (trainer's sampler, 8 groups × 4: 0 of 32 at T = 0.5 and at 1.0, also with requests
 * that name both tools; 3 of 32 with a quarter of the episodes opened at the lookup), and GRPO
 * cannot learn from groups whose rewards are all 0. Opened after the lookup: 6 of 32 at T = 0.5
 * (mean 0.19, 62% informative groups) and 5 of 32 at T = 1.0. On the embedded server, which the
 * calibration check samples, at T 0.5: mean 0.30 (24 seeds × 4) and 0.22 (12 × 8) with
 * bench/showcase-base-rate.ts, and 0.188 (8 × 8) in run demo-20261201-204740-mzwm — at the band's
 * lower edge, so calibration fails about as often as it passes. (Half the requests naming the step
 * after the lookup did not move it: 0.28 on 8 × 8 in the bench, 0.17 on 6 seeds × 8 in that run.)
 * The trainer's own served policy, now decoding as the embedded server does: 0.219 (8 × 8).
 * Half the failures answer in prose after the lookup, and the guest confirmed once and left; a
 * second confirmation gives the policy the chance to act on it: 0.438 (8 × 8, every group
 * informative, seeds 0.25–0.625) on the embedded server. The first step (looking up at all) is not
 * trained here.
 */
type Inst = {
  initialState: DeskDb;
  userGoal: string;
  userTurns: string[];
  prefix: AgentAction[];
  gold: AgentAction[];
  expect: { guest: string; code: string };
};

// The target's by-name requests; the guest confirms twice (the target's confirmation, then once more).
const ASKS = [
  (n: string) => `Please cancel the booking for ${n}.`,
  (n: string) => `Hi, I'm ${n}. Cancel my booking, please.`,
  (n: string) => `Cancel ${n}'s booking, thanks.`,
];

export default defineEnvironment<DeskDb, Inst>({
  metadata: {
    name: 'desk-cancel-by-name',
    capability: 'lookup_then_act',
    targetEnv: 'showcase-desk',
    transferRationale:
      'Half of showcase-desk tasks name only the guest; the base policy there calls cancel_booking at once with an invented code, or repeats the lookup. This drills the find_booking → cancel_booking sequence, using the looked-up code, with the same tools.',
    description:
      'A guest asks to cancel a booking by guest name; the agent must look the code up, then cancel with it.',
  },
  systemPrompt: DESK_POLICY,
  // The target's tools, unchanged (cancel_booking ends the episode there too).
  tools: [deskTools.find_booking, deskTools.cancel_booking],
  maxSteps: 4,
  generate(_seed, rng) {
    const hotel = deskHotel(rng, rng.int(3, 5));
    const [code, { guest }] = rng.pick(Object.entries(hotel.bookings));
    return {
      initialState: hotel,
      userGoal: rng.pick(ASKS)(guest),
      userTurns: ['Yes, please cancel it.', 'Yes, go ahead and cancel it.'],
      prefix: [call('find_booking', { guest })],
      gold: [call('cancel_booking', { booking_code: code })],
      expect: { guest, code },
    };
  },
  evaluate: ({ state, goldState }) => {
    const db = statesMatch(state, goldState);
    return { reward: db ? 1 : 0, components: { DB: db ? 1 : 0 } };
  },
});
