/** Limits a JSON text is read under before JSON.parse sees it: parsing is synchronous, on the event loop. */

/** Why a JSON text may not be parsed: nesting deeper than `maxDepth`, or more than `maxValues` values (brackets and separators outside strings). */
export function tooComplex(text: string, maxDepth: number, maxValues: number): string | undefined {
  let depth = 0;
  let values = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 92)
        i++; // backslash: skip the escaped character
      else if (c === 34) inString = false;
    } else if (c === 34) inString = true;
    else if (c === 91 || c === 123) {
      if (++depth > maxDepth) return `nests arrays/objects deeper than ${maxDepth} levels`;
      if (++values > maxValues) return `holds more than ${maxValues} values`;
    } else if (c === 93 || c === 125) depth--;
    else if (c === 44 && ++values > maxValues) return `holds more than ${maxValues} values`;
  }
  return undefined;
}
