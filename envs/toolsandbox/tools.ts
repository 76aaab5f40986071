/**
 * ToolSandbox tools that run against the world state, with upstream's outputs: a call's message is
 * `print(repr(result))` of the Python tool, or the last line of its traceback (`ValueError: wifi
 * already enabled`); a successful call leaves a tool trace `{"tool_name","arguments","result"}`
 * (tool_sandbox/common/utils.py register_as_tool / add_tool_trace, roles/execution_environment.py).
 * Ported so far: the settings tools (tools/setting.py, with their low-battery dependency errors), the
 * user's end_conversation (tools/user_tools.py) and the timestamp utilities (tools/utilities.py, local
 * time = UTC as in the extraction, the clock frozen as in data/toolsandbox/SOURCE.md). The other tools
 * need third-party semantics (rapidfuzz WRatio, phonenumbers, pint, holidays, geopy) not ported yet.
 * Derived from apple/ToolSandbox (Copyright (C) 2024 Apple Inc.; licence in data/toolsandbox/LICENSE).
 */
import { pyFloatRepr, pyRepr } from '../tau2/python-format.js';
import type { SandboxContext } from './context.js';

/** A Python exception raised by a tool: its class name and str(). */
export class PyException extends Error {
  constructor(readonly pyType: string, message: string) {
    super(message);
  }
}

type Args = Record<string, unknown>;
interface Param {
  name: string;
  type: 'bool' | 'float' | 'int';
  /** The Python default; a parameter without one is required. */
  default?: unknown;
}
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
  if (typeof v !== 'boolean') throw new PyException('TypeError', `Parameter '${name}' is of type '${pyTypeName(v, isFloat)}', but expected '<class 'bool'>'.`);
}

/** validators.validate_type for int / float: bool passes both, int passes float, float never passes int. */
function validateNumber(v: unknown, name: string, type: 'int' | 'float', isFloat: boolean): void {
  const ok = typeof v === 'boolean' || (typeof v === 'number' && (type === 'float' || !isFloat));
  if (!ok) throw new PyException('TypeError', `Parameter '${name}' is of type '${pyTypeName(v, isFloat)}', but expected '<class '${type}'>'.`);
}

type BoolSetting = 'cellular' | 'wifi' | 'location_service' | 'low_battery_mode';

function getBool(ctx: SandboxContext, setting: BoolSetting): boolean {
  return ctx.getDatabase('SETTING')[0][setting] as boolean;
}

/** setting.set_boolean_settings. */
function setBool(ctx: SandboxContext, setting: BoolSetting, on: boolean, isFloat = false): void {
  validateBool(on, 'on', isFloat);
  const rows = ctx.getDatabase('SETTING');
  if (Boolean(rows[0][setting]) === on) throw new PyException('ValueError', `${setting} already ${on ? 'enabled' : 'disabled'}`);
  ctx.updateDatabase('SETTING', rows.map((r) => ({ ...r, [setting]: !r[setting] })));
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
  if (!Number.isFinite(t) || Math.abs(t) > 8.64e12) throw new PyException('OverflowError', 'timestamp out of range for platform time_t');
  let secs = Math.trunc(t);
  let us = roundHalfEven((t - secs) * 1e6);
  if (us >= 1e6) (us -= 1e6), (secs += 1);
  if (us < 0) (us += 1e6), (secs -= 1);
  if (secs < MIN_SECS || secs > MAX_SECS) throw new PyException('ValueError', `year ${new Date(secs * 1000).getUTCFullYear()} is out of range`);
  return { secs, us };
}

function fields(dt: PyDateTime) {
  const d = new Date(dt.secs * 1000);
  return {
    year: d.getUTCFullYear(), month: d.getUTCMonth() + 1, day: d.getUTCDate(),
    hour: d.getUTCHours(), minute: d.getUTCMinutes(), second: d.getUTCSeconds(), isoweekday: d.getUTCDay() || 7,
  };
}

/** datetime.timestamp() of a naive datetime: mktime's whole seconds plus microsecond / 1e6. */
const toTimestamp = (dt: PyDateTime): number => dt.secs + dt.us / 1e6;

/** datetime.datetime(year, month, day, hour, minute, second): its range checks, in its order. */
function makeDateTime(y: number, mo: number, d: number, h: number, mi: number, s: number): PyDateTime {
  if (y < 1 || y > 9999) throw new PyException('ValueError', `year ${y} is out of range`);
  if (mo < 1 || mo > 12) throw new PyException('ValueError', 'month must be in 1..12');
  const days = new Date(Date.UTC(2000, mo, 0)).getUTCDate() - (mo === 2 && !(y % 4 === 0 && (y % 100 !== 0 || y % 400 === 0)) ? 1 : 0);
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
  if (x < 315529200.0) throw new PyException('ValueError', `Parameter '${name}' is smaller than its valid range minimum of 315529200.0.`);
  if (x > 2524604400.0) throw new PyException('ValueError', `Parameter '${name}' is larger than its valid range maximum of 2524604400.0.`);
}

/** The frozen "now" of the data (2024-08-05 12:00:00, local = UTC). */
export const FROZEN_NOW = 1722859200;

/** typechecked: every bound argument (defaults included) against its annotation, in signature order. */
function typecheck(params: Param[], args: Args, floats: Set<string>): void {
  for (const [k, v] of Object.entries(args)) {
    const p = params.find((x) => x.name === k)!;
    if (p.type === 'bool') validateBool(v, k, floats.has(k));
    else validateNumber(v, k, p.type, floats.has(k));
  }
}

const F = (name: string): Param => ({ name, type: 'float' });
const I = (name: string, dflt?: number): Param => (dflt === undefined ? { name, type: 'int' } : { name, type: 'int', default: dflt });
const num = (v: unknown): number => Number(v);
const floatRepr = (r: unknown): string => pyFloatRepr(r as number);

function typed(params: Param[], run: (args: Args, floats: Set<string>) => unknown, repr?: (r: unknown) => string): ToolDef {
  return { params, run: (_ctx, args, floats) => (typecheck(params, args, floats), run(args, floats)), ...(repr ? { repr } : {}) };
}

const UTILITIES: Record<string, ToolDef> = {
  get_current_timestamp: typed([], () => FROZEN_NOW, floatRepr),
  timestamp_to_datetime_info: typed([F('timestamp')], ({ timestamp }, fl) => {
    validateTimestamp(timestamp, 'timestamp', fl.has('timestamp'));
    return fields(fromTimestamp(num(timestamp)));
  }),
  datetime_info_to_timestamp: typed(['year', 'month', 'day', 'hour', 'minute', 'second'].map((n) => I(n)), (a) =>
    toTimestamp(makeDateTime(num(a.year), num(a.month), num(a.day), num(a.hour), num(a.minute), num(a.second))), floatRepr),
  shift_timestamp: typed([F('timestamp'), I('weeks', 0), I('days', 0), I('hours', 0), I('minutes', 0), I('seconds', 0)], (a, fl) => {
    validateTimestamp(a.timestamp, 'timestamp', fl.has('timestamp'));
    const dt = fromTimestamp(num(a.timestamp));
    const shift = num(a.weeks) * 604800 + num(a.days) * 86400 + num(a.hours) * 3600 + num(a.minutes) * 60 + num(a.seconds);
    const secs = dt.secs + shift;
    if (secs < MIN_SECS || secs > MAX_SECS) throw new PyException('OverflowError', 'date value out of range');
    return toTimestamp({ secs, us: dt.us });
  }, floatRepr),
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
  set_location_service_status: setter('location_service', 'Location service cannot be turned on in low battery mode', false),
  get_location_service_status: { params: [], run: (ctx) => getBool(ctx, 'location_service') },
  set_cellular_service_status: setter('cellular', 'Cellular service cannot be turned on in low battery mode', true),
  get_cellular_service_status: { params: [], run: (ctx) => getBool(ctx, 'cellular') },
  set_wifi_status: setter('wifi', 'Wifi cannot be turned on in low battery mode', true),
  get_wifi_status: { params: [], run: (ctx) => getBool(ctx, 'wifi') },
  get_current_location: {
    params: [],
    run: (ctx) => {
      if (!getBool(ctx, 'location_service')) throw new PyException('PermissionError', 'Location service is not enabled.');
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
      ctx.updateDatabase('SANDBOX', rows.map((r) => ({ ...r, conversation_active: !r.conversation_active })));
      return null;
    },
  },
};

Object.assign(TOOLS, UTILITIES);

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
  if (args === null || typeof args !== 'object' || Array.isArray(args)) throw new Error(`arguments: expected a JSON object, got ${raw.slice(0, 80)}`);
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
    return { content: tool.repr ? tool.repr(result) : pyRepr(result), exception: null, trace: JSON.stringify({ tool_name: name, arguments: bound, result }) };
  } catch (e) {
    if (!(e instanceof PyException)) throw e;
    const line = `${e.pyType}: ${e.message}`;
    return { content: line, exception: line, trace: null };
  }
}
