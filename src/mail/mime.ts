import { randomUUID } from 'node:crypto';
// nodemailer 10 ships its own declarations and an exports map; these subpaths resolve to its
// ESM build under NodeNext. Only its encoders are used here: the message structure is fixed.
import { encodeWords, foldLines, isPlainText, quoteString } from 'nodemailer/lib/mime-funcs';
import { encode as qpEncode, wrap as qpWrap } from 'nodemailer/lib/qp';
import { parseMailbox, type Mailbox } from '../domain/address.js';
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
}

const EXTRA_HEADER_NAME = /^X-[A-Za-z0-9-]+$/i;
// id-left@id-right of visible ASCII other than '<', '>' and '@': anything else could end the id or the header.
const MESSAGE_ID = /^[!-;=?A-~]+@[!-;=?A-~]+$/;

/**
 * Builds the complete RFC 5322 message, CRLF line endings throughout, ready for SMTP DATA or
 * capture storage. Callers already sanitize subject and names; they are cleaned again here
 * because this is the last point before bytes become headers.
 *
 * Every Herald message has the same shape (a text part, optionally with an HTML alternative),
 * so it is assembled directly from nodemailer's RFC 2047 and quoted-printable encoders rather
 * than through its general MailComposer, whose stream pipeline cost about a millisecond of CPU
 * per message and bounded delivery throughput.
 */
export async function composeMessage(message: OutgoingMessage): Promise<Buffer> {
  if (Number.isNaN(message.date.getTime())) throw new RangeError('composeMessage: invalid date');
  if (!MESSAGE_ID.test(message.messageId)) throw new TypeError('composeMessage: invalid messageId');
  const headers = [
    header('From', mailbox(message.from)),
    header('To', mailbox(message.to)),
    header('Subject', encodeText(singleLine(message.subject))),
    `Date: ${message.date.toUTCString().replace(/GMT$/, '+0000')}`,
    `Message-ID: <${message.messageId}>`,
    'MIME-Version: 1.0',
    ...extraHeaders(message.headers ?? {}),
  ];
  const text = textPart('text/plain', message.text);
  if (!message.html) return Buffer.from(`${headers.join(CRLF)}${CRLF}${text}`);
  const boundary = `--_herald_${randomUUID()}`;
  return Buffer.from(
    [
      ...headers,
      `Content-Type: multipart/alternative; boundary="${boundary}"`,
      '',
      `--${boundary}`,
      text,
      `--${boundary}`,
      textPart('text/html', message.html),
      `--${boundary}--`,
      '',
    ].join(CRLF),
  );
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

/** Header text as it is when it is printable ASCII, else as RFC 2047 encoded words. */
function encodeText(value: string): string {
  return isPlainText(value) ? value : encodeWords(value, 'Q', 52, true);
}

function mailbox(box: Mailbox): string {
  // Re-validated so that no caller can put a list, a group or a header break into From or To.
  if (parseMailbox(box.address) === null) throw new TypeError('composeMessage: invalid address');
  const name = box.name === undefined ? '' : singleLine(box.name);
  if (name === '') return box.address;
  // A quoted-string keeps commas and other specials of an ASCII name from being read as syntax.
  return `${isPlainText(name) ? quoteString(name) : encodeWords(name, 'Q', 52, true)} <${box.address}>`;
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
