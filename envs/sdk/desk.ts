import { gen } from './data.js';
import type { Rng } from './rng.js';
import { defineTool, ToolError } from './tools.js';

/**
 * The showcase-desk shapes (envs/showcase/desk.ts): a hotel's bookings keyed by booking code,
 * `find_booking(guest)` and `cancel_booking(booking_code)`, which ends the episode when it
 * succeeds. Environments targeting showcase-desk build their state with `deskHotel` and use
 * `deskTools` and `DESK_POLICY` unchanged.
 */
export interface DeskDb {
  bookings: Record<string, { guest: string; status: 'booked' | 'cancelled' }>;
}

// Directive on purpose: with a neutral "use the tools to help guests" the 135M model mostly
// answers in prose (measured: base 5/24 on the test split, failures spread over chatting).
export const DESK_POLICY =
  'You are the front desk of a hotel. Cancel bookings for guests with the tools. A cancellation needs the booking code; if the guest gives only a name, find the code with find_booking first.';

export const DESK_CODE_ALPHABET = 'ABCDEFGHJKLMNPQRSTUVWXYZ23456789';

export const deskTools = {
  find_booking: defineTool<DeskDb, { guest: string }>({
    name: 'find_booking',
    description: "Look up a guest's booking code by the guest's full name.",
    parameters: {
      type: 'object',
      properties: { guest: { type: 'string' } },
      required: ['guest'],
      additionalProperties: false,
    },
    run: ({ guest }, { state }) => {
      const hit = Object.entries(state.bookings).find(([, b]) => b.guest.toLowerCase() === guest.trim().toLowerCase());
      if (!hit) throw new ToolError(`no booking for guest '${guest}'`);
      return { guest: hit[1].guest, booking_code: hit[0] };
    },
  }),
  cancel_booking: defineTool<DeskDb, { booking_code: string }>({
    name: 'cancel_booking',
    description: 'Cancel a booking by its booking code.',
    parameters: {
      type: 'object',
      properties: { booking_code: { type: 'string' } },
      required: ['booking_code'],
      additionalProperties: false,
    },
    endsEpisode: true,
    run: ({ booking_code }, { state }) => {
      const b = state.bookings[booking_code];
      if (!b) throw new ToolError(`no booking with code '${booking_code}'`);
      if (b.status === 'cancelled') throw new ToolError(`booking ${booking_code} is already cancelled`);
      b.status = 'cancelled';
      return { booking_code, status: 'cancelled' };
    },
  }),
};

/** A hotel with `guests` distinct guests, one booking each; `code` draws a booking code (default 5 characters). */
export function deskHotel(
  rng: Rng,
  guests: number,
  code: (rng: Rng) => string = (r) => r.string(5, DESK_CODE_ALPHABET),
): DeskDb {
  const names = new Set<string>();
  while (names.size < guests) names.add(`${gen.firstName(rng)} ${gen.lastName(rng)}`);
  const bookings: DeskDb['bookings'] = {};
  for (const guest of names) {
    let c: string;
    do c = code(rng);
    while (bookings[c]);
    bookings[c] = { guest, status: 'booked' };
  }
  return { bookings };
}
