/**
 * Text from a run (a generated module's error, a tool's name, an LLM's reply) made safe to print on
 * a terminal: control characters other than newline and tab (C0, DEL, C1) are shown as `^[`-style
 * or `\u0085`-style escapes instead of being sent, so stored text cannot move the cursor, erase
 * lines, set the window title or write the clipboard (OSC 52) of whoever runs `trace`.
 */
export function terminalSafe(text: string): string {
  return text.replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g, (c) => {
    const code = c.charCodeAt(0);
    return code < 0x20
      ? `^${String.fromCharCode(code + 0x40)}`
      : code === 0x7f
        ? '^?'
        : `\\u${code.toString(16).padStart(4, '0')}`;
  });
}
