import { simpleParser, type Attachment, type ParsedMail, type SimpleParserOptions } from 'mailparser';
import type { Field } from '../domain/bounce/fields.js';
import type { MessagePart, ParsedMessage } from '../domain/bounce/parsed-message.js';

/**
 * Bytes that came back to the bounce address → a ParsedMessage (plain data, see its definition).
 * The only importer of mailparser for reports. Every size is bounded before or after the parse:
 * reports arrive unauthenticated, and whatever they hold must not hold the event loop for long.
 */

/** The listener's default size limit; anything past it is not read. */
export const MAX_MESSAGE_BYTES = 1024 * 1024;
/** Real reports carry a few dozen header fields; thousands only cost parse time. */
const MAX_HEADER_FIELDS = 300;
const MAX_HEADER_BYTES = 64 * 1024;
/** Each part's text, and the body's, are cut here: a report's facts are in its first few KiB. */
const MAX_TEXT = 256 * 1024;
const MAX_PARTS = 20;

const PARSER_OPTIONS: SimpleParserOptions & { ignoreEmbedded: boolean } = {
  // Delivery-status parts otherwise vanish into `text` instead of `attachments`.
  keepDeliveryStatus: true,
  // An inline message/rfc822 part would otherwise be parsed into the report itself: its text
  // merged into `text`, its own attachments listed as the report's, and its headers lost.
  ignoreEmbedded: true,
  // HTML-only reports are turned into text here (stripTags), with a bounded cost.
  skipHtmlToText: true,
  skipTextToHtml: true,
  skipTextLinks: true,
  keepCidLinks: true,
};

/** Never throws: bytes that are not a message give an empty one. */
export async function parseMessage(raw: Buffer): Promise<ParsedMessage> {
  const message = await parseOne(raw);
  // One level down: a returned message that is itself a report is parsed too (its own returned
  // messages are not), so a report wrapped in a notice can be read.
  const parts: MessagePart[] = [];
  for (const part of message.parts) {
    parts.push(
      part.contentType === 'message/rfc822' && looksLikeReport(part.text)
        ? { ...part, message: await parseOne(Buffer.from(part.text, 'utf8')) }
        : part,
    );
  }
  return { ...message, parts };
}

/** A report's header section: a multipart/report, or from a mail daemon. */
function looksLikeReport(text: string): boolean {
  const end = text.search(/\r?\n\r?\n/);
  const headers = (end < 0 ? text : text.slice(0, end)).slice(0, MAX_HEADER_BYTES);
  return /^content-type:\s*multipart\/report/im.test(headers) || /^from:.*mailer-daemon/im.test(headers);
}

async function parseOne(raw: Buffer): Promise<ParsedMessage> {
  const bounded = boundHeaders(raw.subarray(0, MAX_MESSAGE_BYTES));
  let mail: ParsedMail;
  try {
    mail = await simpleParser(bounded, PARSER_OPTIONS);
  } catch {
    return { headers: [], contentType: 'text/plain', text: '', parts: [] };
  }
  return toParsedMessage(mail, bounded);
}

function toParsedMessage(mail: ParsedMail, raw: Buffer): ParsedMessage {
  const headers: Field[] = mail.headerLines.slice(0, MAX_HEADER_FIELDS).map(({ key, line }) => {
    const colon = line.indexOf(':');
    const value =
      colon < 0
        ? ''
        : line
            .slice(colon + 1)
            .replace(/\r?\n[ \t]+/g, ' ')
            .trim();
    return {
      name: key.toLowerCase(),
      value: key.toLowerCase() === 'subject' ? (mail.subject ?? value) : value,
    };
  });
  const parts = mail.attachments.slice(0, MAX_PARTS).map(partOf);
  let text = typeof mail.text === 'string' && mail.text.trim() !== '' ? mail.text : stripTags(htmlOf(mail));
  // A multipart body whose boundary does not match its parts (a bounce generator's bug) parses to
  // nothing at all: its raw body is the best text there is.
  if (text.trim() === '' && parts.length === 0) text = raw.subarray(headerEnd(raw)).toString('utf8');
  return {
    headers,
    contentType: contentTypeOf(mail),
    text: undeclaredIso2022(text.slice(0, MAX_TEXT)),
    parts,
  };
}

/**
 * Japanese bounces often carry ISO-2022-JP text without declaring its charset, so it reaches here
 * still encoded; its escape sequences (RFC 1468) say what it is.
 */
function undeclaredIso2022(text: string): string {
  const escaped = text.includes('\u001b$B') || text.includes('\u001b$@');
  if (!escaped || [...text].some((char) => char.charCodeAt(0) > 0x7f)) return text;
  return decode(Buffer.from(text, 'latin1'), 'iso-2022-jp');
}

function partOf(part: Attachment): MessagePart {
  const contentType = part.contentType.toLowerCase();
  const content = Buffer.isBuffer(part.content) ? part.content.subarray(0, MAX_TEXT) : Buffer.alloc(0);
  const charset = /charset="?([\w.:-]+)/i.exec(part.headers.get('content-type')?.toString() ?? '')?.[1];
  return {
    contentType,
    text: undeclaredIso2022(decode(content, contentType.startsWith('text/') ? charset : undefined)),
  };
}

/** TextDecoder knows the charsets of the WHATWG Encoding Standard; others read as UTF-8. */
function decode(content: Buffer, charset: string | undefined): string {
  try {
    return new TextDecoder(charset ?? 'utf-8').decode(content);
  } catch {
    return content.toString('utf8');
  }
}

/** RFC 2045 §5.2: a message without Content-Type is text/plain. */
function contentTypeOf(mail: ParsedMail): string {
  const header = mail.headers.get('content-type') as { value?: unknown } | undefined;
  return typeof header?.value === 'string' ? header.value.toLowerCase() : 'text/plain';
}

function htmlOf(mail: ParsedMail): string {
  return typeof mail.html === 'string' ? mail.html.slice(0, MAX_TEXT) : '';
}

const ENTITIES: Readonly<Record<string, string>> = {
  amp: '&',
  lt: '<',
  gt: '>',
  quot: '"',
  apos: "'",
  nbsp: ' ',
};

const RAW_TEXT_START = /<(script|style)(?=[\s/>])[^<>]*>/gi;
const RAW_TEXT_END: Readonly<Record<string, RegExp>> = { script: /<\/script\s*>/gi, style: /<\/style\s*>/gi };

/**
 * The HTML without its scripts and style sheets, in one scan forward: its cost is linear in the
 * text, whatever the text holds. A block never closed runs to the end, as in a browser.
 */
function withoutRawText(html: string): string {
  let text = '';
  let from = 0;
  RAW_TEXT_START.lastIndex = 0;
  for (let start = RAW_TEXT_START.exec(html); start !== null; start = RAW_TEXT_START.exec(html)) {
    text += html.slice(from, start.index);
    const end = RAW_TEXT_END[start[1]!.toLowerCase()]!;
    end.lastIndex = RAW_TEXT_START.lastIndex;
    if (end.exec(html) === null) return text;
    from = RAW_TEXT_START.lastIndex = end.lastIndex;
  }
  return text + html.slice(from);
}

/**
 * HTML → text, enough to read a bounce: block ends become line breaks, tags go, entities are
 * decoded. A tag is read up to the next `<` at most, so no pattern scans the text again from each
 * of its starts.
 */
export function stripTags(html: string): string {
  return withoutRawText(html)
    .replace(/<(?:br|\/p|\/div|\/tr|\/li|\/h\d|\/table)\b[^<>]*>/gi, '\n')
    .replace(/<[^<>]*>/g, '')
    .replace(/&(#x?[0-9a-f]{1,6}|[a-z]{2,8});/gi, (entity: string, name: string) => {
      if (name.startsWith('#')) {
        const code = name[1] === 'x' || name[1] === 'X' ? parseInt(name.slice(2), 16) : Number(name.slice(1));
        return code > 0 && code < 0x110000 ? String.fromCodePoint(code) : entity;
      }
      return ENTITIES[name.toLowerCase()] ?? entity;
    })
    .replace(/[ \t]+\n/g, '\n');
}

/**
 * The top-level header section, cut to MAX_HEADER_FIELDS fields and MAX_HEADER_BYTES before the
 * parser sees it; the MIME fields are kept wherever they are, so the body still parses.
 */
export function boundHeaders(raw: Buffer): Buffer {
  const end = headerEnd(raw);
  const section = raw.subarray(0, end);
  if (section.length <= MAX_HEADER_BYTES && countFields(section) <= MAX_HEADER_FIELDS) return raw;
  const fields = section.toString('latin1').split(/\r?\n(?![ \t])/);
  const kept: string[] = [];
  let bytes = 0;
  for (const field of fields) {
    const mime = /^(?:content-|mime-version)/i.test(field);
    const fits = kept.length < MAX_HEADER_FIELDS && bytes + field.length <= MAX_HEADER_BYTES;
    if ((fits || mime) && field.length <= MAX_HEADER_BYTES / 4) {
      kept.push(field);
      bytes += field.length + 2;
    }
  }
  return Buffer.concat([Buffer.from(`${kept.join('\r\n')}\r\n`, 'latin1'), raw.subarray(end)]);
}

/** Offset of the blank line that ends the header section (or the whole length). */
function headerEnd(raw: Buffer): number {
  const crlf = raw.indexOf('\r\n\r\n');
  const lf = raw.indexOf('\n\n');
  const candidates = [crlf < 0 ? -1 : crlf + 2, lf < 0 ? -1 : lf + 1].filter((at) => at >= 0);
  return candidates.length === 0 ? raw.length : Math.min(...candidates);
}

function countFields(section: Buffer): number {
  let count = 0;
  for (let at = 0; at < section.length; at += 1) {
    // A field starts at the start of a line that does not begin with white space.
    if ((at === 0 || section[at - 1] === 0x0a) && section[at] !== 0x20 && section[at] !== 0x09) count += 1;
  }
  return count;
}
