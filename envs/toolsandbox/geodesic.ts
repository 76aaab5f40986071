/**
 * The geodesic distance behind ToolSandbox's `calculate_lat_lon_distance`: geopy 2.4's
 * `geopy.distance.distance` (= `geodesic`, ellipsoid WGS-84 given in kilometres: a = 6378.137,
 * f = 1 / 298.257223563), which calls geographiclib 2.1's `Geodesic.Inverse(..., DISTANCE)`.
 *
 * This is C. F. F. Karney's algorithm ("Algorithms for geodesics", J. Geodesy 87, 2013): series
 * of order 6 in the third flattening, a Newton solve of the hybrid problem with bisection as
 * fallback, the astroid start for nearly antipodal points. Written for this port following the
 * paper and geographiclib's reference implementation (MIT/X11, (c) Charles Karney 2011-2022,
 * https://geographiclib.sourceforge.io/), keeping its operation order: upstream's answer is the
 * float geographiclib computes, and a different but "equally accurate" order of operations would
 * print other last digits. Only what the distance needs is here (no azimuths, reduced length
 * output, scales or area).
 */

const sq = (x: number): number => x * x;
const DEG = Math.PI / 180; // CPython's math.radians multiplies by pi / 180.0

/** Python's round(): halves go to the even integer. */
function roundHalfEven(x: number): number {
  const r = Math.round(x);
  return Math.abs(x % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/** Python's int % 4 (never negative). */
const mod4 = (q: number): number => ((q % 4) + 4) % 4;

/** Dekker's exact product: a * b = hi + lo. */
function twoProduct(a: number, b: number): [number, number] {
  const hi = a * b;
  const split = (x: number): [number, number] => {
    const c = 134217729 * x; // 2^27 + 1
    const h = c - (c - x);
    return [h, x - h];
  };
  const [ah, al] = split(a);
  const [bh, bl] = split(b);
  return [hi, al * bl - (hi - ah * bh - al * bh - ah * bl)];
}

/**
 * CPython 3.11's math.hypot, which is correctly rounded for all but rare inputs (its vector_norm
 * sums the squares in extended precision and applies one differential correction); V8's
 * Math.hypot is not, and geographiclib normalises every sine / cosine pair with it.
 */
export function pyHypot(x: number, y: number): number {
  x = Math.abs(x);
  y = Math.abs(y);
  const max = Math.max(x, y);
  if (!Number.isFinite(max)) return Number.isNaN(x) || Number.isNaN(y) ? (max === Infinity ? Infinity : NaN) : max;
  if (max === 0 || Math.min(x, y) === 0) return max;
  // Scale by a power of two so the squares neither overflow nor underflow (lossless).
  const e = Math.floor(Math.log2(max));
  const scale = 2 ** -e;
  const a = x * scale;
  const b = y * scale;
  const [ph, pl] = twoProduct(a, a);
  const [qh, ql] = twoProduct(b, b);
  // Two-sum of the high parts, the low parts added to its error.
  const s = ph + qh;
  const bv = s - ph;
  const lo = ph - (s - bv) + (qh - bv) + (pl + ql);
  let h = Math.sqrt(s + lo);
  const [hh, hl] = twoProduct(h, h);
  h += (s - hh - hl + lo) / (2 * h);
  return h / scale;
}

/** IEEE remainder (math.remainder): x - n * y with n the nearest integer to x / y, ties to even. */
function remainder(x: number, y: number): number {
  if (!Number.isFinite(x)) return NaN;
  const ay = Math.abs(y);
  let r = x % ay; // fmod: exact, sign of x
  const half = ay / 2;
  if (Math.abs(r) > half) r -= Math.sign(r) * ay;
  else if (Math.abs(r) === half) {
    const n = (x - r) / ay; // the integer quotient of the fmod
    if (Math.abs(n) % 2 === 1) r -= Math.sign(r) * ay;
  }
  return r === 0 ? (Object.is(x, -0) || x < 0 ? -0 : 0) : r;
}

/** Error-free sum: u + v = s + t. */
function sum(u: number, v: number): [number, number] {
  const s = u + v;
  let up = s - v;
  let vpp = s - up;
  up -= u;
  vpp -= v;
  return [s, s === 0 ? s : 0.0 - (up + vpp)];
}

function polyval(n: number, p: readonly number[], s: number, x: number): number {
  let y = n < 0 ? 0 : p[s];
  while (n > 0) {
    n--;
    s++;
    y = y * x + p[s];
  }
  return y;
}

/** Rounds tiny angles so that values below 1/2^57 of a degree underflow to zero. */
function angRound(x: number): number {
  const z = 1 / 16;
  let y = Math.abs(x);
  if (y < z) y = z - (z - y);
  return x < 0 || Object.is(x, -0) ? -y : y;
}

const copysign = (m: number, s: number): number => (s < 0 || Object.is(s, -0) ? -Math.abs(m) : Math.abs(m));

function angDiff(x: number, y: number): [number, number] {
  let [d, t] = sum(remainder(-x, 360), remainder(y, 360));
  [d, t] = sum(remainder(d, 360), t);
  if (d === 0 || Math.abs(d) === 180) d = copysign(d, t === 0 ? y - x : -t);
  return [d, t];
}

function quadrant(s: number, c: number, q: number, x: number): [number, number] {
  switch (mod4(q)) {
    case 1:
      [s, c] = [c, -s];
      break;
    case 2:
      [s, c] = [-s, -c];
      break;
    case 3:
      [s, c] = [-c, s];
      break;
  }
  c = c + 0.0;
  if (s === 0) s = copysign(s, x);
  return [s, c];
}

function sincosd(x: number): [number, number] {
  let r = Number.isFinite(x) ? x % 360 : NaN;
  const q = Number.isNaN(r) ? 0 : roundHalfEven(r / 90);
  r -= 90 * q;
  r *= DEG;
  return quadrant(Math.sin(r), Math.cos(r), q, x);
}

function sincosde(x: number, t: number): [number, number] {
  const q = Number.isFinite(x) ? roundHalfEven(x / 90) : 0;
  const r = angRound(x - 90 * q + t) * DEG;
  return quadrant(Math.sin(r), Math.cos(r), q, x);
}

function norm(x: number, y: number): [number, number] {
  const r = pyHypot(x, y);
  return [x / r, y / r];
}

const ORDER = 6;
const EPS = Number.EPSILON;
const TINY = Math.sqrt(2.2250738585072014e-308);
const TOL0 = EPS;
const TOL1 = 200 * TOL0;
const TOL2 = Math.sqrt(TOL0);
const TOLB = TOL0;
const XTHRESH = 1000 * TOL2;
const MAXIT1 = 20;
const MAXIT2 = MAXIT1 + 53 + 10;

/** Clenshaw summation of sum(c[l] * sin(2 l x)) (sinp) or sum(c[l] * cos((2 l + 1) x)). */
function sinCosSeries(sinp: boolean, sinx: number, cosx: number, c: number[]): number {
  let k = c.length;
  let n = k - (sinp ? 1 : 0);
  const ar = 2 * (cosx - sinx) * (cosx + sinx);
  let y1 = 0;
  let y0: number;
  if (n & 1) y0 = c[--k];
  else y0 = 0;
  n = Math.floor(n / 2);
  while (n) {
    n--;
    y1 = ar * y0 - y1 + c[--k];
    y0 = ar * y1 - y0 + c[--k];
  }
  return sinp ? 2 * sinx * cosx * y0 : cosx * (y0 - y1);
}

function astroid(x: number, y: number): number {
  const p = sq(x);
  const q = sq(y);
  const r = (p + q - 1) / 6;
  if (q === 0 && r <= 0) return 0;
  const S = (p * q) / 4;
  const r2 = sq(r);
  const r3 = r * r2;
  const disc = S * (S + 2 * r3);
  let u = r;
  if (disc >= 0) {
    let T3 = S + r3;
    T3 += T3 < 0 ? -Math.sqrt(disc) : Math.sqrt(disc);
    const T = copysign(Math.pow(Math.abs(T3), 1 / 3), T3);
    u += T + (T !== 0 ? r2 / T : 0);
  } else {
    const ang = Math.atan2(Math.sqrt(-disc), -(S + r3));
    u += 2 * r * Math.cos(ang / 3);
  }
  const v = Math.sqrt(sq(u) + q);
  const uv = u < 0 ? q / (v - u) : u + v;
  const w = (uv - q) / (2 * v);
  return uv / (Math.sqrt(uv + sq(w)) + w);
}

function a1m1f(eps: number): number {
  const coeff = [1, 4, 64, 0, 256];
  const m = ORDER / 2;
  const t = polyval(m, coeff, 0, sq(eps)) / coeff[m + 1];
  return (t + eps) / (1 - eps);
}

/** Fills c[1..6] from a packed coefficient table (C1 / C2 of the paper). */
function fillSeries(coeff: readonly number[], eps: number, c: number[]): void {
  const eps2 = sq(eps);
  let d = eps;
  let o = 0;
  for (let l = 1; l <= ORDER; l++) {
    const m = Math.floor((ORDER - l) / 2);
    c[l] = (d * polyval(m, coeff, o, eps2)) / coeff[o + m + 1];
    o += m + 2;
    d *= eps;
  }
}
const C1_COEFF = [-1, 6, -16, 32, -9, 64, -128, 2048, 9, -16, 768, 3, -5, 512, -7, 1280, -7, 2048];
const C2_COEFF = [1, 2, 16, 32, 35, 64, 384, 2048, 15, 80, 768, 7, 35, 512, 63, 1280, 77, 2048];

function a2m1f(eps: number): number {
  const coeff = [-11, -28, -192, 0, 256];
  const m = ORDER / 2;
  const t = polyval(m, coeff, 0, sq(eps)) / coeff[m + 1];
  return (t - eps) / (1 + eps);
}

const A3_COEFF = [-3, 128, -2, -3, 64, -1, -3, -1, 16, 3, -1, -2, 8, 1, -1, 2, 1, 1];
const C3_COEFF = [
  3, 128, 2, 5, 128, -1, 3, 3, 64, -1, 0, 1, 8, -1, 1, 4, 5, 256, 1, 3, 128, -3, -2, 3, 64, 1, -3, 2, 32, 7, 512, -10,
  9, 384, 5, -9, 5, 192, 7, 512, -14, 7, 512, 21, 2560,
];

class Ellipsoid {
  readonly f1: number;
  readonly e2: number;
  readonly ep2: number;
  readonly n: number;
  readonly b: number;
  readonly etol2: number;
  readonly A3x: number[] = [];
  readonly C3x: number[] = [];

  constructor(
    readonly a: number,
    readonly f: number,
  ) {
    this.f1 = 1 - f;
    this.e2 = f * (2 - f);
    this.ep2 = this.e2 / sq(this.f1);
    this.n = f / (2 - f);
    this.b = a * this.f1;
    this.etol2 = (0.1 * TOL2) / Math.sqrt((Math.max(0.001, Math.abs(f)) * Math.min(1.0, 1 - f / 2)) / 2);
    let o = 0;
    for (let j = ORDER - 1; j >= 0; j--) {
      const m = Math.min(ORDER - j - 1, j);
      this.A3x.push(polyval(m, A3_COEFF, o, this.n) / A3_COEFF[o + m + 1]);
      o += m + 2;
    }
    o = 0;
    for (let l = 1; l < ORDER; l++) {
      for (let j = ORDER - 1; j >= l; j--) {
        const m = Math.min(ORDER - j - 1, j);
        this.C3x.push(polyval(m, C3_COEFF, o, this.n) / C3_COEFF[o + m + 1]);
        o += m + 2;
      }
    }
  }

  private a3f(eps: number): number {
    return polyval(ORDER - 1, this.A3x, 0, eps);
  }

  private c3f(eps: number, c: number[]): void {
    let mult = 1;
    let o = 0;
    for (let l = 1; l < ORDER; l++) {
      const m = ORDER - l - 1;
      mult *= eps;
      c[l] = mult * polyval(m, this.C3x, o, eps);
      o += m + 1;
    }
  }

  /** _Lengths for DISTANCE and / or REDUCEDLENGTH: [s12b, m12b]. */
  private lengths(
    eps: number,
    sig12: number,
    ssig1: number,
    csig1: number,
    dn1: number,
    ssig2: number,
    csig2: number,
    dn2: number,
    distance: boolean,
    reduced: boolean,
    C1a: number[],
    C2a: number[],
  ): [number, number] {
    let s12b = NaN;
    let m12b = NaN;
    let A1 = a1m1f(eps);
    fillSeries(C1_COEFF, eps, C1a);
    let A2 = 0;
    let m0x = NaN;
    if (reduced) {
      A2 = a2m1f(eps);
      fillSeries(C2_COEFF, eps, C2a);
      m0x = A1 - A2;
      A2 = 1 + A2;
    }
    A1 = 1 + A1;
    let J12 = NaN;
    if (distance) {
      const B1 = sinCosSeries(true, ssig2, csig2, C1a) - sinCosSeries(true, ssig1, csig1, C1a);
      s12b = A1 * (sig12 + B1);
      if (reduced) {
        const B2 = sinCosSeries(true, ssig2, csig2, C2a) - sinCosSeries(true, ssig1, csig1, C2a);
        J12 = m0x * sig12 + (A1 * B1 - A2 * B2);
      }
    } else if (reduced) {
      for (let l = 1; l < ORDER; l++) C2a[l] = A1 * C1a[l] - A2 * C2a[l];
      J12 = m0x * sig12 + (sinCosSeries(true, ssig2, csig2, C2a) - sinCosSeries(true, ssig1, csig1, C2a));
    }
    if (reduced) m12b = dn2 * (csig1 * ssig2) - dn1 * (ssig1 * csig2) - csig1 * csig2 * J12;
    return [s12b, m12b];
  }

  private inverseStart(
    sbet1: number,
    cbet1: number,
    sbet2: number,
    cbet2: number,
    lam12: number,
    slam12: number,
    clam12: number,
  ): { sig12: number; salp1: number; calp1: number; dnm: number } {
    let sig12 = -1;
    let dnm = NaN;
    const sbet12 = sbet2 * cbet1 - cbet2 * sbet1;
    const cbet12 = cbet2 * cbet1 + sbet2 * sbet1;
    let sbet12a = sbet2 * cbet1;
    sbet12a += cbet2 * sbet1;
    const shortline = cbet12 >= 0 && sbet12 < 0.5 && cbet2 * lam12 < 0.5;
    let somg12: number;
    let comg12: number;
    if (shortline) {
      let sbetm2 = sq(sbet1 + sbet2);
      sbetm2 /= sbetm2 + sq(cbet1 + cbet2);
      dnm = Math.sqrt(1 + this.ep2 * sbetm2);
      const omg12 = lam12 / (this.f1 * dnm);
      somg12 = Math.sin(omg12);
      comg12 = Math.cos(omg12);
    } else {
      somg12 = slam12;
      comg12 = clam12;
    }
    let salp1 = cbet2 * somg12;
    let calp1 =
      comg12 >= 0
        ? sbet12 + (cbet2 * sbet1 * sq(somg12)) / (1 + comg12)
        : sbet12a - (cbet2 * sbet1 * sq(somg12)) / (1 - comg12);
    const ssig12 = pyHypot(salp1, calp1);
    const csig12 = sbet1 * sbet2 + cbet1 * cbet2 * comg12;
    if (shortline && ssig12 < this.etol2) {
      // salp2 / calp2 are not needed for the distance.
      sig12 = Math.atan2(ssig12, csig12);
    } else if (Math.abs(this.n) >= 0.1 || csig12 >= 0 || ssig12 >= 6 * Math.abs(this.n) * Math.PI * sq(cbet1)) {
      // Nothing: the spherical start above.
    } else {
      // Nearly antipodal (f > 0 for WGS-84).
      const lam12x = Math.atan2(-slam12, -clam12);
      const k2 = sq(sbet1) * this.ep2;
      const eps = k2 / (2 * (1 + Math.sqrt(1 + k2)) + k2);
      const lamscale = this.f * cbet1 * this.a3f(eps) * Math.PI;
      const betscale = lamscale * cbet1;
      const x = lam12x / lamscale;
      const y = sbet12a / betscale;
      if (y > -TOL1 && x > -1 - XTHRESH) {
        salp1 = Math.min(1.0, -x);
        calp1 = -Math.sqrt(1 - sq(salp1));
      } else {
        const k = astroid(x, y);
        const omg12a = lamscale * ((-x * k) / (1 + k));
        somg12 = Math.sin(omg12a);
        comg12 = -Math.cos(omg12a);
        salp1 = cbet2 * somg12;
        calp1 = sbet12a - (cbet2 * sbet1 * sq(somg12)) / (1 - comg12);
      }
    }
    if (!(salp1 <= 0)) [salp1, calp1] = norm(salp1, calp1);
    else {
      salp1 = 1;
      calp1 = 0;
    }
    return { sig12, salp1, calp1, dnm };
  }

  private lambda12(
    sbet1: number,
    cbet1: number,
    dn1: number,
    sbet2: number,
    cbet2: number,
    dn2: number,
    salp1: number,
    calp1: number,
    slam120: number,
    clam120: number,
    diffp: boolean,
    C1a: number[],
    C2a: number[],
    C3a: number[],
  ) {
    if (sbet1 === 0 && calp1 === 0) calp1 = -TINY;
    const salp0 = salp1 * cbet1;
    const calp0 = pyHypot(calp1, salp1 * sbet1);
    let ssig1 = sbet1;
    const somg1 = salp0 * sbet1;
    let csig1 = calp1 * cbet1;
    const comg1 = csig1;
    [ssig1, csig1] = norm(ssig1, csig1);
    const calp2 =
      cbet2 !== cbet1 || Math.abs(sbet2) !== -sbet1
        ? Math.sqrt(
            sq(calp1 * cbet1) +
              (cbet1 < -sbet1 ? (cbet2 - cbet1) * (cbet1 + cbet2) : (sbet1 - sbet2) * (sbet1 + sbet2)),
          ) / cbet2
        : Math.abs(calp1);
    let ssig2 = sbet2;
    const somg2 = salp0 * sbet2;
    let csig2 = calp2 * cbet2;
    const comg2 = csig2;
    [ssig2, csig2] = norm(ssig2, csig2);
    const sig12 = Math.atan2(Math.max(0.0, csig1 * ssig2 - ssig1 * csig2) + 0.0, csig1 * csig2 + ssig1 * ssig2);
    const somg12 = Math.max(0.0, comg1 * somg2 - somg1 * comg2) + 0.0;
    const comg12 = comg1 * comg2 + somg1 * somg2;
    const eta = Math.atan2(somg12 * clam120 - comg12 * slam120, comg12 * clam120 + somg12 * slam120);
    const k2 = sq(calp0) * this.ep2;
    const eps = k2 / (2 * (1 + Math.sqrt(1 + k2)) + k2);
    this.c3f(eps, C3a);
    const B312 = sinCosSeries(true, ssig2, csig2, C3a) - sinCosSeries(true, ssig1, csig1, C3a);
    const domg12 = -this.f * this.a3f(eps) * salp0 * (sig12 + B312);
    const lam12 = eta + domg12;
    let dlam12 = NaN;
    if (diffp) {
      if (calp2 === 0) dlam12 = (-2 * this.f1 * dn1) / sbet1;
      else {
        dlam12 = this.lengths(eps, sig12, ssig1, csig1, dn1, ssig2, csig2, dn2, false, true, C1a, C2a)[1];
        dlam12 *= this.f1 / (calp2 * cbet2);
      }
    }
    return { lam12, sig12, ssig1, csig1, ssig2, csig2, eps, dlam12 };
  }

  /** Geodesic.Inverse(lat1, lon1, lat2, lon2, DISTANCE)['s12'], in the unit of `a`. */
  distance(lat1: number, lon1: number, lat2: number, lon2: number): number {
    let [lon12, lon12s] = angDiff(lon1, lon2);
    const lonsign = copysign(1, lon12);
    lon12 = lonsign * lon12;
    lon12s = lonsign * lon12s;
    const lam12 = lon12 * DEG;
    const [slam12, clam12] = sincosde(lon12, lon12s);
    lon12s = 180 - lon12 - lon12s;
    lat1 = angRound(Math.abs(lat1) > 90 ? NaN : lat1);
    lat2 = angRound(Math.abs(lat2) > 90 ? NaN : lat2);
    if (Math.abs(lat1) < Math.abs(lat2) || Number.isNaN(lat2)) [lat1, lat2] = [lat2, lat1];
    const latsign = copysign(1, -lat1);
    lat1 *= latsign;
    lat2 *= latsign;
    let [sbet1, cbet1] = sincosd(lat1);
    sbet1 *= this.f1;
    [sbet1, cbet1] = norm(sbet1, cbet1);
    cbet1 = Math.max(TINY, cbet1);
    let [sbet2, cbet2] = sincosd(lat2);
    sbet2 *= this.f1;
    [sbet2, cbet2] = norm(sbet2, cbet2);
    cbet2 = Math.max(TINY, cbet2);
    if (cbet1 < -sbet1) {
      if (cbet2 === cbet1) sbet2 = copysign(sbet1, sbet2);
    } else if (Math.abs(sbet2) === -sbet1) cbet2 = cbet1;
    const dn1 = Math.sqrt(1 + this.ep2 * sq(sbet1));
    const dn2 = Math.sqrt(1 + this.ep2 * sq(sbet2));
    const C1a = new Array<number>(ORDER + 1).fill(0);
    const C2a = new Array<number>(ORDER + 1).fill(0);
    const C3a = new Array<number>(ORDER).fill(0);
    let s12x = NaN;
    let meridian = lat1 === -90 || slam12 === 0;
    if (meridian) {
      const calp1 = clam12;
      const ssig1 = sbet1;
      const csig1 = calp1 * cbet1;
      const ssig2 = sbet2;
      const csig2 = 1.0 * cbet2;
      let sig12 = Math.atan2(Math.max(0.0, csig1 * ssig2 - ssig1 * csig2) + 0.0, csig1 * csig2 + ssig1 * ssig2);
      let m12x: number;
      [s12x, m12x] = this.lengths(this.n, sig12, ssig1, csig1, dn1, ssig2, csig2, dn2, true, true, C1a, C2a);
      if (sig12 < TOL2 || m12x >= 0) {
        if (sig12 < 3 * TINY || (sig12 < TOL0 && (s12x < 0 || m12x < 0))) sig12 = m12x = s12x = 0.0;
        s12x *= this.b;
      } else meridian = false;
    }
    if (!meridian && sbet1 === 0 && (this.f <= 0 || lon12s >= this.f * 180)) {
      // Along the equator.
      s12x = this.a * lam12;
    } else if (!meridian) {
      const start = this.inverseStart(sbet1, cbet1, sbet2, cbet2, lam12, slam12, clam12);
      let { salp1, calp1 } = start;
      if (start.sig12 >= 0) {
        s12x = start.sig12 * this.b * start.dnm;
      } else {
        let numit = 0;
        let tripn = false;
        let tripb = false;
        let salp1a = TINY;
        let calp1a = 1.0;
        let salp1b = TINY;
        let calp1b = -1.0;
        let r: ReturnType<Ellipsoid['lambda12']>;
        for (;;) {
          r = this.lambda12(
            sbet1,
            cbet1,
            dn1,
            sbet2,
            cbet2,
            dn2,
            salp1,
            calp1,
            slam12,
            clam12,
            numit < MAXIT1,
            C1a,
            C2a,
            C3a,
          );
          const v = r.lam12;
          const dv = r.dlam12;
          if (tripb || !(Math.abs(v) >= (tripn ? 8 : 1) * TOL0) || numit === MAXIT2) break;
          if (v > 0 && (numit > MAXIT1 || calp1 / salp1 > calp1b / salp1b)) {
            salp1b = salp1;
            calp1b = calp1;
          } else if (v < 0 && (numit > MAXIT1 || calp1 / salp1 < calp1a / salp1a)) {
            salp1a = salp1;
            calp1a = calp1;
          }
          numit++;
          if (numit < MAXIT1 && dv > 0) {
            const dalp1 = -v / dv;
            if (Math.abs(dalp1) < Math.PI) {
              const sdalp1 = Math.sin(dalp1);
              const cdalp1 = Math.cos(dalp1);
              const nsalp1 = salp1 * cdalp1 + calp1 * sdalp1;
              if (nsalp1 > 0) {
                calp1 = calp1 * cdalp1 - salp1 * sdalp1;
                salp1 = nsalp1;
                [salp1, calp1] = norm(salp1, calp1);
                tripn = Math.abs(v) <= 16 * TOL0;
                continue;
              }
            }
          }
          // Newton failed or left the bracket: bisect.
          salp1 = (salp1a + salp1b) / 2;
          calp1 = (calp1a + calp1b) / 2;
          [salp1, calp1] = norm(salp1, calp1);
          tripn = false;
          tripb =
            Math.abs(salp1a - salp1) + (calp1a - calp1) < TOLB || Math.abs(salp1 - salp1b) + (calp1 - calp1b) < TOLB;
        }
        s12x = this.lengths(r.eps, r.sig12, r.ssig1, r.csig1, dn1, r.ssig2, r.csig2, dn2, true, false, C1a, C2a)[0];
        s12x *= this.b;
      }
    }
    return 0.0 + s12x;
  }
}

/** geopy's ELLIPSOIDS['WGS-84'] (major axis in km, flattening); distances come out in km. */
const WGS84_KM = new Ellipsoid(6378.137, 1 / 298.257223563);

/**
 * geopy.distance.distance((lat0, lon0), (lat1, lon1)).kilometers for latitudes in [-90, 90] and
 * longitudes in [-180, 180] (what upstream's validators admit; geopy's Point would raise for a
 * latitude beyond 90 and wrap a longitude beyond 180). Point reads each coordinate as
 * `float(x or 0.0)`, so -0.0 arrives as 0.0.
 */
export function geodesicKm(lat0: number, lon0: number, lat1: number, lon1: number): number {
  return WGS84_KM.distance(lat0 || 0, lon0 || 0, lat1 || 0, lon1 || 0);
}
