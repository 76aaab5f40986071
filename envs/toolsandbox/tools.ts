/**
 * ToolSandbox tools that run against the world state, with upstream's outputs: a call's message is
 * `print(repr(result))` of the Python tool, or the last line of its traceback (`ValueError: wifi
 * already enabled`); a successful call leaves a tool trace `{"tool_name","arguments","result"}`
 * (tool_sandbox/common/utils.py register_as_tool / add_tool_trace, roles/execution_environment.py).
 * Ported so far: the settings tools (tools/setting.py, with their low-battery dependency errors) and
 * the user's end_conversation (tools/user_tools.py). The other modules need third-party semantics
 * (rapidfuzz WRatio, phonenumbers, pint, holidays, geopy) that are not ported yet.
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
  type: 'bool' | 'str' | 'float' | 'int';
  optional?: boolean;
}
interface ToolDef {
  params: Param[];
  run: (ctx: SandboxContext, args: Args) => unknown;
  /** repr() where the result holds Python floats (a JSON number loses the float type). */
  repr?: (result: unknown) => string;
}

/** Python truthiness (an empty list or dict is false, unlike in JavaScript). */
const pyTruthy = (v: unknown): boolean =>
  Array.isArray(v) ? v.length > 0 : v !== null && typeof v === 'object' ? Object.keys(v).length > 0 : Boolean(v);

/** Python's type(value) as validate_type prints it (JSON numbers with no fraction count as int). */
function pyTypeName(v: unknown): string {
  if (v === null) return "<class 'NoneType'>";
  if (typeof v === 'boolean') return "<class 'bool'>";
  if (typeof v === 'number') return Number.isInteger(v) ? "<class 'int'>" : "<class 'float'>";
  if (typeof v === 'string') return "<class 'str'>";
  return Array.isArray(v) ? "<class 'list'>" : "<class 'dict'>";
}

/** validators.validate_type for a bool parameter (ints and floats are not upcast to bool). */
function validateBool(v: unknown, name: string): void {
  if (typeof v !== 'boolean') throw new PyException('TypeError', `Parameter '${name}' is of type '${pyTypeName(v)}', but expected '<class 'bool'>'.`);
}

type BoolSetting = 'cellular' | 'wifi' | 'location_service' | 'low_battery_mode';

function getBool(ctx: SandboxContext, setting: BoolSetting): boolean {
  return ctx.getDatabase('SETTING')[0][setting] as boolean;
}

/** setting.set_boolean_settings. */
function setBool(ctx: SandboxContext, setting: BoolSetting, on: boolean): void {
  validateBool(on, 'on');
  const rows = ctx.getDatabase('SETTING');
  if (Boolean(rows[0][setting]) === on) throw new PyException('ValueError', `${setting} already ${on ? 'enabled' : 'disabled'}`);
  ctx.updateDatabase('SETTING', rows.map((r) => ({ ...r, [setting]: !r[setting] })));
}

const ON: Param[] = [{ name: 'on', type: 'bool' }];

function setter(setting: 'cellular' | 'wifi' | 'location_service', refusal: string, validateFirst: boolean): ToolDef {
  return {
    params: ON,
    run: (ctx, { on }) => {
      // set_location_service_status checks low battery before validating `on` (upstream order).
      if (validateFirst) validateBool(on, 'on');
      if (pyTruthy(on) && getBool(ctx, 'low_battery_mode')) throw new PyException('PermissionError', refusal);
      setBool(ctx, setting, on as boolean);
      return null;
    },
  };
}

const TOOLS: Record<string, ToolDef> = {
  set_low_battery_mode_status: {
    params: ON,
    run: (ctx, { on }) => {
      validateBool(on, 'on');
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

export const PORTED_TOOLS = Object.keys(TOOLS);

export interface ToolOutcome {
  /** What the execution environment answers: repr(result), or "ExceptionType: message". */
  content: string;
  /** The exception line when the call failed, else null (the SANDBOX column tool_call_exception). */
  exception: string | null;
  /** The tool trace (JSON) of a successful call, else null. */
  trace: string | null;
}

/** Calls `name(**args)` against the world's current state, as the execution environment would. */
export function callTool(ctx: SandboxContext, name: string, args: Args): ToolOutcome {
  const tool = TOOLS[name];
  if (!tool) throw new Error(`tool '${name}' is not ported (ported: ${PORTED_TOOLS.join(', ')})`);
  try {
    // decorator.decorate binds the call with inspect.Signature.bind: a missing argument is
    // reported first, then an unexpected one (its messages, not the interpreter's).
    const missing = tool.params.find((p) => !p.optional && !(p.name in args));
    if (missing) throw new PyException('TypeError', `missing a required argument: '${missing.name}'`);
    const unknown = Object.keys(args).find((k) => !tool.params.some((p) => p.name === k));
    if (unknown) throw new PyException('TypeError', `got an unexpected keyword argument '${unknown}'`);
    const result = tool.run(ctx, args);
    return { content: tool.repr ? tool.repr(result) : pyRepr(result), exception: null, trace: JSON.stringify({ tool_name: name, arguments: args, result }) };
  } catch (e) {
    if (!(e instanceof PyException)) throw e;
    const line = `${e.pyType}: ${e.message}`;
    return { content: line, exception: line, trace: null };
  }
}
