/**
 * `phonenumbers.parse(number)` with no default region, as ToolSandbox's validate_phone_number calls
 * it (tool_sandbox/common/validators.py): only whether it raises, and its message. Re-implemented
 * from phonenumbers 8.13.39 (the Python port of Google's libphonenumber, Apache-2.0): the
 * extraction of the possible number, the viability pattern, the extension patterns, the country
 * calling code lookup and the national-number length bounds, in parse()'s order.
 *
 * Approximated: the per-country metadata is not ported — parse() with a recognised country code
 * may strip a national prefix when the stripped number still has a valid length for that country,
 * which can turn an 18-digit national number into a 17-digit one (accepted upstream, "too long"
 * here); an RFC 3966 phone-context is not validated. Neither occurs in the scenarios' numbers.
 */

/** phonenumbers.COUNTRY_CODE_TO_REGION_CODE's keys (8.13.39): the recognised calling codes. */
const COUNTRY_CODES = new Set([
  1, 7, 20, 27, 30, 31, 32, 33, 34, 36, 39, 40, 41, 43, 44, 45, 46, 47, 48, 49, 51, 52, 53, 54, 55, 56, 57, 58, 60, 61,
  62, 63, 64, 65, 66, 81, 82, 84, 86, 90, 91, 92, 93, 94, 95, 98, 211, 212, 213, 216, 218, 220, 221, 222, 223, 224, 225,
  226, 227, 228, 229, 230, 231, 232, 233, 234, 235, 236, 237, 238, 239, 240, 241, 242, 243, 244, 245, 246, 247, 248,
  249, 250, 251, 252, 253, 254, 255, 256, 257, 258, 260, 261, 262, 263, 264, 265, 266, 267, 268, 269, 290, 291, 297,
  298, 299, 350, 351, 352, 353, 354, 355, 356, 357, 358, 359, 370, 371, 372, 373, 374, 375, 376, 377, 378, 380, 381,
  382, 383, 385, 386, 387, 389, 420, 421, 423, 500, 501, 502, 503, 504, 505, 506, 507, 508, 509, 590, 591, 592, 593,
  594, 595, 596, 597, 598, 599, 670, 672, 673, 674, 675, 676, 677, 678, 679, 680, 681, 682, 683, 685, 686, 687, 688,
  689, 690, 691, 692, 800, 808, 850, 852, 853, 855, 856, 870, 878, 880, 881, 882, 883, 886, 888, 960, 961, 962, 963,
  964, 965, 966, 967, 968, 970, 971, 972, 973, 974, 975, 976, 977, 979, 992, 993, 994, 995, 996, 998,
]);
export const RECOGNISED_COUNTRY_CODES: ReadonlySet<number> = COUNTRY_CODES;

const D = '\\p{Nd}';
const PUNCT =
  '\\-x\\u2010-\\u2015\\u2212\\u30FC\\uFF0D-\\uFF0F \\u00A0\\u00AD\\u200B\\u2060\\u3000()\\uFF08\\uFF09\\uFF3B\\uFF3D.\\[\\]/~\\u2053\\u223C\\uFF5E';
const ALPHA = 'A-Za-z';
const PLUS = '+\\uFF0B';

/** _create_extn_pattern(for_parsing=True). */
function extnPattern(): string {
  const digits = (n: number) => `(${D}{1,${n}})`;
  const sep = '[ \\u00A0\\t,]*';
  const after = '[:\\.\\uFF0E]?[ \\u00A0\\t,-]*';
  const explicit =
    '(?:e?xt(?:ensi(?:o\\u0301?|\\u00F3))?n?|\\uFF45?\\uFF58\\uFF54\\uFF4E?|\\u0434\\u043E\\u0431|anexo)';
  const ambiguous = '(?:[x\\uFF58#\\uFF03~\\uFF5E]|int|\\uFF49\\uFF4E\\uFF54)';
  const noComma = '[ \\u00A0\\t]*';
  return [
    `;ext=${digits(20)}`,
    `${sep}${explicit}${after}${digits(20)}#?`,
    `${sep}${ambiguous}${after}${digits(9)}#?`,
    `[- ]+${digits(6)}#`,
    `${noComma}(?:,{2}|;)${after}${digits(15)}#?`,
    `${noComma}(?:,)+${after}${digits(9)}#?`,
  ].join('|');
}
const EXTN = extnPattern();
const VALID_NUMBER = new RegExp(
  `^(?:${D}{2}|[${PLUS}]*(?:[${PUNCT}*]*${D}){3,}[${PUNCT}*${ALPHA}${D}]*(?:${EXTN})?)$`,
  'iu',
);
const EXTN_AT_END = new RegExp(`(?:${EXTN})$`, 'iu');
const START = new RegExp(`[${PLUS}${D}]`, 'u');
/** _UNWANTED_END_CHARS: `(?:_|[^#\w])+$` with Python's Unicode \w (letters, digits, underscore). */
const UNWANTED_END = /(?:_|[^#\p{L}\p{N}_])+$/u;
const SECOND_NUMBER = /[\\/] *x/;
const ALPHA_PHONE = /^(?:.*?[A-Za-z]){3}/s;
const KEYPAD: Record<string, string> = Object.fromEntries(
  ['ABC', 'DEF', 'GHI', 'JKL', 'MNO', 'PQRS', 'TUV', 'WXYZ'].flatMap((ls, i) => [...ls].map((l) => [l, String(i + 2)])),
);

export class NumberParseException extends Error {
  constructor(
    readonly errorType: number,
    message: string,
  ) {
    super(`(${errorType}) ${message}`);
  }
}

function extractPossibleNumber(n: string): string {
  const m = START.exec(n);
  if (!m) return '';
  let out = n.slice(m.index);
  const end = UNWANTED_END.exec(out);
  if (end) out = out.slice(0, end.index);
  const second = SECOND_NUMBER.exec(out);
  if (second) out = out.slice(0, second.index);
  return out;
}

const isViable = (n: string): boolean => Array.from(n).length >= 2 && VALID_NUMBER.test(n);

/** _normalize: letters to keypad digits when there are three or more (ASCII digits only then), else every Unicode digit. */
function normalize(n: string): string {
  if (ALPHA_PHONE.test(n))
    return Array.from(n)
      .map((c) => KEYPAD[c.toUpperCase()] ?? (/[0-9]/.test(c) ? c : ''))
      .join('');
  return Array.from(n)
    .filter((c) => /\p{Nd}/u.test(c))
    .map((c) => String(digitValue(c)))
    .join('');
}

/** A Unicode decimal digit's value: Nd digits come in runs of ten from their zero, so count back along the run. */
function digitValue(c: string): number {
  const cp = c.codePointAt(0)!;
  let run = 0;
  while (run < 40 && /\p{Nd}/u.test(String.fromCodePoint(cp - run - 1))) run++;
  return run % 10;
}

/** Throws NumberParseException (or TypeError for a non-string, as len() would) where phonenumbers.parse(n) raises. */
export function validatePhoneNumber(n: unknown): void {
  if (n === null) throw new NumberParseException(1, 'The phone number supplied was None.');
  if (typeof n !== 'string')
    throw new TypeError(
      `object of type '${typeof n === 'boolean' ? 'bool' : Number.isInteger(n) ? 'int' : 'float'}' has no len()`,
    );
  if (Array.from(n).length > 250) throw new NumberParseException(4, 'The string supplied was too long to parse.');
  let national: string;
  const ctxAt = n.indexOf(';phone-context=');
  if (ctxAt >= 0) {
    const start = ctxAt + ';phone-context='.length;
    const end = n.indexOf(';', start);
    const context = n.slice(start, end < 0 ? undefined : end);
    const tel = n.indexOf('tel:');
    national = (context.startsWith('+') ? context : '') + n.slice(tel >= 0 ? tel + 4 : 0, ctxAt);
  } else national = extractPossibleNumber(n);
  const isub = national.indexOf(';isub=');
  if (isub > 0) national = national.slice(0, isub);
  if (!isViable(national)) throw new NumberParseException(1, 'The string supplied did not seem to be a phone number.');
  const plus = new RegExp(`^[${PLUS}]+`, 'u').exec(national);
  if (!plus) throw new NumberParseException(0, 'Missing or invalid default region.');
  const ext = EXTN_AT_END.exec(national);
  if (ext && isViable(national.slice(0, ext.index))) national = national.slice(0, ext.index);
  const full = normalize(national.slice(plus[0].length));
  if (full.length <= 2)
    throw new NumberParseException(
      2,
      'Phone number had an IDD, but after this was not long enough to be a viable phone number.',
    );
  let rest: string | undefined;
  if (full[0] !== '0') {
    for (let i = 1; i <= Math.min(3, full.length); i++) {
      if (COUNTRY_CODES.has(Number(full.slice(0, i)))) {
        rest = full.slice(i);
        break;
      }
    }
  }
  if (rest === undefined) throw new NumberParseException(0, 'Could not interpret numbers after plus-sign.');
  if (rest.length < 2) throw new NumberParseException(3, 'The string supplied is too short to be a phone number.');
  if (rest.length > 17) throw new NumberParseException(4, 'The string supplied is too long to be a phone number.');
}
