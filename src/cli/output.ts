export { iso } from '../services/json-views.js';

/**
 * Every command prints either one JSON object (`--json`) or a short human-readable text. The JSON
 * shapes are those of services/json-views.ts, which the management API answers with too; secrets
 * appear only where a command creates them.
 */

export interface Output {
  /** Prints `json` with --json, else the text (or the JSON's key: value lines when no text given). */
  print(json: Record<string, unknown>, text?: string): void;
  /** Prints `{ [key]: each item as JSON }` with --json, else a line per item, or `empty` when there are none. */
  printList<T>(
    key: string,
    items: readonly T[],
    json: (item: T) => unknown,
    empty: string,
    line: (item: T) => string,
  ): void;
  /** A warning on stderr: `{"warning": …}` with --json, else `herald: …`. */
  warn(text: string): void;
}

/**
 * Text for a terminal: control characters other than newline and tab become visible escapes
 * (`\x1b`), so stored values (a caller's placeholder data, a relay's reply) can never move the
 * cursor, retitle the window or clear the operator's screen. JSON output escapes them itself.
 */
export function terminalSafe(text: string): string {
  return text.replace(
    // eslint-disable-next-line no-control-regex -- finding control characters is the point
    /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g,
    (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`,
  );
}

export function createOutput(asJson: boolean): Output {
  const write = (text: string) =>
    process.stdout.write(terminalSafe(text.endsWith('\n') ? text : text + '\n'));
  return {
    print(json, text) {
      if (asJson) {
        process.stdout.write(JSON.stringify(json) + '\n');
        return;
      }
      if (text !== undefined) {
        write(text);
        return;
      }
      const lines = Object.entries(json).map(
        ([key, value]) => `${key}: ${typeof value === 'string' ? value : JSON.stringify(value)}`,
      );
      write(lines.join('\n'));
    },
    printList(key, items, json, empty, line) {
      this.print({ [key]: items.map(json) }, items.length === 0 ? empty : items.map(line).join('\n'));
    },
    warn(text) {
      process.stderr.write(
        asJson ? JSON.stringify({ warning: text }) + '\n' : terminalSafe(`herald: ${text}\n`),
      );
    },
  };
}
