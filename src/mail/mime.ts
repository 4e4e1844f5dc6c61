import { randomUUID } from 'node:crypto';
// nodemailer 10 ships its own declarations and an exports map; these subpaths resolve to its
// ESM build under NodeNext. Only its encoders are used here: the message structure is fixed.
import {
  buildHeaderValue,
  encodeWord,
  encodeWords,
  foldLines,
  isPlainText,
  quoteString,
} from 'nodemailer/lib/mime-funcs';
import { encode as qpEncode, wrap as qpWrap } from 'nodemailer/lib/qp';
import { parseMailbox, type Mailbox } from '../domain/address.js';
import { MEDIA_TYPE_PARAMETER } from '../domain/attachments.js';
import { HEADER_BREAK_RUNS } from '../domain/header-break.js';
import { normalizeNewlines } from '../domain/render.js';

export interface OutgoingMessage {
  from: Mailbox;
  to: Mailbox;
  subject: string;
  text: string;
  html?: string | null;
  /** Without angle brackets, e.g. 'req_abc@example.org'. */
  messageId: string;
  date: Date;
  /** Extra `X-` headers; CR, LF and other controls in values are replaced by spaces. */
  headers?: Readonly<Record<string, string>>;
  /** The Reply-To mailbox. */
  replyTo?: Mailbox | null;
  /** Files, attached after the text (and HTML) in a multipart/mixed message. */
  attachments?: readonly OutgoingFile[];
}

export interface OutgoingFile {
  /** Already in its safe form (domain/attachments.ts); encoded here as RFC 2231 where not ASCII. */
  readonly filename: string;
  readonly contentType: string;
  readonly content: Uint8Array;
}

const EXTRA_HEADER_NAME = /^X-[A-Za-z0-9-]+$/i;
// id-left@id-right of visible ASCII other than '<', '>' and '@': anything else could end the id or the header.
const MESSAGE_ID = /^[!-;=?A-~]+@[!-;=?A-~]+$/;

/**
 * Builds the complete RFC 5322 message, CRLF line endings throughout, ready for SMTP DATA or
 * capture storage. Callers already sanitize subject and names; they are cleaned again here
 * because this is the last point before bytes become headers.
 *
 * Every Herald message has one of a few shapes (a text part, optionally with an HTML alternative,
 * and with files a multipart/mixed around them), so it is assembled directly from nodemailer's
 * RFC 2047, RFC 2231 and quoted-printable encoders rather than through its general MailComposer,
 * whose stream pipeline cost about a millisecond of CPU per message and bounded delivery
 * throughput. Files are base64, in lines of 76, written straight into the message's buffer.
 */
export async function composeMessage(message: OutgoingMessage): Promise<Buffer> {
  if (Number.isNaN(message.date.getTime())) throw new RangeError('composeMessage: invalid date');
  if (!MESSAGE_ID.test(message.messageId)) throw new TypeError('composeMessage: invalid messageId');
  const headers = [
    header('From', mailbox(message.from)),
    header('To', mailbox(message.to)),
    ...(message.replyTo ? [header('Reply-To', mailbox(message.replyTo))] : []),
    header('Subject', encodeText(singleLine(message.subject))),
    `Date: ${message.date.toUTCString().replace(/GMT$/, '+0000')}`,
    `Message-ID: <${message.messageId}>`,
    'MIME-Version: 1.0',
    ...extraHeaders(message.headers ?? {}),
  ];
  const body = bodyParts(message);
  const files = message.attachments ?? [];
  if (files.length === 0) return Buffer.from(`${headers.join(CRLF)}${CRLF}${body}`);
  const boundary = `--_herald_${randomUUID()}`;
  const head = [
    ...headers,
    `Content-Type: multipart/mixed; boundary="${boundary}"`,
    '',
    `--${boundary}`,
    body,
  ].join(CRLF);
  return Buffer.concat([
    Buffer.from(head),
    ...files.flatMap((file) => [Buffer.from(`${CRLF}--${boundary}${CRLF}`), filePart(file)]),
    Buffer.from(`${CRLF}--${boundary}--${CRLF}`),
  ]);
}

/** The text, or the text and HTML as multipart/alternative: its headers, a blank line, its body. */
function bodyParts(message: OutgoingMessage): string {
  const text = textPart('text/plain', message.text);
  if (!message.html) return text;
  const boundary = `--_herald_${randomUUID()}`;
  return [
    `Content-Type: multipart/alternative; boundary="${boundary}"`,
    '',
    `--${boundary}`,
    text,
    `--${boundary}`,
    textPart('text/html', message.html),
    `--${boundary}--`,
    '',
  ].join(CRLF);
}

/** Base64 line length (RFC 2045 §6.8: at most 76 characters). */
const BASE64_LINE = 76;

/**
 * A file as a body part: Content-Type with its name and Content-Disposition with its filename
 * (RFC 2231 continuations where the name is not plain ASCII, as mail clients read them), then its
 * bytes as base64 in lines of 76. The lines are copied into one buffer: no string per line.
 */
function filePart(file: OutgoingFile): Buffer {
  const name = singleLine(file.filename);
  const headers = [
    header('Content-Type', buildHeaderValue({ value: contentTypeValue(file.contentType), params: { name } })),
    'Content-Transfer-Encoding: base64',
    header('Content-Disposition', buildHeaderValue({ value: 'attachment', params: { filename: name } })),
    '',
    '',
  ].join(CRLF);
  const encoded = Buffer.from(
    Buffer.from(file.content.buffer, file.content.byteOffset, file.content.byteLength).toString('base64'),
    'latin1',
  );
  const lines = Math.ceil(encoded.length / BASE64_LINE);
  const out = Buffer.allocUnsafe(
    Buffer.byteLength(headers, 'latin1') + encoded.length + Math.max(0, lines - 1) * 2,
  );
  let at = out.write(headers, 0, 'latin1');
  for (let start = 0; start < encoded.length; start += BASE64_LINE) {
    if (start > 0) {
      out[at++] = 0x0d;
      out[at++] = 0x0a;
    }
    at += encoded.copy(out, at, start, start + BASE64_LINE);
  }
  return out;
}

// A media type with parameters, as domain/attachments.ts admits and writes them; anything else is
// sent as application/octet-stream rather than let into a header.
const CONTENT_TYPE = new RegExp(
  `^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*(?:; ${MEDIA_TYPE_PARAMETER})*$`,
);

function contentTypeValue(type: string): string {
  return CONTENT_TYPE.test(type) ? type : 'application/octet-stream';
}

const CRLF = '\r\n';

function header(key: string, value: string): string {
  return foldLines(`${key}: ${value}`, 76);
}

/** A body part: its headers, a blank line, and the body as quoted-printable with CRLF lines. */
function textPart(type: 'text/plain' | 'text/html', body: string): string {
  const crlf = normalizeNewlines(body).replace(/\n/g, CRLF);
  return [
    `Content-Type: ${type}; charset=utf-8`,
    'Content-Transfer-Encoding: quoted-printable',
    '',
    qpWrap(qpEncode(crlf), 76),
  ].join(CRLF);
}

/**
 * A run of characters without white space this long (a URL, a token) is sent as encoded words
 * even in plain ASCII: folding breaks a header only at white space, and a line may not be longer
 * than 998 characters (RFC 5322 §2.1.1), where encoded words can be split anywhere.
 */
const UNFOLDABLE_RUN = /\S{900}/;

/** Header text as it is when it is printable ASCII that folds, else as RFC 2047 encoded words. */
function encodeText(value: string): string {
  if (!isPlainText(value)) return encodeWords(value, 'Q', 52, true);
  return UNFOLDABLE_RUN.test(value) ? encodeWord(value, 'Q', 52) : value;
}

function mailbox(box: Mailbox): string {
  // Re-validated so that no caller can put a list, a group or a header break into From or To.
  if (parseMailbox(box.address) === null) throw new TypeError('composeMessage: invalid address');
  const name = box.name === undefined ? '' : singleLine(box.name);
  if (name === '') return box.address;
  // A quoted-string keeps commas and other specials of an ASCII name from being read as syntax;
  // its escapes lengthen the name, so the run is looked for in the quoted form.
  const quoted = isPlainText(name) ? quoteString(name) : null;
  if (quoted !== null && !UNFOLDABLE_RUN.test(quoted)) return `${quoted} <${box.address}>`;
  return `${quoted === null ? encodeWords(name, 'Q', 52, true) : encodeWord(name, 'Q', 52)} <${box.address}>`;
}

function singleLine(value: string): string {
  return value.replace(HEADER_BREAK_RUNS, ' ').trim();
}

function extraHeaders(headers: Readonly<Record<string, string>>): string[] {
  return Object.entries(headers).map(([key, value]) => {
    // Only X- names: a caller must never be able to set or override a standard header.
    if (!EXTRA_HEADER_NAME.test(key))
      throw new TypeError(`composeMessage: header ${JSON.stringify(key)} is not an X- header`);
    return header(key, encodeText(singleLine(String(value))));
  });
}
