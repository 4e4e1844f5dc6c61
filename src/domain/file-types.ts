/**
 * What an attachment is, from its name, its declared type and its first bytes: the content type a
 * file without one gets, and whether it is a program a recipient could run by opening it.
 */

/**
 * Extensions refused as executable: Postmark's list of forbidden attachment types, with the
 * script and installer types product.md §12 names (`cmd`, `js`, `jar`) and those Gmail refuses
 * (`ade`, `adp`, `lib`, `sys`, `vb`, `vxd`, `wsc`, …). Mail clients and operating systems run
 * these on a double click; a caller who must send one zips it.
 */
export const EXECUTABLE_EXTENSIONS: ReadonlySet<string> = new Set([
  // Postmark
  'vbs', 'exe', 'bin', 'bat', 'chm', 'com', 'cpl', 'crt', 'hlp', 'hta', 'inf', 'ins', 'isp', 'jse',
  'lnk', 'mdb', 'pcd', 'pif', 'reg', 'scr', 'sct', 'shs', 'vbe', 'vba', 'wsf', 'wsh', 'wsl', 'msc',
  'msi', 'msp', 'mst',
  // product.md §12
  'cmd', 'js', 'jar',
  // Gmail
  'ade', 'adp', 'lib', 'mde', 'shb', 'sys', 'vb', 'vxd', 'wsc',
  // PowerShell, Windows shortcuts and installers that run as programs
  'ps1', 'psm1', 'scf', 'appx', 'msix', 'appref-ms', 'application', 'gadget',
]); // prettier-ignore

/** Content types of programs and scripts, refused whatever the filename says. */
const EXECUTABLE_TYPES: ReadonlySet<string> = new Set([
  'application/x-msdownload',
  'application/x-msdos-program',
  'application/x-dosexec',
  'application/x-executable',
  'application/x-ms-dos-executable',
  'application/vnd.microsoft.portable-executable',
  'application/x-msi',
  'application/x-ms-installer',
  'application/x-ms-shortcut',
  'application/x-bat',
  'application/hta',
  'application/java-archive',
  'application/x-java-archive',
  'application/javascript',
  'application/x-javascript',
  'application/ecmascript',
  'text/javascript',
  'text/ecmascript',
  'text/jscript',
  'text/vbscript',
  'application/x-vbscript',
]);

export function executableExtension(extension: string): boolean {
  return EXECUTABLE_EXTENSIONS.has(extension.toLowerCase());
}

/** Whether a content type (parameters allowed) names a program or script. */
export function executableContentType(type: string): boolean {
  return EXECUTABLE_TYPES.has(type.split(';')[0]!.trim().toLowerCase());
}

/**
 * Whether the bytes are a program whatever their name: a Windows PE image (`MZ`, and the `PE\0\0`
 * signature where its header points) or an ELF binary. Both signatures are exact, so a text or
 * image that merely starts with `MZ` is not mistaken for one.
 */
export function looksExecutable(bytes: Uint8Array): boolean {
  if (bytes.length >= 4 && bytes[0] === 0x7f && bytes[1] === 0x45 && bytes[2] === 0x4c && bytes[3] === 0x46)
    return true;
  if (bytes.length < 0x40 || bytes[0] !== 0x4d || bytes[1] !== 0x5a) return false;
  const pe = bytes[0x3c]! | (bytes[0x3d]! << 8) | (bytes[0x3e]! << 16) | (bytes[0x3f]! << 24);
  return (
    pe >= 0x40 &&
    pe + 4 <= bytes.length &&
    bytes[pe] === 0x50 &&
    bytes[pe + 1] === 0x45 &&
    bytes[pe + 2] === 0 &&
    bytes[pe + 3] === 0
  );
}

/** Content types of the extensions people attach most; anything else is application/octet-stream. */
const TYPES: Readonly<Record<string, string>> = {
  pdf: 'application/pdf',
  txt: 'text/plain',
  csv: 'text/csv',
  tsv: 'text/tab-separated-values',
  htm: 'text/html',
  html: 'text/html',
  md: 'text/markdown',
  ics: 'text/calendar',
  vcf: 'text/vcard',
  json: 'application/json',
  xml: 'application/xml',
  rtf: 'application/rtf',
  png: 'image/png',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  gif: 'image/gif',
  webp: 'image/webp',
  svg: 'image/svg+xml',
  bmp: 'image/bmp',
  tif: 'image/tiff',
  tiff: 'image/tiff',
  heic: 'image/heic',
  ico: 'image/vnd.microsoft.icon',
  mp3: 'audio/mpeg',
  wav: 'audio/wav',
  ogg: 'audio/ogg',
  m4a: 'audio/mp4',
  mp4: 'video/mp4',
  mov: 'video/quicktime',
  webm: 'video/webm',
  zip: 'application/zip',
  gz: 'application/gzip',
  tgz: 'application/gzip',
  tar: 'application/x-tar',
  '7z': 'application/x-7z-compressed',
  rar: 'application/vnd.rar',
  eml: 'message/rfc822',
  doc: 'application/msword',
  docx: 'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
  xls: 'application/vnd.ms-excel',
  xlsx: 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
  ppt: 'application/vnd.ms-powerpoint',
  pptx: 'application/vnd.openxmlformats-officedocument.presentationml.presentation',
  odt: 'application/vnd.oasis.opendocument.text',
  ods: 'application/vnd.oasis.opendocument.spreadsheet',
  odp: 'application/vnd.oasis.opendocument.presentation',
  epub: 'application/epub+zip',
  pkpass: 'application/vnd.apple.pkpass',
};

/** The content type of a file with this extension (lowercase, no dot). */
export function contentTypeOf(extension: string): string {
  return Object.prototype.hasOwnProperty.call(TYPES, extension)
    ? TYPES[extension]!
    : 'application/octet-stream';
}
