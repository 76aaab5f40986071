import {
  defineEnvironment,
  deskHotel,
  deskTools,
  DESK_CODE_ALPHABET,
  DESK_POLICY,
  gen,
  call,
  statesMatch,
  type AgentAction,
  type DeskDb,
} from '#env-sdk';

/**
 * Exact id copying (showcase-desk): the guest names a booking by its code; the agent must call
 * cancel_booking with that code copied character for character, not look it up by name, invent a
 * placeholder ("12345") or answer in prose. Codes vary in length and alphabet, and the message may
 * carry a distracting number (the room). Reward 1.0 when exactly that booking is cancelled; 0.3
 * when cancel_booking got a near copy (≤ 2 edits: "P2P6X" for "PE2P6X", "329" for "HQ329"), so
 * groups rank closer copies higher; else 0. Failure modes: a placeholder code (0), find_booking
 * with the code as a name (0), a message instead of the call (0), max_steps (0).
 */
type Inst = {
  initialState: DeskDb;
  userGoal: string;
  userTurns: string[];
  gold: AgentAction[];
  expect: { code: string };
};

const LETTERS = 'ABCDEFGHJKLMNPQRSTUVWXYZ';

/** Levenshtein distance: how far a copied code is from the real one. */
function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++)
      cur[j] = Math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = cur;
  }
  return prev[b.length];
}
// The target's phrasings, plus one with a distracting number (the room).
const TARGET_ASKS = [
  (c: string) => `Please cancel booking ${c}.`,
  (c: string) => `Cancel my booking ${c}, thanks.`,
  (c: string) => `Hi, booking ${c} needs to be cancelled.`,
  (c: string, n: number) => `Please cancel booking ${c} for room ${100 + n * 7}.`,
];
// Calibration: the code named as a booking code, the phrasing SmolLM2 copies from most often; half
// the requests, so the base policy's mean reward sits inside the band, not at its lower edge.
const NAMED_ASKS = [
  (c: string) => `My booking code is ${c}. Please cancel it.`,
  (c: string) => `My booking code is ${c}. Cancel booking ${c}, please.`,
];

export default defineEnvironment<DeskDb, Inst>({
  metadata: {
    name: 'desk-cancel-by-code',
    capability: 'exact_id_copying',
    targetEnv: 'showcase-desk',
    transferRationale:
      'Half of showcase-desk tasks give the booking code in the message; the base policy there invents placeholder codes or looks the code up as a name. This drills copying the given code verbatim into cancel_booking with the same tools.',
    description: 'A guest asks to cancel a booking by its code; the code must be copied exactly into cancel_booking.',
  },
  systemPrompt: DESK_POLICY,
  // The target's tools, unchanged (cancel_booking ends the episode there too).
  tools: [deskTools.find_booking, deskTools.cancel_booking],
  maxSteps: 4,
  generate(_seed, rng) {
    // The target's 5-character codes and other shapes, so copying is not one memorised pattern.
    const hotel = deskHotel(rng, rng.int(3, 5), (r) =>
      r.pick([
        () => r.string(5, DESK_CODE_ALPHABET),
        () => r.string(4, DESK_CODE_ALPHABET),
        () => `${r.string(2, LETTERS)}${gen.id(r, '', 3)}`,
        () => r.string(6, DESK_CODE_ALPHABET),
      ])(),
    );
    const code = rng.pick(Object.keys(hotel.bookings));
    return {
      initialState: hotel,
      userGoal: rng.pick(rng.bool(0.5) ? NAMED_ASKS : TARGET_ASKS)(code, rng.int(1, 9)),
      // As in the target: the guest answers the agent's first message with a confirmation.
      userTurns: ['Yes, please cancel it.'],
      gold: [call('cancel_booking', { booking_code: code })],
      expect: { code },
    };
  },
  evaluate: ({ state, goldState, calls, instance }) => {
    const db = statesMatch(state, goldState);
    const near = calls.some(
      (c) =>
        c.name === 'cancel_booking' &&
        typeof c.args?.booking_code === 'string' &&
        editDistance(c.args.booking_code, instance.expect.code) <= 2,
    );
    return { reward: db ? 1 : near ? 0.3 : 0, components: { DB: db ? 1 : 0, NEAR_COPY: near ? 1 : 0 } };
  },
});
