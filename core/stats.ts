/**
 * Confidence intervals for evaluation numbers. Pure and deterministic (bootstrap uses a seeded
 * PRNG), so a report rebuilt from the same results shows the same intervals.
 */

/** A point estimate with a two-sided interval; null when there is nothing to estimate (n = 0). */
export interface Interval {
  estimate: number | null;
  low: number | null;
  high: number | null;
  /** How the interval was computed, so a reader knows what it means. */
  method: 'wilson' | 't' | 'bootstrap' | 'newcombe' | 'none';
  n: number;
}

const EMPTY = (method: Interval['method'] = 'none'): Interval => ({
  estimate: null,
  low: null,
  high: null,
  method,
  n: 0,
});

/** Standard normal quantile (Acklam's rational approximation, |error| < 1.2e-9). */
export function normalQuantile(p: number): number {
  if (!(p > 0 && p < 1)) throw new RangeError(`normalQuantile: p must be in (0, 1), got ${p}`);
  const a = [
    -39.69683028665376, 220.9460984245205, -275.9285104469687, 138.357751867269, -30.66479806614716, 2.506628277459239,
  ];
  const b = [-54.47609879822406, 161.5858368580409, -155.6989798598866, 66.80131188771972, -13.28068155288572];
  const c = [
    -0.007784894002430293, -0.3223964580411365, -2.400758277161838, -2.549732539343734, 4.374664141464968,
    2.938163982698783,
  ];
  const d = [0.007784695709041462, 0.3224671290700398, 2.445134137142996, 3.754408661907416];
  const lo = 0.02425;
  if (p < lo) {
    const q = Math.sqrt(-2 * Math.log(p));
    return (
      (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
      ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1)
    );
  }
  if (p > 1 - lo) return -normalQuantile(1 - p);
  const q = p - 0.5;
  const r = q * q;
  return (
    ((((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q) /
    (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1)
  );
}

/** ln Γ(x) for x > 0 (Lanczos, g = 7). */
function logGamma(x: number): number {
  const g = [
    0.9999999999998099, 676.5203681218851, -1259.1392167224028, 771.3234287776531, -176.6150291621406,
    12.507343278686905, -0.13857109526572012, 9.984369578019572e-6, 1.5056327351493116e-7,
  ];
  if (x < 0.5) return Math.log(Math.PI / Math.sin(Math.PI * x)) - logGamma(1 - x);
  const z = x - 1;
  let s = g[0];
  for (let i = 1; i < 9; i++) s += g[i] / (z + i);
  const t = z + 7.5;
  return 0.5 * Math.log(2 * Math.PI) + (z + 0.5) * Math.log(t) - t + Math.log(s);
}

/** Continued fraction for the regularized incomplete beta function (modified Lentz). */
function betaContinuedFraction(a: number, b: number, x: number): number {
  const tiny = 1e-300;
  let c = 1;
  let d = 1 - ((a + b) * x) / (a + 1);
  if (Math.abs(d) < tiny) d = tiny;
  d = 1 / d;
  let h = d;
  for (let m = 1; m <= 300; m++) {
    const m2 = 2 * m;
    let aa = (m * (b - m) * x) / ((a + m2 - 1) * (a + m2));
    d = 1 + aa * d;
    if (Math.abs(d) < tiny) d = tiny;
    c = 1 + aa / c;
    if (Math.abs(c) < tiny) c = tiny;
    d = 1 / d;
    h *= d * c;
    aa = (-(a + m) * (a + b + m) * x) / ((a + m2) * (a + m2 + 1));
    d = 1 + aa * d;
    if (Math.abs(d) < tiny) d = tiny;
    c = 1 + aa / c;
    if (Math.abs(c) < tiny) c = tiny;
    d = 1 / d;
    const delta = d * c;
    h *= delta;
    if (Math.abs(delta - 1) < 1e-15) break;
  }
  return h;
}

/** Regularized incomplete beta I_x(a, b). */
function incompleteBeta(x: number, a: number, b: number): number {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const front = Math.exp(logGamma(a + b) - logGamma(a) - logGamma(b) + a * Math.log(x) + b * Math.log(1 - x));
  if (x < (a + 1) / (a + b + 2)) return (front * betaContinuedFraction(a, b, x)) / a;
  return 1 - (front * betaContinuedFraction(b, a, 1 - x)) / b;
}

/** CDF of Student's t with `df` degrees of freedom. */
export function studentTCdf(t: number, df: number): number {
  const x = df / (df + t * t);
  const tail = 0.5 * incompleteBeta(x, df / 2, 0.5);
  return t >= 0 ? 1 - tail : tail;
}

/** Quantile of Student's t (bisection on the CDF; exact to ~1e-10). */
export function studentTQuantile(p: number, df: number): number {
  if (!(p > 0 && p < 1)) throw new RangeError(`studentTQuantile: p must be in (0, 1), got ${p}`);
  if (!(df > 0)) throw new RangeError(`studentTQuantile: df must be > 0, got ${df}`);
  let lo = -1e4;
  let hi = 1e4;
  for (let i = 0; i < 200 && hi - lo > 1e-12; i++) {
    const mid = (lo + hi) / 2;
    if (studentTCdf(mid, df) < p) lo = mid;
    else hi = mid;
  }
  return (lo + hi) / 2;
}

/** Wilson score interval for a binomial proportion: sound at 0/n and n/n, unlike the Wald interval. */
export function wilsonInterval(successes: number, n: number, confidence = 0.95): Interval {
  if (!Number.isInteger(successes) || !Number.isInteger(n) || successes < 0 || successes > n) {
    throw new RangeError(`wilsonInterval: need integers 0 ≤ successes ≤ n, got ${successes}/${n}`);
  }
  if (n === 0) return EMPTY('wilson');
  const z = normalQuantile(1 - (1 - confidence) / 2);
  const p = successes / n;
  const z2 = z * z;
  const denom = 1 + z2 / n;
  const centre = (p + z2 / (2 * n)) / denom;
  const half = (z * Math.sqrt((p * (1 - p)) / n + z2 / (4 * n * n))) / denom;
  // Clamp only float noise: at 0/n and n/n the bound is exactly 0 or 1 analytically.
  return { estimate: p, low: Math.max(0, centre - half), high: Math.min(1, centre + half), method: 'wilson', n };
}

export function mean(values: readonly number[]): number {
  if (values.length === 0) throw new RangeError('mean: no values');
  return values.reduce((s, v) => s + v, 0) / values.length;
}

/** Sample standard deviation (n − 1), the one the t interval needs. */
export function sampleStd(values: readonly number[]): number {
  if (values.length < 2) return 0;
  const m = mean(values);
  return Math.sqrt(values.reduce((s, v) => s + (v - m) ** 2, 0) / (values.length - 1));
}

/**
 * t interval for a mean, e.g. over per-trial pass rates. With a single value the interval is
 * undefined and reported as such (low/high null), never as a zero-width interval.
 */
export function tInterval(values: readonly number[], confidence = 0.95): Interval {
  if (values.length === 0) return EMPTY('t');
  const m = mean(values);
  if (values.length === 1) return { estimate: m, low: null, high: null, method: 't', n: 1 };
  const tq = studentTQuantile(1 - (1 - confidence) / 2, values.length - 1);
  const half = (tq * sampleStd(values)) / Math.sqrt(values.length);
  return { estimate: m, low: m - half, high: m + half, method: 't', n: values.length };
}

/** mulberry32: a tiny seeded PRNG, so bootstrap intervals are reproducible. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function percentile(sorted: readonly number[], q: number): number {
  const pos = (sorted.length - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo);
}

export interface BootstrapOptions {
  confidence?: number;
  iterations?: number;
  seed?: number;
}

/** Percentile bootstrap of a mean; resamples units (tasks), seeded. */
export function bootstrapMeanInterval(values: readonly number[], opts: BootstrapOptions = {}): Interval {
  const { confidence = 0.95, iterations = 2000, seed = 1 } = opts;
  if (values.length === 0) return EMPTY('bootstrap');
  const rand = seededRandom(seed);
  const n = values.length;
  const means = new Array<number>(iterations);
  for (let i = 0; i < iterations; i++) {
    let s = 0;
    for (let j = 0; j < n; j++) s += values[Math.floor(rand() * n)];
    means[i] = s / n;
  }
  means.sort((x, y) => x - y);
  const alpha = (1 - confidence) / 2;
  return {
    estimate: mean(values),
    low: percentile(means, alpha),
    high: percentile(means, 1 - alpha),
    method: 'bootstrap',
    n,
  };
}

/**
 * Newcombe's hybrid score interval (method 10) for p_a − p_b of two independent proportions.
 * For paired designs (same tasks) it is conservative; prefer a paired bootstrap there.
 */
export function newcombeDifference(
  successesA: number,
  nA: number,
  successesB: number,
  nB: number,
  confidence = 0.95,
): Interval {
  if (nA === 0 || nB === 0) return EMPTY('newcombe');
  const a = wilsonInterval(successesA, nA, confidence);
  const b = wilsonInterval(successesB, nB, confidence);
  const pa = successesA / nA;
  const pb = successesB / nB;
  const d = pa - pb;
  const low = d - Math.sqrt((pa - a.low!) ** 2 + (b.high! - pb) ** 2);
  const high = d + Math.sqrt((a.high! - pa) ** 2 + (pb - b.low!) ** 2);
  return { estimate: d, low, high, method: 'newcombe', n: Math.min(nA, nB) };
}

/** Binomial coefficient as a float (exact for the small n of evaluation trials). */
export function choose(n: number, k: number): number {
  if (k < 0 || k > n) return 0;
  let r = 1;
  for (let i = 1; i <= k; i++) r = (r * (n - k + i)) / i;
  return r;
}

/**
 * τ²-bench's pass^k for one task: the probability that k trials drawn without replacement from
 * the n run all succeed, C(c, k) / C(n, k).
 */
export function passHatKForTask(successes: number, trials: number, k: number): number {
  if (k < 1 || k > trials) throw new RangeError(`passHatK: k must be in [1, ${trials}], got ${k}`);
  return choose(successes, k) / choose(trials, k);
}
