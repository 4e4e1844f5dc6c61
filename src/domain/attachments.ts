import { errors } from './errors.js';
import { contentTypeOf, executableContentType, executableExtension, looksExecutable } from './file-types.js';

/**
 * A send's `attachments` (product.md §12): at most 10 files of base64 content, at most 10 MiB
 * decoded in all, each with a filename kept to a safe form and a content type (given, or taken from
 * the extension). Executables are refused, by extension as Postmark refuses them, by content type,
 * and by their first bytes. Checked where the body is parsed, so the bytes are decoded once, off
 * the event loop for any body large enough to carry them.
 */

export const MAX_ATTACHMENTS = 10;
/** Decoded bytes of all of a send's files together (Postmark's limit). */
export const MAX_ATTACHMENT_BYTES = 10 * 1024 * 1024;
/** Characters of a filename as sent; a longer one is refused, not cut. */
export const MAX_FILENAME_LENGTH = 255;
const MAX_CONTENT_TYPE_LENGTH = 200;

/** What the status body, events and dashboard show of a file: never its bytes. */
export interface AttachmentInfo {
  readonly filename: string;
  readonly content_type: string;
  /** Decoded bytes. */
  readonly size: number;
}

export interface Attachment extends AttachmentInfo {
  readonly content: Uint8Array;
}

/** The fields a file may have; any other is refused, as a send's unknown fields are. */
const FIELDS = new Set(['filename', 'content', 'content_type']);

function refuse(problem: string) {
  return errors.invalidField(`Invalid 'attachments' (${problem})`);
}

// Controls, line and paragraph separators, and format characters (bidirectional overrides,
// zero-width characters), which can make `invoice‮fdp.exe` display as `invoiceexe.pdf`; the other
// characters Unicode says to show as nothing (variation selectors, the combining grapheme joiner),
// which make `x.exe` with one of them look like `x.exe` and not end in it; and lone surrogates,
// which are not text and would be stored as U+FFFD.
const INVISIBLE = /[\p{Cc}\p{Cf}\p{Cs}\p{Default_Ignorable_Code_Point}\u2028\u2029]/gu;
// Characters Windows refuses in a name, and the quote and backslash a header would have to escape.
const RESERVED = /["*:<>?|\\/]/g;
const DEVICE = /^(?:con|prn|aux|nul|com\d|lpt\d)(?:\.|$)/i;

/**
 * A filename as a recipient's mail client can save it without surprise: the last path segment
 * only, NFC, no invisible or reserved characters, no leading or trailing dots or spaces (no hidden
 * files, no `evil.exe.`), one space between words, and no DOS device name. Empty when nothing is left.
 */
export function safeFilename(name: string): string {
  const last = name.split(/[/\\]/).pop() ?? '';
  // Stripped before NFC: a character taken out from between two others could leave them unjoined.
  let safe = last
    .replace(INVISIBLE, '')
    .normalize('NFC')
    .replace(RESERVED, '_')
    .replace(/\s+/g, ' ')
    .replace(/^[\s.]+|[\s.]+$/g, '');
  if (DEVICE.test(safe)) safe = `_${safe}`;
  return safe;
}

/** The extension of a filename, lowercased, without its dot; '' for none. */
export function extensionOf(filename: string): string {
  const dot = filename.lastIndexOf('.');
  return dot <= 0 ? '' : filename.slice(dot + 1).toLowerCase();
}

const TOKEN = "[A-Za-z0-9!#$&^_.+'-]+";
/**
 * A media type's parameter (`charset=utf-8`, `charset="utf-8"`): a token, and a token or a quoted
 * string for its value, the quoted one of printable ASCII without `"`, `\\` or `;`: nothing a header
 * could misread, and nothing that splits it at a `;`. Nor `=?`, which opens an encoded word (RFC
 * 2047) that mail readers decode, forbidden inside quotes but decoded there all the same.
 */
export const MEDIA_TYPE_PARAMETER = `${TOKEN}=(?:${TOKEN}|"(?:(?!=\\?)[ !#-:<-\\[\\]-~])*")`;
// A media type (RFC 6838 names) with optional parameters.
const MEDIA_TYPE = new RegExp(
  `^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}(?:\\s*;\\s*${MEDIA_TYPE_PARAMETER})*$`,
);

/** A Content-Type parameter that names the file (`name`, or `filename` as some clients read it). */
const NAMING_PARAMETER = /^(?:name|filename)\*?\s*=/i;

/** A multipart or message part has a structure of its own, which a file's base64 would break. */
function composite(type: string): boolean {
  return type.startsWith('multipart/') || type.startsWith('message/');
}

function contentType(value: unknown, filename: string, at: string): string {
  if (value === undefined || value === null) {
    // An .eml file is message/rfc822 by its name, and goes as the bytes it is.
    const named = contentTypeOf(extensionOf(filename));
    return composite(named) ? 'application/octet-stream' : named;
  }
  if (typeof value !== 'string' || value.length > MAX_CONTENT_TYPE_LENGTH || !MEDIA_TYPE.test(value))
    throw refuse(`${at}.content_type is not a media type such as application/pdf`);
  // The type and subtype are case-insensitive; parameter values may not be (RFC 2045 §5.1).
  const [essence = '', ...params] = value.split(';').map((part) => part.trim());
  const type = essence.toLowerCase();
  if (composite(type))
    throw refuse(`${at}.content_type ${type} is not a file's type; use application/octet-stream`);
  // The file's name is `filename` alone: a second one here could show `evil.exe` for `doc.pdf`.
  if (params.some((param) => NAMING_PARAMETER.test(param)))
    throw refuse(`${at}.content_type names the file; give its name as filename only`);
  return [type, ...params].join('; ');
}

/**
 * Decoded bytes of strict base64: the standard alphabet, padded to a multiple of four, no line
 * breaks or spaces (what every language's plain encoder writes). Null when it is not.
 */
export function decodedLength(text: string): number | null {
  if (text.length % 4 !== 0) return null;
  const pad = text.endsWith('==') ? 2 : text.endsWith('=') ? 1 : 0;
  const body = pad === 0 ? text : text.slice(0, -pad);
  if (/[^A-Za-z0-9+/]/.test(body)) return null;
  return (text.length / 4) * 3 - pad;
}

/**
 * `attachments`: absent, null or `[]` is none (null); otherwise the files, decoded and checked.
 * Throws `Invalid 'attachments' (…)` naming the first problem and the file (`attachments[N]`).
 */
export function parseAttachments(value: unknown): Attachment[] | null {
  if (value === undefined || value === null) return null;
  if (!Array.isArray(value))
    throw refuse(`must be an array of at most ${MAX_ATTACHMENTS} files {filename, content, content_type?}`);
  if (value.length > MAX_ATTACHMENTS) throw refuse(`more than ${MAX_ATTACHMENTS} files`);
  // The sizes first, from the base64 lengths: nothing is decoded for a send that is refused anyway.
  let total = 0;
  const files = value.map((file: unknown, index) => {
    const at = `attachments[${index}]`;
    if (typeof file !== 'object' || file === null || Array.isArray(file))
      throw refuse(`${at} is not an object {filename, content, content_type?}`);
    const fields = file as Record<string, unknown>;
    const unknown = Object.keys(fields).find((key) => !FIELDS.has(key));
    if (unknown !== undefined) throw refuse(`${at} has an unknown field '${unknown.slice(0, 60)}'`);
    const { filename: raw, content } = fields;
    if (typeof raw !== 'string' || raw.length > MAX_FILENAME_LENGTH)
      throw refuse(`${at}.filename is missing or longer than ${MAX_FILENAME_LENGTH} characters`);
    const filename = safeFilename(raw);
    if (filename === '') throw refuse(`${at}.filename has no usable characters`);
    const extension = extensionOf(filename);
    if (executableExtension(extension))
      throw refuse(`${at}: .${extension} files are not allowed (executable)`);
    const type = contentType(fields.content_type, filename, at);
    if (executableContentType(type)) throw refuse(`${at}: ${type} is not allowed (executable)`);
    if (typeof content !== 'string') throw refuse(`${at}.content is missing (base64 text)`);
    const size = decodedLength(content);
    if (size === null)
      throw refuse(`${at}.content is not base64 (standard alphabet, padded, without line breaks)`);
    total += size;
    if (total > MAX_ATTACHMENT_BYTES) throw refuse('more than 10 MiB in all, decoded');
    return { filename, content_type: type, size, content, at };
  });
  if (files.length === 0) return null;
  return files.map(({ content, at, ...info }) => {
    const bytes = Buffer.from(content, 'base64');
    if (looksExecutable(bytes)) throw refuse(`${at} is an executable program`);
    return { ...info, content: bytes };
  });
}

/** The listing of files as stored with the message and shown in its status body. */
export function attachmentInfo(files: readonly AttachmentInfo[]): AttachmentInfo[] {
  return files.map(({ filename, content_type, size }) => ({ filename, content_type, size }));
}
