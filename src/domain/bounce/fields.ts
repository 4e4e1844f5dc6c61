/**
 * Header-like fields (RFC 5322 §2.2, RFC 3464 §2.1, RFC 5965 §3) read from plain text: a report's
 * delivery-status or feedback-report part, a returned message's header section, DSN fields that an
 * MTA pasted into its text.
 */

export interface Field {
  /** Lowercased. */
  readonly name: string;
  readonly value: string;
}
export type FieldBlock = readonly Field[];

/** RFC 5322 §2.1.1: a line is at most 998 characters; a folded field may span several. */
export const MAX_FIELD_VALUE = 4 * 998;
/** RFC 5322 §3.6.8: field-name is printable ASCII except the colon. */
const FIELD = /^([!-9;-~]+)[ \t]*:(.*)$/s;

/**
 * Header-like field blocks separated by blank lines: `Name: value` lines; lines that are neither a
 * field nor a blank line are skipped.
 */
export function fieldBlocks(text: string): FieldBlock[] {
  const blocks: Field[][] = [[]];
  for (const line of unfoldedLines(text)) {
    if (line === '') {
      blocks.push([]);
      continue;
    }
    const field = FIELD.exec(line);
    if (field) blocks.at(-1)?.push({ name: field[1]!.toLowerCase(), value: field[2]!.trim() });
  }
  return blocks.filter((block) => block.length > 0);
}

/**
 * Logical lines: a line that starts with white space continues the one before it (RFC 5322
 * §2.2.3), joined with a single space; a blank line comes out as ''.
 */
export function unfoldedLines(text: string): string[] {
  const lines: string[] = [];
  for (const line of text.split(/\r\n|\r|\n/)) {
    const last = lines.length - 1;
    const previous = lines[last];
    if (line.trim() === '') lines.push('');
    else if (/^[ \t]/.test(line) && previous) {
      if (previous.length < MAX_FIELD_VALUE)
        lines[last] = `${previous} ${line.trim()}`.slice(0, MAX_FIELD_VALUE);
    } else lines.push(line.slice(0, MAX_FIELD_VALUE));
  }
  return lines;
}

/** The header section of a message: its first block, up to the first blank line (RFC 5322 §2.1). */
export function headerFields(message: string): FieldBlock {
  const headers = message.replace(/^\s+/, '');
  const end = headers.search(/\r?\n[ \t]*\r?\n/);
  return fieldBlocks(end < 0 ? headers : headers.slice(0, end))[0] ?? [];
}

export function has(block: FieldBlock, name: string): boolean {
  return block.some((field) => field.name === name);
}

export function get(block: FieldBlock, name: string): string | null {
  return block.find((field) => field.name === name)?.value ?? null;
}

/** RFC 3464 §2.3.2 and §2.3.6: `type; value`; the value without its type, or null when empty. */
export function typedValue(value: string | null): string | null {
  if (value === null) return null;
  const untyped = value.replace(/^[A-Za-z0-9/-]+[ \t]*;/, '').trim();
  return untyped === '' ? null : untyped;
}

/** The type of a `type; value` field, lowercased, or null. */
export function valueType(value: string | null): string | null {
  return value === null ? null : (/^([A-Za-z0-9-]+)[ \t]*;/.exec(value)?.[1]?.toLowerCase() ?? null);
}

export function unbracket(address: string): string | null {
  const inner = /^<(.*)>$/.exec(address.trim())?.[1] ?? address;
  return inner.trim() === '' ? null : inner.trim();
}

/** The addr-spec in a header such as `Jane Doe <jane@example.org>`; null when it names no address. */
export function addressIn(value: string | null): string | null {
  if (value === null) return null;
  return (
    /<([^<>\s]+@[^<>\s]+)>/.exec(value)?.[1] ?? /(?:^|[\s,])([^\s<>,"]+@[^\s<>,"]+)/.exec(value)?.[1] ?? null
  );
}

export function messageIdIn(headers: FieldBlock): string | null {
  const value = get(headers, 'message-id');
  if (!value) return null;
  // RFC 5322 §3.6.4 wants angle brackets; RFC 5965's own example omits them.
  const id = /<([^<>\s]+)>/.exec(value)?.[1] ?? value.trim();
  return id !== '' && !/\s/.test(id) ? id : null;
}
