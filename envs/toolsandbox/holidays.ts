/**
 * The US public holidays ToolSandbox's search_holiday looks up: `holidays.country_holidays("US",
 * years=y)` of python-holidays 0.51 (MIT licence), without a subdivision. Re-implemented from its
 * rules (countries/united_states.py): the federal holidays with their historical start years and date
 * rules, and "(observed)" days — Saturday to the Friday before, Sunday to the Monday after, kept only
 * when they fall in the year asked (New Year's Day of the next year can be observed on 31 December).
 * Checked against the library for every year 1850–2150 (test/fixtures/toolsandbox/holidays-expected.json).
 */

/** A date as [year, month (1-12), day]. */
type Ymd = [number, number, number];

const weekday = ([y, m, d]: Ymd): number => new Date(Date.UTC(y, m - 1, d)).getUTCDay(); // 0 = Sunday
const addDays = ([y, m, d]: Ymd, n: number): Ymd => {
  const t = new Date(Date.UTC(y, m - 1, d + n));
  return [t.getUTCFullYear(), t.getUTCMonth() + 1, t.getUTCDate()];
};
/** The n-th (1-based) given weekday of a month; n = -1 for the last. */
function nthWeekday(y: number, m: number, wd: number, n: number): Ymd {
  if (n > 0) {
    const first = weekday([y, m, 1]);
    return [y, m, 1 + ((wd - first + 7) % 7) + 7 * (n - 1)];
  }
  const last = new Date(Date.UTC(y, m, 0)).getUTCDate();
  return [y, m, last - ((weekday([y, m, last]) - wd + 7) % 7)];
}
const MON = 1;
const THU = 4;

export const isoDate = ([y, m, d]: Ymd): string =>
  `${String(y).padStart(4, '0')}-${String(m).padStart(2, '0')}-${String(d).padStart(2, '0')}`;

/** country_holidays("US", years=year).items() as [ISO date, name]; raises as date() would past year 9999. */
export function usHolidays(year: number): [string, string][] {
  if (year >= 10000) throw new RangeError(`year ${year} is out of range`);
  const out: [Ymd, string][] = [];
  const add = (dt: Ymd, name: string) => {
    if (dt[0] === year) out.push([dt, name]);
  };
  const observed = (dt: Ymd, name: string) => {
    const wd = weekday(dt);
    if (wd === 6) add(addDays(dt, -1), `${name} (observed)`);
    else if (wd === 0) add(addDays(dt, 1), `${name} (observed)`);
  };
  const fixed = (m: number, d: number, name: string, withObserved: boolean) => {
    add([year, m, d], name);
    if (withObserved) observed([year, m, d], name);
  };
  if (year >= 1871) {
    fixed(1, 1, "New Year's Day", true);
    // The next year's 1 January, observed on this year's 31 December when it is a Saturday.
    if (year + 1 >= 10000) throw new RangeError(`year ${year + 1} is out of range`);
    observed([year + 1, 1, 1], "New Year's Day");
  }
  if (year >= 1888) {
    if (year >= 1971) add(nthWeekday(year, 5, MON, -1), 'Memorial Day');
    else fixed(5, 30, 'Memorial Day', false);
  }
  if (year >= 2021) fixed(6, 19, 'Juneteenth National Independence Day', true);
  if (year >= 1871) fixed(7, 4, 'Independence Day', true);
  if (year >= 1894) add(nthWeekday(year, 9, MON, 1), 'Labor Day');
  if (year >= 1938) {
    const name = year >= 1954 ? 'Veterans Day' : 'Armistice Day';
    if (year >= 1971 && year <= 1977) add(nthWeekday(year, 10, MON, 4), name);
    else fixed(11, 11, name, true);
  }
  if (year >= 1871) add(nthWeekday(year, 11, THU, 4), 'Thanksgiving');
  if (year >= 1871) fixed(12, 25, 'Christmas Day', true);
  if (year >= 1986) add(nthWeekday(year, 1, MON, 3), 'Martin Luther King Jr. Day');
  if (year >= 1879) {
    if (year >= 1971) add(nthWeekday(year, 2, MON, 3), "Washington's Birthday");
    else fixed(2, 22, "Washington's Birthday", false);
  }
  if (year >= 1937) {
    if (year >= 1971) add(nthWeekday(year, 10, MON, 2), 'Columbus Day');
    else fixed(10, 12, 'Columbus Day', false);
  }
  return out.map(([dt, name]) => [isoDate(dt), name]);
}
