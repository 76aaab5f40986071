/**
 * A StringDecoder is reachable however little of Node the module has (a JavaScript stream's
 * `setEncoding` makes one, under `_readableState.decoder`), and Node's native decoder trusts the
 * state buffer the decoder keeps under a symbol: rerun 72i set its byte count to 255, and `end()`
 * read 255 bytes past the 7-byte state, freed stat results with the real time in them. The state is
 * read once and checked before the native call, which runs on a copy only the runner holds.
 */
import { builtin, type Refused } from './refusal.js';

type Method = (this: unknown, ...args: unknown[]) => unknown;

const apply = Reflect.apply;

/** Replaces `proto[name]` with `wrap(original)`, fixed. */
function wrapMethod(proto: object, name: string, wrap: (original: Method) => Method): void {
  const original = (proto as Record<string, Method>)[name];
  Object.defineProperty(proto, name, { value: wrap(original), writable: false, configurable: false });
}

const viewLength = Object.getOwnPropertyDescriptor(Object.getPrototypeOf(Uint8Array.prototype), 'byteLength')!.get!;

/** The state's layout (src/string_decoder.h): 4 bytes of an incomplete character, then these. */
const MISSING_BYTES = 4;
const BUFFERED_BYTES = 5;
const ENCODING_FIELD = 6;
const STATE_FIELDS = 7;
const INCOMPLETE_CHARACTER_BYTES = 4;

export function guardStringDecoder(refused: Refused): void {
  const { StringDecoder } = builtin('string_decoder') as { StringDecoder: new (encoding: string) => object };
  const state = Object.getOwnPropertySymbols(new StringDecoder('utf8')).find((s) => s.description === 'kNativeDecoder');
  if (!state) throw new Error('sandbox runner: no StringDecoder state found in this Node');
  const encodings = new Set(
    ['ascii', 'utf8', 'base64', 'base64url', 'utf16le', 'hex', 'latin1'].map(
      (e) => (new StringDecoder(e) as Record<symbol, Uint8Array>)[state][ENCODING_FIELD],
    ),
  );
  const isUint8Array = (builtin('util').types as { isUint8Array: (v: unknown) => v is Uint8Array }).isUint8Array;
  const changed: () => never = refused('a StringDecoder whose state was changed');
  const set = Uint8Array.prototype.set;
  // The state read once and checked, and Node's method run on a copy only the runner holds, copied
  // back after: a getter on the decoder could answer the check and the native call apart, and
  // \`text\` calls the module's \`buf.slice\` between them (rerun 72j: the byte count set there had the
  // native decoder write 193 chosen bytes past the state).
  const decoding = (decoder: unknown, method: Method, args: unknown[]) => {
    const s = (decoder as Record<symbol, unknown>)[state];
    if (
      !isUint8Array(s) ||
      (apply(viewLength, s, []) as number) < STATE_FIELDS ||
      s[MISSING_BYTES] + s[BUFFERED_BYTES] > INCOMPLETE_CHARACTER_BYTES ||
      !encodings.has(s[ENCODING_FIELD])
    )
      changed();
    const own = new Uint8Array(STATE_FIELDS);
    for (let i = 0; i < STATE_FIELDS; i++) own[i] = s[i];
    const holder: Record<string | symbol, unknown> = { __proto__: null, [state]: own };
    holder.write = (buf: unknown) => apply(write, holder, [buf]);
    try {
      return apply(method, holder, args);
    } finally {
      try {
        apply(set, s, [own]);
      } catch {
        // detached by the module meanwhile: nothing to copy back to
      }
    }
  };
  const proto = StringDecoder.prototype;
  const write = (proto as Record<string, Method>).write;
  for (const name of ['write', 'end', 'text'])
    wrapMethod(
      proto,
      name,
      (original) =>
        function guardedDecode(this: unknown, ...args: unknown[]) {
          return decoding(this, original, args);
        },
    );
  // Frozen: a setter the constructor runs into, or an accessor for the state symbol, ran the module
  // inside Node's own decoding, where assert's source read holds a file open (rerun 79a).
  Object.freeze(proto);
}
