/**
 * The stdio framing shared by the worker (process.ts) and the child runner (child.ts): the worker
 * writes a session key as the first stdin line; every response line is `<HMAC-SHA256 hex> <JSON>`,
 * and every request line `<HMAC-SHA256 hex of "request " + JSON> <JSON>`.
 */

/** Bytes of the session key (sent as hex). */
export const SESSION_KEY_BYTES = 32;
/** Hex characters of a line's MAC. */
export const MAC_HEX = 64;

/** The one instant every clock inside the sandbox shows (2025-01-01T00:00:00Z; see child.ts freezeClocks). */
export const FROZEN_EPOCH_MS = Date.UTC(2025, 0, 1);
