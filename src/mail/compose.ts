// nodemailer 10 ships its own declarations and an exports map; this subpath resolves to
// dist/esm/mail-composer/index.js (and its .d.ts) under NodeNext, so @types/nodemailer is not involved.
import MailComposer from 'nodemailer/lib/mail-composer';
import type { MimeNodeHeader } from 'nodemailer/lib/mime-node';
import { parseMailbox, type Mailbox } from '../domain/address.js';
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
// C0 controls, DEL, NEL and the Unicode line/paragraph separators: each could end a header line.
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const CONTROLS = /[\u0000-\u001f\u007f\u0085\u2028\u2029]+/g;
// id-left@id-right of visible ASCII other than '<', '>' and '@': anything else could end the id or the header.
const MESSAGE_ID = /^[!-;=?A-~]+@[!-;=?A-~]+$/;

/**
 * Builds the complete RFC 5322 message, CRLF line endings throughout, ready for SMTP DATA or
 * capture storage. Callers already sanitize subject and names; they are cleaned again here
 * because this is the last point before bytes become headers.
 */
export async function composeMessage(message: OutgoingMessage): Promise<Buffer> {
  if (Number.isNaN(message.date.getTime())) throw new RangeError('composeMessage: invalid date');
  if (!MESSAGE_ID.test(message.messageId)) throw new TypeError('composeMessage: invalid messageId');
  const html = message.html ? normalizeNewlines(message.html) : undefined;
  const composer = new MailComposer({
    // Objects, never strings: nodemailer must not re-parse an address list out of user input.
    from: mailbox(message.from),
    to: mailbox(message.to),
    subject: singleLine(message.subject),
    messageId: `<${message.messageId}>`,
    date: message.date,
    // MailComposer drops a falsy text, which would turn an html message into a lone text/html
    // part; an empty Buffer is truthy, so the text/plain alternative is always there.
    text: message.text === '' ? Buffer.alloc(0) : normalizeNewlines(message.text),
    ...(html === undefined ? {} : { html }),
    headers: extraHeaders(message.headers ?? {}),
    textEncoding: 'quoted-printable',
    // Bodies are LF-normalized above; 'windows' turns every LF into CRLF on the way out.
    newline: 'windows',
    disableFileAccess: true,
    disableUrlAccess: true,
  });
  return composer.compile().build();
}

function mailbox(box: Mailbox): { name: string; address: string } {
  // Re-validated so that no caller can put a list, a group or a header break into From or To.
  if (parseMailbox(box.address) === null) throw new TypeError('composeMessage: invalid address');
  return { name: box.name === undefined ? '' : singleLine(box.name), address: box.address };
}

function singleLine(value: string): string {
  return value.replace(CONTROLS, ' ').trim();
}

function extraHeaders(headers: Readonly<Record<string, string>>): MimeNodeHeader[] {
  return Object.entries(headers).map(([key, value]) => {
    // Only X- names: a caller must never be able to set or override a standard header.
    if (!EXTRA_HEADER_NAME.test(key))
      throw new TypeError(`composeMessage: header ${JSON.stringify(key)} is not an X- header`);
    return { key, value: singleLine(String(value)) };
  });
}
