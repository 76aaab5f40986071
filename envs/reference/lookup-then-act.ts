import { defineEnvironment, deskHotel, deskTools, DESK_POLICY, call, say, statesMatch, calledWith, type AgentAction, type DeskDb } from '#env-sdk';

/**
 * Lookup then act (showcase-desk): the guest gives only a name; the agent must call find_booking
 * with that full name, then cancel_booking with the code the lookup returned. 70% of requests are
 * scaffolded — "Find the booking for X." first, the cancellation in the guest's next turn — since
 * the base 135M policy almost never looks anything up when the first message says "cancel"; the
 * rest are the target's one-line requests. Reward 1.0 when exactly that booking is cancelled; 0.5
 * when only the lookup was right (the first step, which the target's failures lack); else 0.
 * Failure modes: cancelling with an invented code (0), a lookup under a mangled name (0),
 * stopping after the lookup or cancelling another booking (0.5; 0 when the episode runs out of its
 * 4 actions), a message instead (0).
 */
type Inst = { initialState: DeskDb; userGoal: string; userTurns: string[]; gold: AgentAction[]; expect: { guest: string; code: string } };

// Scaffolded requests ask for the lookup ("find" matches the tool's name, which is what moves a
// tiny model) and ask to cancel in the next turn; the others are the target's phrasing, answered
// like the target (one confirmation).
const EXPLICIT = [
  (n: string) => `Find the booking for ${n}.`,
  (n: string) => `Find the booking of ${n}.`,
];
const IMPLICIT = [
  (n: string) => `Please cancel the booking for ${n}.`,
  (n: string) => `Hi, I'm ${n}. Cancel my booking, please.`,
  (n: string) => `Cancel ${n}'s booking, thanks.`,
];

export default defineEnvironment<DeskDb, Inst>({
  metadata: {
    name: 'desk-cancel-by-name',
    capability: 'lookup_then_act',
    targetEnv: 'showcase-desk',
    transferRationale: 'Half of showcase-desk tasks name only the guest; the base policy there calls cancel_booking at once with an invented code. This drills the find_booking → cancel_booking sequence, using the looked-up code, with the same tools.',
    description: 'A guest asks to cancel a booking by guest name; the agent must look the code up, then cancel with it.',
  },
  systemPrompt: DESK_POLICY,
  // The target's tools, unchanged (cancel_booking ends the episode there too).
  tools: [deskTools.find_booking, deskTools.cancel_booking],
  maxSteps: 4,
  generate(_seed, rng) {
    const hotel = deskHotel(rng, rng.int(3, 5));
    const [code, { guest }] = rng.pick(Object.entries(hotel.bookings));
    const explicit = rng.bool(0.7);
    return {
      initialState: hotel,
      userGoal: rng.pick(explicit ? EXPLICIT : IMPLICIT)(guest),
      userTurns: [explicit ? 'Thanks. Please cancel that booking.' : 'Yes, please cancel it.'],
      gold: explicit
        ? [call('find_booking', { guest }), say(`Your booking code is ${code}.`), call('cancel_booking', { booking_code: code })]
        : [call('find_booking', { guest }), call('cancel_booking', { booking_code: code })],
      expect: { guest, code },
    };
  },
  evaluate: ({ state, goldState, messages, calls, instance }) => {
    const db = statesMatch(state, goldState);
    // The lookup counts only when its result (the code) reached the transcript.
    const found = calledWith(calls, 'find_booking', {}) && messages.some((m) => m.role === 'tool' && m.content.includes(`"booking_code":"${instance.expect.code}"`));
    return { reward: db ? 1 : found ? 0.5 : 0, components: { DB: db ? 1 : 0, LOOKUP: found ? 1 : 0 } };
  },
});
