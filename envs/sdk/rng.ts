/**
 * Seeded randomness: every choice an environment makes must come from an `Rng` built from the
 * episode seed, so the same seed always yields the same instance (validation check 2).
 */
export class Rng {
  private s: number;

  constructor(seed: number | string) {
    this.s = hashSeed(String(seed));
  }

  /** Uniform float in [0, 1) (mulberry32). */
  next(): number {
    this.s = (this.s + 0x6d2b79f5) | 0;
    let t = this.s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** Integer in [min, max], both inclusive. */
  int(min: number, max: number): number {
    if (!Number.isInteger(min) || !Number.isInteger(max) || max < min)
      throw new RangeError(`rng.int: bad range [${min}, ${max}]`);
    return min + Math.floor(this.next() * (max - min + 1));
  }

  /** Float in [min, max) rounded to `decimals` places. */
  float(min: number, max: number, decimals = 2): number {
    const f = 10 ** decimals;
    return Math.round((min + this.next() * (max - min)) * f) / f;
  }

  bool(p = 0.5): boolean {
    return this.next() < p;
  }

  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new RangeError('rng.pick: empty list');
    return items[Math.floor(this.next() * items.length)];
  }

  /** A shuffled copy (Fisher–Yates). */
  shuffle<T>(items: readonly T[]): T[] {
    const a = [...items];
    for (let i = a.length - 1; i > 0; i--) {
      const j = Math.floor(this.next() * (i + 1));
      [a[i], a[j]] = [a[j], a[i]];
    }
    return a;
  }

  /** `k` distinct items in random order. */
  sample<T>(items: readonly T[], k: number): T[] {
    if (k > items.length) throw new RangeError(`rng.sample: k=${k} > ${items.length} items`);
    return this.shuffle(items).slice(0, k);
  }

  /** A random string over `alphabet`, e.g. rng.string(6, 'ABCDEFGHJKLMNPQRSTUVWXYZ23456789'). */
  string(length: number, alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789'): string {
    let out = '';
    for (let i = 0; i < length; i++) out += alphabet[Math.floor(this.next() * alphabet.length)];
    return out;
  }

  /** An independent stream derived from this one and a label (stable under reordering of other draws). */
  fork(label: string): Rng {
    return new Rng(`${this.s}:${label}`);
  }
}

/** xmur3-style string hash → 32-bit state, so nearby seeds give unrelated streams. */
function hashSeed(str: string): number {
  let h = 1779033703 ^ str.length;
  for (let i = 0; i < str.length; i++) {
    h = Math.imul(h ^ str.charCodeAt(i), 3432918353);
    h = (h << 13) | (h >>> 19);
  }
  h = Math.imul(h ^ (h >>> 16), 2246822507);
  h = Math.imul(h ^ (h >>> 13), 3266489909);
  return (h ^= h >>> 16) >>> 0;
}
