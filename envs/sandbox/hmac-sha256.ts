/**
 * HMAC-SHA256 in plain JavaScript, for the child runner's protocol lines. Node's `createHmac` runs
 * through JavaScript of Node's own (its `Hmac` prototype, the key's brand checks on the `Buffer`
 * prototype), which the module can patch, and a getter there was handed the session key (red-team
 * rerun 6). This uses only the built-ins, frozen before the module loads (lockdown.ts), Node's UTF-8
 * encoder taken before then, and state of its own. The worker checks the lines with Node's `createHmac` (process.ts); test/sandbox-hmac
 * checks the two agree.
 */

const BLOCK = 64;
// prettier-ignore
const K = Int32Array.of(
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
);
// prettier-ignore
const H0 = Int32Array.of(0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19);
const HEX = '0123456789abcdef';

const ror = (x: number, n: number) => (x >>> n) | (x << (32 - n));

/** SHA-256 of `prefix` (64 bytes) followed by `data`. */
function sha256(prefix: Uint8Array, data: Uint8Array): Uint8Array {
  const len = BLOCK + data.length;
  const padded = new Uint8Array((((len + 8) >> 6) + 1) * BLOCK);
  padded.set(prefix);
  padded.set(data, BLOCK);
  padded[len] = 0x80;
  const bits = padded.length - 8; // the message length in bits, big-endian, in the last 8 bytes
  const hi = Math.floor(len / 2 ** 29);
  const lo = (len * 8) >>> 0;
  for (let i = 0; i < 4; i++) {
    padded[bits + i] = (hi >>> (24 - 8 * i)) & 0xff;
    padded[bits + 4 + i] = (lo >>> (24 - 8 * i)) & 0xff;
  }
  const h = new Int32Array(H0); // not from(): H0's own iterator, which the module can add, ran inside every MAC (rerun 72p)
  const w = new Int32Array(64);
  for (let off = 0; off < padded.length; off += BLOCK) {
    for (let t = 0; t < 16; t++) {
      const p = off + 4 * t;
      w[t] = (padded[p] << 24) | (padded[p + 1] << 16) | (padded[p + 2] << 8) | padded[p + 3];
    }
    for (let t = 16; t < 64; t++) {
      const s0 = ror(w[t - 15], 7) ^ ror(w[t - 15], 18) ^ (w[t - 15] >>> 3);
      const s1 = ror(w[t - 2], 17) ^ ror(w[t - 2], 19) ^ (w[t - 2] >>> 10);
      w[t] = (w[t - 16] + s0 + w[t - 7] + s1) | 0;
    }
    let a = h[0];
    let b = h[1];
    let c = h[2];
    let d = h[3];
    let e = h[4];
    let f = h[5];
    let g = h[6];
    let hh = h[7];
    for (let t = 0; t < 64; t++) {
      const t1 = (hh + (ror(e, 6) ^ ror(e, 11) ^ ror(e, 25)) + ((e & f) ^ (~e & g)) + K[t] + w[t]) | 0;
      const t2 = ((ror(a, 2) ^ ror(a, 13) ^ ror(a, 22)) + ((a & b) ^ (a & c) ^ (b & c))) | 0;
      hh = g;
      g = f;
      f = e;
      e = (d + t1) | 0;
      d = c;
      c = b;
      b = a;
      a = (t1 + t2) | 0;
    }
    h[0] = (h[0] + a) | 0;
    h[1] = (h[1] + b) | 0;
    h[2] = (h[2] + c) | 0;
    h[3] = (h[3] + d) | 0;
    h[4] = (h[4] + e) | 0;
    h[5] = (h[5] + f) | 0;
    h[6] = (h[6] + g) | 0;
    h[7] = (h[7] + hh) | 0;
  }
  const out = new Uint8Array(32);
  for (let i = 0; i < 32; i++) out[i] = (h[i >> 2] >>> (24 - 8 * (i & 3))) & 0xff;
  // The pad and what was computed from it, wiped before their memory is freed (rerun 72c read the
  // key back out of freed memory; the sandbox's node also zero-fills every buffer it hands out).
  padded.fill(0);
  w.fill(0);
  h.fill(0);
  return out;
}

// Node's UTF-8 encoder, taken as this file is evaluated (before the module loads) and called by
// Reflect.apply: `encode` is Node's JavaScript around a native call and reads only its instance's
// own brand. A loop of `charCodeAt` in JavaScript cost ~270 ms per MiB in the sandbox (lockdown.ts
// makes every built-in method a getter), and a 64 MiB answer ran past the request's wall clock
// before the worker could see it exceed `outputBytes` (red-team rerun 10).
const encoder = new TextEncoder();
const encode = TextEncoder.prototype.encode;
const apply = Reflect.apply;

/** UTF-8 bytes of `s`, a lone surrogate as U+FFFD (as Node's own encoder writes it). */
export const utf8 = (s: string): Uint8Array => apply(encode, encoder, [s]);

/** A MAC function for one key (at most 64 bytes) over a message's bytes, returning lowercase hex. */
export function hmacSha256(key: Uint8Array): (message: Uint8Array) => string {
  const inner = new Uint8Array(BLOCK);
  const outer = new Uint8Array(BLOCK);
  for (let i = 0; i < BLOCK; i++) {
    const k = i < key.length ? key[i] : 0;
    inner[i] = k ^ 0x36;
    outer[i] = k ^ 0x5c;
  }
  return (message) => {
    const mac = sha256(outer, sha256(inner, message));
    let hex = '';
    for (let i = 0; i < mac.length; i++) hex += HEX[mac[i] >> 4] + HEX[mac[i] & 15];
    return hex;
  };
}
