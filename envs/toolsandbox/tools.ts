/**
 * ToolSandbox tools that run against the world state, with upstream's outputs: a call's message is
 * `print(repr(result))` of the Python tool, or the last line of its traceback (`ValueError: wifi
 * already enabled`); a successful call leaves a tool trace `{"tool_name","arguments","result"}`
 * (tool_sandbox/common/utils.py register_as_tool / add_tool_trace, roles/execution_environment.py).
 * Ported so far: the settings tools (tools/setting.py, with their low-battery dependency errors), the
 * user's end_conversation (tools/user_tools.py), the timestamp utilities (tools/utilities.py, local
 * time = UTC as in the extraction, the clock frozen as in data/toolsandbox/SOURCE.md), and the
 * contact, messaging and reminder tools (fuzzy search through fuzz.ts, phone numbers through
 * phonenumbers.ts), search_holiday (holidays.ts), calculate_lat_lon_distance (geodesic.ts) and
 * unit_conversion (pint.ts). Not ported: the RapidAPI tools (network).
 * Derived from apple/ToolSandbox (Copyright (C) 2024 Apple Inc.; licence in data/toolsandbox/LICENSE).
 */
import { utcFields } from '../sdk/data.js';
import { pyFloatRepr, pyRepr, pyStrRepr } from '../tau2/python-format.js';
import { NoMatchingRows, SCHEMAS, type Namespace, type Row, type SandboxContext } from './context.js';
import { defaultProcess, extract, partialRatio } from './fuzz.js';
import { usHolidays } from './holidays.js';
import { geodesicKm } from './geodesic.js';
import { NumberParseException, validatePhoneNumber } from './phonenumbers.js';
import { magnitudeRepr, PintException, unitConversion, type PyNum } from './pint.js';

/** A Python exception raised by a tool: its class name and str(). */
export class PyException extends Error {
  constructor(
    readonly pyType: string,
    message: string,
  ) {
    super(message);
  }
}

type Args = Record<string, unknown>;
interface Param {
  name: string;
  type: 'bool' | 'float' | 'int' | 'str';
  /** The Python default; a parameter without one is required. */
  default?: unknown;
  /** Annotated Optional[...]: None passes the type check. */
  optional?: boolean;
}

/** Upstream's NOT_GIVEN sentinel (common/utils.py): a search or update field left out; traces skip it. */
export const NOT_GIVEN = Symbol('NOT_GIVEN');
interface ToolDef {
  params: Param[];
  run: (ctx: SandboxContext, args: Args, floats: Set<string>) => unknown;
  /** repr() where the result holds Python floats (a JSON number loses the float type). */
  repr?: (result: unknown) => string;
}

/** Python truthiness (an empty list or dict is false, unlike in JavaScript). */
const pyTruthy = (v: unknown): boolean =>
  Array.isArray(v) ? v.length > 0 : v !== null && typeof v === 'object' ? Object.keys(v).length > 0 : Boolean(v);

/** A call's arguments, and which of them Python reads as float (JSON.parse loses `1.0` vs `1`). */
export interface ToolArgs {
  args: Args;
  floats: Set<string>;
}

/** Python's type(value) as validate_type prints it. */
function pyTypeName(v: unknown, isFloat: boolean): string {
  if (v === null) return "<class 'NoneType'>";
  if (typeof v === 'boolean') return "<class 'bool'>";
  if (typeof v === 'number') return isFloat ? "<class 'float'>" : "<class 'int'>";
  if (typeof v === 'string') return "<class 'str'>";
  return Array.isArray(v) ? "<class 'list'>" : "<class 'dict'>";
}

/** validators.validate_type for a bool parameter (ints and floats are not upcast to bool). */
function validateBool(v: unknown, name: string, isFloat = false): void {
  if (typeof v !== 'boolean')
    throw new PyException(
      'TypeError',
      `Parameter '${name}' is of type '${pyTypeName(v, isFloat)}', but expected '<class 'bool'>'.`,
    );
}

/** validators.validate_type for int / float: bool passes both, int passes float, float never passes int. */
function validateNumber(v: unknown, name: string, type: 'int' | 'float', isFloat: boolean): void {
  const ok = typeof v === 'boolean' || (typeof v === 'number' && (type === 'float' || !isFloat));
  if (!ok)
    throw new PyException(
      'TypeError',
      `Parameter '${name}' is of type '${pyTypeName(v, isFloat)}', but expected '<class '${type}'>'.`,
    );
}

type BoolSetting = 'cellular' | 'wifi' | 'location_service' | 'low_battery_mode';

function getBool(ctx: SandboxContext, setting: BoolSetting): boolean {
  return ctx.getDatabase('SETTING')[0][setting] as boolean;
}

/** setting.set_boolean_settings. */
function setBool(ctx: SandboxContext, setting: BoolSetting, on: boolean, isFloat = false): void {
  validateBool(on, 'on', isFloat);
  const rows = ctx.getDatabase('SETTING');
  if (Boolean(rows[0][setting]) === on)
    throw new PyException('ValueError', `${setting} already ${on ? 'enabled' : 'disabled'}`);
  ctx.updateDatabase(
    'SETTING',
    rows.map((r) => ({ ...r, [setting]: !r[setting] })),
  );
}

const ON: Param[] = [{ name: 'on', type: 'bool' }];

function setter(setting: 'cellular' | 'wifi' | 'location_service', refusal: string, validateFirst: boolean): ToolDef {
  return {
    params: ON,
    run: (ctx, { on }, floats) => {
      // set_location_service_status checks low battery before validating `on` (upstream order).
      if (validateFirst) validateBool(on, 'on', floats.has('on'));
      if (pyTruthy(on) && getBool(ctx, 'low_battery_mode')) throw new PyException('PermissionError', refusal);
      setBool(ctx, setting, on as boolean, floats.has('on'));
      return null;
    },
  };
}

// ---- Python datetime on a naive local clock (UTC, as in the extraction): whole seconds + microseconds.

interface PyDateTime {
  secs: number;
  us: number;
}
/** datetime.min and datetime.max (year 1 .. 9999) as POSIX seconds. */
const MIN_SECS = -62135596800;
const MAX_SECS = 253402300799;

function roundHalfEven(x: number): number {
  const r = Math.round(x);
  return Math.abs(x % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/** datetime.fromtimestamp: microseconds rounded half to even (CPython's _PyTime_ROUND_HALF_EVEN). */
function fromTimestamp(t: number): PyDateTime {
  if (!Number.isFinite(t) || Math.abs(t) > 8.64e12)
    throw new PyException('OverflowError', 'timestamp out of range for platform time_t');
  let secs = Math.trunc(t);
  let us = roundHalfEven((t - secs) * 1e6);
  if (us >= 1e6) ((us -= 1e6), (secs += 1));
  if (us < 0) ((us += 1e6), (secs -= 1));
  if (secs < MIN_SECS || secs > MAX_SECS)
    throw new PyException('ValueError', `year ${new Date(secs * 1000).getUTCFullYear()} is out of range`);
  return { secs, us };
}

const fields = (dt: PyDateTime) => utcFields(dt.secs);

/** datetime.timestamp() of a naive datetime: mktime's whole seconds plus microsecond / 1e6. */
const toTimestamp = (dt: PyDateTime): number => dt.secs + dt.us / 1e6;

/** datetime.datetime(year, month, day, hour, minute, second): its range checks, in its order. */
function makeDateTime(y: number, mo: number, d: number, h: number, mi: number, s: number): PyDateTime {
  if (y < 1 || y > 9999) throw new PyException('ValueError', `year ${y} is out of range`);
  if (mo < 1 || mo > 12) throw new PyException('ValueError', 'month must be in 1..12');
  const days =
    new Date(Date.UTC(2000, mo, 0)).getUTCDate() -
    (mo === 2 && !(y % 4 === 0 && (y % 100 !== 0 || y % 400 === 0)) ? 1 : 0);
  if (d < 1 || d > days) throw new PyException('ValueError', 'day is out of range for month');
  if (h < 0 || h > 23) throw new PyException('ValueError', 'hour must be in 0..23');
  if (mi < 0 || mi > 59) throw new PyException('ValueError', 'minute must be in 0..59');
  if (s < 0 || s > 59) throw new PyException('ValueError', 'second must be in 0..59');
  const date = new Date(0);
  date.setUTCFullYear(y, mo - 1, d);
  date.setUTCHours(h, mi, s, 0);
  return { secs: date.getTime() / 1000, us: 0 };
}

/** validators.validate_timestamp: a float between 1980-01-01 and 2050-01-01 (upstream's constants). */
function validateTimestamp(v: unknown, name: string, isFloat: boolean): void {
  validateNumber(v, name, 'float', isFloat);
  const x = Number(v);
  if (x < 315529200.0)
    throw new PyException('ValueError', `Parameter '${name}' is smaller than its valid range minimum of 315529200.0.`);
  if (x > 2524604400.0)
    throw new PyException('ValueError', `Parameter '${name}' is larger than its valid range maximum of 2524604400.0.`);
}

/** The frozen "now" of the data (2024-08-05 12:00:00, local = UTC). */
export const FROZEN_NOW = 1722859200;

/** repr() of a parameter's annotation, as validate_type's message prints it. */
function annotation(p: Param): string {
  if (p.default === NOT_GIVEN)
    return `typing.Union[${p.type}, ${p.optional ? 'NoneType, ' : ''}tool_sandbox.common.utils.NotGiven]`;
  return p.optional ? `typing.Optional[${p.type}]` : `<class '${p.type}'>`;
}

/** validators.validate_type of one argument against its parameter's annotation. */
function validateParam(p: Param, v: unknown, isFloat: boolean): void {
  if (v === NOT_GIVEN && p.default === NOT_GIVEN) return;
  if (v === null && p.optional) return;
  const ok =
    p.type === 'str'
      ? typeof v === 'string'
      : p.type === 'bool'
        ? typeof v === 'boolean'
        : typeof v === 'boolean' || (typeof v === 'number' && (p.type === 'float' || !isFloat));
  if (!ok)
    throw new PyException(
      'TypeError',
      `Parameter '${p.name}' is of type '${pyTypeName(v, isFloat)}', but expected '${annotation(p)}'.`,
    );
}

/** typechecked: every bound argument (defaults included) against its annotation, in signature order. */
function typecheck(params: Param[], args: Args, floats: Set<string>): void {
  for (const [k, v] of Object.entries(args))
    validateParam(
      params.find((x) => x.name === k)!,
      v,
      floats.has(k),
    );
}

const F = (name: string): Param => ({ name, type: 'float' });
const I = (name: string, dflt?: number): Param =>
  dflt === undefined ? { name, type: 'int' } : { name, type: 'int', default: dflt };
const num = (v: unknown): number => Number(v);
const floatRepr = (r: unknown): string => pyFloatRepr(r as number);

function typed(
  params: Param[],
  run: (args: Args, floats: Set<string>) => unknown,
  repr?: (r: unknown) => string,
): ToolDef {
  return {
    params,
    run: (_ctx, args, floats) => (typecheck(params, args, floats), run(args, floats)),
    ...(repr ? { repr } : {}),
  };
}

const UTILITIES: Record<string, ToolDef> = {
  get_current_timestamp: typed([], () => FROZEN_NOW, floatRepr),
  timestamp_to_datetime_info: typed([F('timestamp')], ({ timestamp }, fl) => {
    validateTimestamp(timestamp, 'timestamp', fl.has('timestamp'));
    return fields(fromTimestamp(num(timestamp)));
  }),
  datetime_info_to_timestamp: typed(
    ['year', 'month', 'day', 'hour', 'minute', 'second'].map((n) => I(n)),
    (a) => toTimestamp(makeDateTime(num(a.year), num(a.month), num(a.day), num(a.hour), num(a.minute), num(a.second))),
    floatRepr,
  ),
  shift_timestamp: typed(
    [F('timestamp'), I('weeks', 0), I('days', 0), I('hours', 0), I('minutes', 0), I('seconds', 0)],
    (a, fl) => {
      validateTimestamp(a.timestamp, 'timestamp', fl.has('timestamp'));
      const dt = fromTimestamp(num(a.timestamp));
      const shift =
        num(a.weeks) * 604800 + num(a.days) * 86400 + num(a.hours) * 3600 + num(a.minutes) * 60 + num(a.seconds);
      const secs = dt.secs + shift;
      if (secs < MIN_SECS || secs > MAX_SECS) throw new PyException('OverflowError', 'date value out of range');
      return toTimestamp({ secs, us: dt.us });
    },
    floatRepr,
  ),
  timestamp_diff: typed([F('timestamp_0'), F('timestamp_1')], (a, fl) => {
    validateTimestamp(a.timestamp_0, 'timestamp_0', fl.has('timestamp_0'));
    validateTimestamp(a.timestamp_1, 'timestamp_1', fl.has('timestamp_1'));
    const t0 = fromTimestamp(num(a.timestamp_0));
    const t1 = fromTimestamp(num(a.timestamp_1));
    const us = (t1.secs - t0.secs) * 1e6 + (t1.us - t0.us);
    const days = Math.floor(us / 864e8);
    return { days, seconds: Math.floor((us - days * 864e8) / 1e6) };
  }),
  seconds_to_hours_minutes_seconds: typed([F('seconds')], ({ seconds }) => {
    const f = fields(fromTimestamp(num(seconds)));
    return { hour: f.hour, minute: f.minute, second: f.second };
  }),
};

// ---- Contacts, messaging, reminders (tools/contact.py, messaging.py, reminder.py).

const S = (name: string, extra: Partial<Param> = {}): Param => ({ name, type: 'str', ...extra });
/** A search / modify field: Union[T, NotGiven] = NOT_GIVEN. */
const G = (name: string, type: Param['type'], optional = false): Param => ({
  name,
  type,
  default: NOT_GIVEN,
  optional,
});

/** validate_phone_number: phonenumbers.parse, its exception as the console prints it. */
function checkPhone(v: unknown): void {
  if (v === NOT_GIVEN) return;
  try {
    validatePhoneNumber(v);
  } catch (e) {
    if (e instanceof NumberParseException)
      throw new PyException('phonenumbers.phonenumberutil.NumberParseException', e.message);
    if (e instanceof TypeError) throw new PyException('TypeError', e.message);
    throw e;
  }
}

/** validate_type_range: the type check, then the range of a number (bool counts as 0 / 1, NotGiven and None skip it). */
function checkRange(p: Param, v: unknown, isFloat: boolean, min: number, max: number): void {
  validateParam(p, v, isFloat);
  if (typeof v !== 'number' && typeof v !== 'boolean') return;
  const x = Number(v);
  const f = (b: number) => pyFloatRepr(b);
  if (x < min)
    throw new PyException('ValueError', `Parameter '${p.name}' is smaller than its valid range minimum of ${f(min)}.`);
  if (x > max)
    throw new PyException('ValueError', `Parameter '${p.name}' is larger than its valid range maximum of ${f(max)}.`);
}
const TS_RANGE: [number, number] = [315529200.0, 2524604400.0];

/** Range checks named by parameter, in the tool's order (validate_timestamp / validate_latitude / validate_longitude). */
function checkRanges(params: Param[], args: Args, floats: Set<string>, names: string[]): void {
  for (const n of names) {
    const [min, max] = n.includes('timestamp') ? TS_RANGE : n.startsWith('lat') ? [-90.0, 90.0] : [-180.0, 180.0];
    checkRange(
      params.find((p) => p.name === n)!,
      args[n],
      floats.has(n),
      min,
      max,
    );
  }
}

type Filter = [column: string, value: unknown, kind: 'exact' | 'fuzzy' | 'gte' | 'lte', threshold?: number];

/** common/utils.filter_dataframe: at least one criterion, applied in order; a fuzzy one keeps process.extract's top 5, best first. */
function filterRows(rows: Row[], criteria: Filter[]): Row[] {
  if (criteria.every((c) => c[1] === NOT_GIVEN)) {
    throw new PyException(
      'ValueError',
      `No search criteria are given. At least one search criteria should be provided among (${criteria.map((c) => pyStrRepr(c[0])).join(', ')})`,
    );
  }
  for (const [col, value, kind, threshold] of criteria) {
    if (value === NOT_GIVEN) continue;
    if (kind === 'fuzzy') {
      if (value !== null && typeof value !== 'string') throw new PyException('TypeError', 'sentence must be a String');
      rows = extract(
        value,
        rows.map((r) => r[col] as string | null),
        threshold!,
      ).map(([, i]) => rows[i]);
      continue;
    }
    // polars comparisons: a null cell or a None value never matches.
    rows = rows.filter((r) => {
      const cell = r[col];
      if (cell === null || value === null) return false;
      if (kind === 'exact')
        return cell === value || (typeof cell === 'number' && typeof value === 'boolean' && cell === Number(value));
      return kind === 'gte' ? (cell as number) >= Number(value) : (cell as number) <= Number(value);
    });
  }
  return rows;
}

/** repr() of database rows: the Float64 columns as Python floats. */
function rowsRepr(ns: Namespace): (r: unknown) => string {
  const floats = new Set(SCHEMAS[ns].floats);
  return (r) =>
    `[${(r as Row[])
      .map(
        (row) =>
          `{${Object.entries(row)
            .map(([k, v]) => `${pyStrRepr(k)}: ${typeof v === 'number' && floats.has(k) ? pyFloatRepr(v) : pyRepr(v)}`)
            .join(', ')}}`,
      )
      .join(', ')}]`;
}

/** The value a Float64 column holds (an int argument is stored as float; polars keeps it a number here). */
const NOW_TS = (): number => FROZEN_NOW;

/**
 * remove_from_database's NoDataError: upstream prints the polars predicate's repr, whose text is cut
 * at 30 characters and ends in the expression's memory address (not reproducible; written 0x0 here).
 */
function removeRows(ctx: SandboxContext, ns: Namespace, col: string, id: unknown): void {
  try {
    ctx.removeFromDatabase(ns, (r) => r[col] === id);
  } catch (e) {
    if (!(e instanceof NoMatchingRows)) throw e;
    const text = `[([(col("${col}")) == (String(${String(id)}))]) & ([(col("sandbox_message_index")) == (dyn int: 0)])]`;
    throw new PyException(
      'polars.exceptions.NoDataError',
      `No db entry matching predicate=<Expr ['${Array.from(text).slice(0, 30).join('')}…'] at 0x0> found`,
    );
  }
}

/** The one row with this id, or polars' NoDataError / DuplicateError as modify_* raise them. */
function uniqueRow(ctx: SandboxContext, ns: Namespace, col: string, id: string): Row {
  const hits = ctx.getDatabase(ns).filter((r) => r[col] === id);
  if (!hits.length)
    throw new PyException('polars.exceptions.NoDataError', `No db entry matching ${col}=${pyStrRepr(id)} found`);
  if (hits.length > 1)
    throw new PyException('polars.exceptions.DuplicateError', `More than 1 entry with ${col}=${pyStrRepr(id)} found`);
  return hits[0];
}

function searchContacts(ctx: SandboxContext, a: Args): Row[] {
  checkPhone(a.phone_number);
  return filterRows(ctx.getDatabase('CONTACT'), [
    ['person_id', a.person_id, 'exact'],
    ['name', a.name, 'fuzzy', 90],
    ['phone_number', a.phone_number, 'exact'],
    ['relationship', a.relationship, 'fuzzy', 90],
    ['is_self', a.is_self, 'exact'],
  ]);
}
const SELF_ONLY: Args = {
  person_id: NOT_GIVEN,
  name: NOT_GIVEN,
  phone_number: NOT_GIVEN,
  relationship: NOT_GIVEN,
  is_self: true,
};
const SELF_EXISTS = 'Self entry already exists. Cannot add another one.';

const CONTACT_FIELDS = ['name', 'phone_number', 'relationship', 'is_self'];
const REMINDER_FIELDS = ['content', 'reminder_timestamp', 'latitude', 'longitude'];
const noUpdate = (fields: string[], what: string) =>
  new PyException(
    'ValueError',
    `No update information given. At least one new field should be provided among [${fields.join(', ')}] in order to modify ${what}`,
  );

const MESSAGE_SEARCH: Param[] = [
  G('message_id', 'str'),
  G('sender_person_id', 'str'),
  G('sender_phone_number', 'str'),
  G('recipient_person_id', 'str'),
  G('recipient_phone_number', 'str'),
  G('content', 'str'),
  G('creation_timestamp_lowerbound', 'float'),
  G('creation_timestamp_upperbound', 'float'),
];
const REMINDER_SEARCH: Param[] = [
  G('reminder_id', 'str'),
  G('content', 'str'),
  G('creation_timestamp_lowerbound', 'float'),
  G('creation_timestamp_upperbound', 'float'),
  G('reminder_timestamp_lowerbound', 'float'),
  G('reminder_timestamp_upperbound', 'float'),
  G('latitude', 'float'),
  G('longitude', 'float'),
];
const ADD_REMINDER: Param[] = [
  S('content'),
  F('reminder_timestamp'),
  { name: 'latitude', type: 'float', optional: true, default: null },
  { name: 'longitude', type: 'float', optional: true, default: null },
];
const MODIFY_REMINDER: Param[] = [
  S('reminder_id'),
  G('content', 'str'),
  G('reminder_timestamp', 'float'),
  G('latitude', 'float', true),
  G('longitude', 'float', true),
];

const CRM: Record<string, ToolDef> = {
  add_contact: {
    params: [
      S('name'),
      S('phone_number'),
      S('relationship', { optional: true, default: null }),
      { name: 'is_self', type: 'bool', default: false },
    ],
    run: (ctx, a, fl) => {
      typecheck(CRM.add_contact.params, a, fl);
      checkPhone(a.phone_number);
      const personId = ctx.newId();
      if (a.is_self && searchContacts(ctx, SELF_ONLY).length)
        throw new PyException('polars.exceptions.DuplicateError', SELF_EXISTS);
      ctx.addToDatabase('CONTACT', [
        {
          person_id: personId,
          name: a.name,
          phone_number: a.phone_number,
          relationship: a.relationship,
          is_self: a.is_self,
        },
      ]);
      return personId;
    },
  },
  modify_contact: {
    params: [S('person_id'), ...CONTACT_FIELDS.map((n) => G(n, n === 'is_self' ? 'bool' : 'str'))],
    run: (ctx, a, fl) => {
      typecheck(CRM.modify_contact.params, a, fl);
      if (CONTACT_FIELDS.every((k) => a[k] === NOT_GIVEN)) throw noUpdate(CONTACT_FIELDS, 'contact');
      checkPhone(a.phone_number);
      const self = searchContacts(ctx, SELF_ONLY);
      if (self.length && a.is_self === true && self[0].person_id !== a.person_id)
        throw new PyException('polars.exceptions.DuplicateError', SELF_EXISTS);
      const row = uniqueRow(ctx, 'CONTACT', 'person_id', a.person_id as string);
      for (const k of CONTACT_FIELDS) if (a[k] !== NOT_GIVEN) row[k] = a[k];
      ctx.removeFromDatabase('CONTACT', (r) => r.person_id === a.person_id);
      ctx.addToDatabase('CONTACT', [row]);
      return null;
    },
  },
  remove_contact: {
    params: [S('person_id')],
    run: (ctx, a, fl) => (
      typecheck(CRM.remove_contact.params, a, fl),
      removeRows(ctx, 'CONTACT', 'person_id', a.person_id),
      null
    ),
  },
  // Not @typechecked upstream: a wrong type reaches the filters.
  search_contacts: {
    params: [G('person_id', 'str'), ...CONTACT_FIELDS.map((n) => G(n, n === 'is_self' ? 'bool' : 'str'))],
    run: (ctx, a) => searchContacts(ctx, a),
    repr: rowsRepr('CONTACT'),
  },
  send_message_with_phone_number: {
    params: [S('phone_number'), S('content')],
    run: (ctx, a, fl) => {
      typecheck(CRM.send_message_with_phone_number.params, a, fl);
      checkPhone(a.phone_number);
      if (!getBool(ctx, 'cellular')) throw new PyException('ConnectionError', 'Cellular service is not enabled');
      const messageId = ctx.newId();
      const self = searchContacts(ctx, SELF_ONLY);
      if (self.length !== 1)
        throw new PyException(
          'polars.exceptions.DuplicateError',
          `1 and only 1 self entry should exist in contacts database, instead found ${self.length}`,
        );
      const recipient = searchContacts(ctx, { ...SELF_ONLY, is_self: NOT_GIVEN, phone_number: a.phone_number });
      ctx.addToDatabase('MESSAGING', [
        {
          message_id: messageId,
          sender_person_id: self[0].person_id,
          sender_phone_number: self[0].phone_number,
          recipient_person_id: recipient.length ? recipient[0].person_id : null,
          recipient_phone_number: a.phone_number,
          content: a.content,
          creation_timestamp: NOW_TS(),
        },
      ]);
      return messageId;
    },
  },
  search_messages: {
    params: MESSAGE_SEARCH,
    run: (ctx, a, fl) => {
      typecheck(MESSAGE_SEARCH, a, fl);
      checkPhone(a.sender_phone_number);
      checkPhone(a.recipient_phone_number);
      checkRanges(MESSAGE_SEARCH, a, fl, ['creation_timestamp_lowerbound', 'creation_timestamp_upperbound']);
      return filterRows(ctx.getDatabase('MESSAGING'), [
        ['message_id', a.message_id, 'exact'],
        ['sender_person_id', a.sender_person_id, 'exact'],
        ['sender_phone_number', a.sender_phone_number, 'exact'],
        ['recipient_person_id', a.recipient_person_id, 'exact'],
        ['recipient_phone_number', a.recipient_phone_number, 'exact'],
        ['content', a.content, 'fuzzy', 50],
        ['creation_timestamp', a.creation_timestamp_lowerbound, 'gte'],
        ['creation_timestamp', a.creation_timestamp_upperbound, 'lte'],
      ]);
    },
    repr: rowsRepr('MESSAGING'),
  },
  add_reminder: {
    params: ADD_REMINDER,
    run: (ctx, a, fl) => {
      typecheck(ADD_REMINDER, a, fl);
      checkRanges(ADD_REMINDER, a, fl, ['reminder_timestamp', 'latitude', 'longitude']);
      const reminderId = ctx.newId();
      ctx.addToDatabase('REMINDER', [
        {
          reminder_id: reminderId,
          content: a.content,
          creation_timestamp: NOW_TS(),
          reminder_timestamp: Number(a.reminder_timestamp),
          latitude: a.latitude === null ? null : Number(a.latitude),
          longitude: a.longitude === null ? null : Number(a.longitude),
        },
      ]);
      return reminderId;
    },
  },
  modify_reminder: {
    params: MODIFY_REMINDER,
    run: (ctx, a, fl) => {
      typecheck(MODIFY_REMINDER, a, fl);
      checkRanges(MODIFY_REMINDER, a, fl, ['reminder_timestamp', 'latitude', 'longitude']);
      if (REMINDER_FIELDS.every((k) => a[k] === NOT_GIVEN)) throw noUpdate(REMINDER_FIELDS, 'reminder');
      const row = uniqueRow(ctx, 'REMINDER', 'reminder_id', a.reminder_id as string);
      // The creation timestamp is always renewed (upstream's loop lists it with datetime.now()).
      const updates: Args = {
        content: a.content,
        creation_timestamp: NOW_TS(),
        reminder_timestamp: a.reminder_timestamp,
        latitude: a.latitude,
        longitude: a.longitude,
      };
      for (const [k, v] of Object.entries(updates))
        if (v !== NOT_GIVEN) row[k] = typeof v === 'boolean' ? Number(v) : v;
      ctx.removeFromDatabase('REMINDER', (r) => r.reminder_id === a.reminder_id);
      ctx.addToDatabase('REMINDER', [row]);
      return null;
    },
  },
  search_reminder: {
    params: REMINDER_SEARCH,
    run: (ctx, a, fl) => {
      typecheck(REMINDER_SEARCH, a, fl);
      checkRanges(REMINDER_SEARCH, a, fl, [
        'creation_timestamp_lowerbound',
        'creation_timestamp_upperbound',
        'reminder_timestamp_lowerbound',
        'reminder_timestamp_upperbound',
        'latitude',
        'longitude',
      ]);
      return filterRows(ctx.getDatabase('REMINDER'), [
        ['reminder_id', a.reminder_id, 'exact'],
        ['content', a.content, 'fuzzy', 50],
        ['creation_timestamp', a.creation_timestamp_lowerbound, 'gte'],
        ['creation_timestamp', a.creation_timestamp_upperbound, 'lte'],
        ['reminder_timestamp', a.reminder_timestamp_lowerbound, 'gte'],
        ['reminder_timestamp', a.reminder_timestamp_upperbound, 'lte'],
        ['latitude', a.latitude, 'exact'],
        ['longitude', a.longitude, 'exact'],
      ]);
    },
    repr: rowsRepr('REMINDER'),
  },
  remove_reminder: {
    params: [S('reminder_id')],
    run: (ctx, a, fl) => (
      typecheck(CRM.remove_reminder.params, a, fl),
      removeRows(ctx, 'REMINDER', 'reminder_id', a.reminder_id),
      null
    ),
  },
};

/** utilities.search_holiday: the best partial_ratio match among the year's US holidays, above 90. */
const SEARCH_HOLIDAY: Param[] = [S('holiday_name'), { name: 'year', type: 'int', optional: true, default: null }];
UTILITIES.search_holiday = {
  params: SEARCH_HOLIDAY,
  run: (ctx, a, fl) => {
    typecheck(SEARCH_HOLIDAY, a, fl);
    // A tool "backed by web services" upstream: it needs wifi.
    if (!getBool(ctx, 'wifi')) throw new PyException('ConnectionError', 'Wifi is not enabled');
    const year = a.year === null ? new Date(FROZEN_NOW * 1000).getUTCFullYear() : Number(a.year);
    let days: [string, string][];
    try {
      days = usHolidays(year);
    } catch (e) {
      if (e instanceof RangeError) throw new PyException('ValueError', e.message);
      throw e;
    }
    const query = defaultProcess(a.holiday_name as string);
    // sorted(reverse=True) over (score, date, name) tuples: a tie in score goes to the later date, so
    // "Independence Day" finds "Independence Day (observed)" when there is one.
    const scored = days.map(([date, name]) => [partialRatio(query, defaultProcess(name)), date, name] as const);
    scored.sort(
      (x, y) => y[0] - x[0] || (x[1] < y[1] ? 1 : x[1] > y[1] ? -1 : 0) || (x[2] < y[2] ? 1 : x[2] > y[2] ? -1 : 0),
    );
    if (!scored.length || !(scored[0][0] > 90)) return null;
    const [y, m, d] = scored[0][1].split('-').map(Number);
    return Date.UTC(y, m - 1, d) / 1000;
  },
  repr: (r) => (r === null ? 'None' : pyFloatRepr(r as number)),
};

/** utilities.calculate_lat_lon_distance: the four range checks (latitudes first), then geopy's geodesic in km. */
const LAT_LON: Param[] = ['latitude_0', 'longitude_0', 'latitude_1', 'longitude_1'].map(F);
UTILITIES.calculate_lat_lon_distance = typed(
  LAT_LON,
  (a, fl) => {
    checkRanges(LAT_LON, a, fl, ['latitude_0', 'latitude_1', 'longitude_0', 'longitude_1']);
    return geodesicKm(num(a.latitude_0), num(a.longitude_0), num(a.latitude_1), num(a.longitude_1));
  },
  floatRepr,
);

/** A magnitude with its Python type (int / float), serialised as a plain JSON number in traces. */
class Magnitude {
  constructor(readonly py: PyNum) {}
  toJSON(): number {
    return Number(this.py);
  }
}

/** utilities.unit_conversion: pint's conversion (pint.ts), pint's exceptions as the console prints them. */
UTILITIES.unit_conversion = typed(
  [F('amount'), S('from_unit'), S('to_unit')],
  (a, fl) => {
    const amount = a.amount as number | boolean;
    const py: PyNum | boolean = typeof amount === 'boolean' || fl.has('amount') ? amount : BigInt(amount);
    try {
      return new Magnitude(unitConversion(py, a.from_unit as string, a.to_unit as string));
    } catch (e) {
      if (e instanceof PintException) throw new PyException(e.pyType, e.message);
      throw e;
    }
  },
  (r) => magnitudeRepr((r as Magnitude).py),
);

const TOOLS: Record<string, ToolDef> = {
  set_low_battery_mode_status: {
    params: ON,
    run: (ctx, { on }, floats) => {
      validateBool(on, 'on', floats.has('on'));
      setBool(ctx, 'low_battery_mode', on as boolean);
      if (on) {
        for (const s of ['cellular', 'wifi', 'location_service'] as const) {
          try {
            setBool(ctx, s, false);
          } catch (e) {
            if (!(e instanceof PyException && e.pyType === 'ValueError')) throw e;
          }
        }
      }
      return null;
    },
  },
  get_low_battery_mode_status: { params: [], run: (ctx) => getBool(ctx, 'low_battery_mode') },
  set_location_service_status: setter(
    'location_service',
    'Location service cannot be turned on in low battery mode',
    false,
  ),
  get_location_service_status: { params: [], run: (ctx) => getBool(ctx, 'location_service') },
  set_cellular_service_status: setter('cellular', 'Cellular service cannot be turned on in low battery mode', true),
  get_cellular_service_status: { params: [], run: (ctx) => getBool(ctx, 'cellular') },
  set_wifi_status: setter('wifi', 'Wifi cannot be turned on in low battery mode', true),
  get_wifi_status: { params: [], run: (ctx) => getBool(ctx, 'wifi') },
  get_current_location: {
    params: [],
    run: (ctx) => {
      if (!getBool(ctx, 'location_service'))
        throw new PyException('PermissionError', 'Location service is not enabled.');
      const row = ctx.getDatabase('SETTING')[0];
      return { latitude: row.latitude, longitude: row.longitude };
    },
    repr: (r) => {
      const { latitude, longitude } = r as { latitude: number; longitude: number };
      return `{'latitude': ${pyFloatRepr(latitude)}, 'longitude': ${pyFloatRepr(longitude)}}`;
    },
  },
  end_conversation: {
    params: [],
    run: (ctx) => {
      const rows = ctx.getDatabase('SANDBOX');
      if (!rows.at(-1)!.conversation_active) throw new PyException('ValueError', 'Conversation already ended');
      ctx.updateDatabase(
        'SANDBOX',
        rows.map((r) => ({ ...r, conversation_active: !r.conversation_active })),
      );
      return null;
    },
  },
};

Object.assign(TOOLS, UTILITIES, CRM);

export const PORTED_TOOLS = Object.keys(TOOLS);

export interface ToolOutcome {
  /** What the execution environment answers: repr(result), or "ExceptionType: message". */
  content: string;
  /** The exception line when the call failed, else null (the SANDBOX column tool_call_exception). */
  exception: string | null;
  /** The tool trace (JSON) of a successful call, else null. */
  trace: string | null;
}

/**
 * The agent's JSON arguments as Python's json.loads reads them: the object, and the names of the
 * top-level values written as float literals (`1.0`, `1e3`), which Python types as float.
 */
export function parseToolArguments(raw: string): ToolArgs {
  const args = JSON.parse(raw) as unknown;
  if (args === null || typeof args !== 'object' || Array.isArray(args))
    throw new Error(`arguments: expected a JSON object, got ${raw.slice(0, 80)}`);
  const floats = new Set<string>();
  // Walk the top level: a key string, ':', then the value's literal up to the next ',' or '}' at depth 1.
  let depth = 0;
  let key: string | undefined;
  let valueStart = -1;
  for (let i = 0; i < raw.length; i++) {
    const c = raw[i];
    if (c === '"') {
      let j = i + 1;
      while (raw[j] !== '"') j += raw[j] === '\\' ? 2 : 1;
      if (depth === 1 && valueStart < 0) key = JSON.parse(raw.slice(i, j + 1)) as string;
      i = j;
    } else if (c === '{' || c === '[') depth++;
    else if (c === '}' || c === ']' || c === ',') {
      if (depth === 1 && valueStart >= 0 && key !== undefined) {
        if (/^\s*-?\d+(\.\d+[eE][+-]?\d+|\.\d+|[eE][+-]?\d+)\s*$/.test(raw.slice(valueStart, i))) floats.add(key);
        valueStart = -1;
        key = undefined;
      }
      if (c !== ',') depth--;
    } else if (c === ':' && depth === 1) valueStart = i + 1;
  }
  return { args: args as Args, floats };
}

/** Calls `name(**args)` against the world's current state, as the execution environment would. */
export function callTool(ctx: SandboxContext, name: string, args: Args, floats: Set<string> = new Set()): ToolOutcome {
  const tool = TOOLS[name];
  if (!tool) throw new Error(`tool '${name}' is not ported (ported: ${PORTED_TOOLS.join(', ')})`);
  try {
    // decorator.decorate binds the call with inspect.Signature.bind and applies the defaults: a
    // missing argument is reported first, then an unexpected one (bind's messages); the tool, its
    // type checks and its trace then see every parameter, in signature order.
    const missing = tool.params.find((p) => !('default' in p) && !(p.name in args));
    if (missing) throw new PyException('TypeError', `missing a required argument: '${missing.name}'`);
    const unknown = Object.keys(args).find((k) => !tool.params.some((p) => p.name === k));
    if (unknown) throw new PyException('TypeError', `got an unexpected keyword argument '${unknown}'`);
    const bound: Args = Object.fromEntries(tool.params.map((p) => [p.name, p.name in args ? args[p.name] : p.default]));
    const result = tool.run(ctx, bound, floats);
    const traced = Object.fromEntries(Object.entries(bound).filter(([, v]) => v !== NOT_GIVEN));
    return {
      content: tool.repr ? tool.repr(result) : pyRepr(result),
      exception: null,
      trace: JSON.stringify({ tool_name: name, arguments: traced, result }),
    };
  } catch (e) {
    if (!(e instanceof PyException)) throw e;
    // Python prints a bare class name for an exception whose str() is empty (AssertionError).
    const line = e.message ? `${e.pyType}: ${e.message}` : e.pyType;
    return { content: line, exception: line, trace: null };
  }
}
