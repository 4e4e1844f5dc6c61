import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decodedLength, extensionOf, parseAttachments, safeFilename } from '../../src/domain/attachments.js';
import { HeraldError } from '../../src/domain/errors.js';
import {
  contentTypeOf,
  executableContentType,
  executableExtension,
  looksExecutable,
} from '../../src/domain/file-types.js';
import { metadataFilters, metadataFilterText, parseMetadata } from '../../src/domain/metadata.js';
import { parseSendRequest, SEND_FIELDS } from '../../src/domain/send-request.js';

/** product.md §12, the rules alone: filenames, file types, base64, metadata and its search filters. */

describe('safeFilename', () => {
  it.each([
    ['report.pdf', 'report.pdf'],
    ['../../etc/passwd', 'passwd'],
    ['C:\\Users\\jane\\Invoice.pdf', 'Invoice.pdf'],
    ['.bashrc', 'bashrc'],
    ['  spaced   out  .txt ', 'spaced out .txt'],
    ['evil.exe.', 'evil.exe'],
    ['evil.exe . . ', 'evil.exe'],
    ['a"b*c:d<e>f?g|h.txt', 'a_b_c_d_e_f_g_h.txt'],
    ['tab\there\nnew\rline.txt', 'tabherenewline.txt'],
    ['invoice\u202Efdp.exe', 'invoicefdp.exe'],
    ['zero\u200Bwidth.pdf', 'zerowidth.pdf'],
    ['x.exe\uFE0F', 'x.exe'],
    ['x.e\u034Fxe', 'x.exe'],
    ['cafe\u034F\u0301.pdf', 'café.pdf'],
    ['lone\ud800surrogate.pdf', 'lonesurrogate.pdf'],
    ['emoji \ud83d\ude00.pdf', 'emoji 😀.pdf'],
    ['Cafe\u0301.pdf', 'Café.pdf'],
    ['CON', '_CON'],
    ['nul.txt', '_nul.txt'],
    ['com1.pdf', '_com1.pdf'],
    ['console.txt', 'console.txt'],
    ['請求書.pdf', '請求書.pdf'],
    ['...', ''],
    ['\u202E', ''],
  ])('%j → %j', (raw, safe) => {
    expect(safeFilename(raw)).toBe(safe);
  });

  it('never keeps a path separator, a control, a quote or a leading or trailing dot or space', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 60 }), (raw) => {
        const safe = safeFilename(raw);
        expect(safe).not.toMatch(/[/\\"\p{Cc}\p{Cf}\p{Default_Ignorable_Code_Point}]|^[\s.]|[\s.]$/u);
        expect(safeFilename(safe)).toBe(safe);
      }),
    );
  });
});

describe('file types', () => {
  it('refuses the executables Postmark refuses and those product.md names, in any case', () => {
    for (const ext of [
      'exe',
      'EXE',
      'bat',
      'cmd',
      'com',
      'js',
      'vbs',
      'scr',
      'msi',
      'jar',
      'vbe',
      'wsf',
      'ps1',
      'lnk',
    ])
      expect(executableExtension(ext), ext).toBe(true);
    for (const ext of ['pdf', 'txt', 'csv', 'zip', 'png', 'docx', 'json', 'ics', ''])
      expect(executableExtension(ext), ext).toBe(false);
  });

  it('refuses program content types, parameters or not', () => {
    expect(executableContentType('application/x-msdownload')).toBe(true);
    expect(executableContentType('Application/JavaScript; charset=utf-8')).toBe(true);
    expect(executableContentType('application/pdf')).toBe(false);
    expect(executableContentType('text/plain')).toBe(false);
  });

  it('recognises a PE image or an ELF binary by its bytes, and nothing that only starts like one', () => {
    const pe = Buffer.alloc(256);
    pe.write('MZ', 0, 'latin1');
    pe.writeUInt32LE(0x80, 0x3c);
    pe.write('PE\0\0', 0x80, 'latin1');
    expect(looksExecutable(pe)).toBe(true);
    expect(looksExecutable(Buffer.from('\x7fELF\x02\x01\x01', 'latin1'))).toBe(true);
    const dosText = Buffer.from(`MZ,${'x'.repeat(100)}`);
    expect(looksExecutable(dosText)).toBe(false);
    const pointsOutside = Buffer.from(pe);
    pointsOutside.writeUInt32LE(0xfffffff0, 0x3c);
    expect(looksExecutable(pointsOutside)).toBe(false);
    expect(looksExecutable(Buffer.from('%PDF-1.7'))).toBe(false);
    expect(looksExecutable(Buffer.alloc(0))).toBe(false);
  });

  it('gives a file without a content type one from its extension', () => {
    expect(contentTypeOf('pdf')).toBe('application/pdf');
    expect(contentTypeOf('ics')).toBe('text/calendar');
    expect(contentTypeOf('unknown')).toBe('application/octet-stream');
    expect(contentTypeOf('constructor')).toBe('application/octet-stream');
    expect(extensionOf('archive.tar.GZ')).toBe('gz');
    expect(extensionOf('README')).toBe('');
  });
});

describe('decodedLength', () => {
  it('agrees with the decoder on every strict base64 text', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), (bytes) => {
        const text = Buffer.from(bytes).toString('base64');
        expect(decodedLength(text)).toBe(bytes.length);
      }),
    );
  });

  it.each(['aGVsbG8', 'aGVs\nbG8=', 'aGVs bG8=', 'a===', '=aGV', 'aG=s', '-_-_', 'aGVsbG8=\n'])(
    'refuses %j',
    (text) => {
      expect(decodedLength(text)).toBeNull();
    },
  );
});

describe('parseAttachments', () => {
  it('decodes each file and keeps its safe name and type', () => {
    const files = parseAttachments([
      { filename: 'dir/a.PDF', content: Buffer.from('pdf').toString('base64') },
      { filename: 'b', content: '', content_type: 'TEXT/CSV; charset=UTF-8' },
    ]);
    expect(
      files?.map(({ content, ...info }) => ({ ...info, bytes: Buffer.from(content).toString() })),
    ).toEqual([
      { filename: 'a.PDF', content_type: 'application/pdf', size: 3, bytes: 'pdf' },
      { filename: 'b', content_type: 'text/csv; charset=UTF-8', size: 0, bytes: '' },
    ]);
    expect(parseAttachments([])).toBeNull();
    expect(parseAttachments(null)).toBeNull();
  });

  it('refuses a content type that names the file, or that a file cannot be sent as', () => {
    const file = (content_type: string) => [{ filename: 'doc.pdf', content: 'aGVsbG8=', content_type }];
    for (const type of ['application/pdf; name=evil.exe', 'application/pdf;FILENAME=evil.exe'])
      expect(() => parseAttachments(file(type))).toThrow(
        "Invalid 'attachments' (attachments[0].content_type names the file; give its name as filename only)",
      );
    for (const type of ['multipart/mixed; boundary=abc', 'Message/RFC822', 'message/partial; id=x'])
      expect(() => parseAttachments(file(type))).toThrow(
        /content_type (multipart|message)\/\S+ is not a file's type/,
      );
    expect(parseAttachments(file('application/pdf; charset=binary'))?.[0]?.content_type).toBe(
      'application/pdf; charset=binary',
    );
    // An .eml file by its name alone goes as bytes, not as a message part.
    expect(parseAttachments([{ filename: 'forwarded.eml', content: 'aGVsbG8=' }])?.[0]?.content_type).toBe(
      'application/octet-stream',
    );
  });

  it('counts the size before decoding anything', () => {
    const big = 'A'.repeat(Math.ceil((10 * 1024 * 1024 + 1) / 3) * 4);
    expect(() => parseAttachments([{ filename: 'a.bin2', content: big }])).toThrow(
      "Invalid 'attachments' (more than 10 MiB in all, decoded)",
    );
  });
});

describe('metadata', () => {
  it('takes string values under keys of [A-Za-z0-9_.-]', () => {
    expect(parseMetadata({ order_id: 'o-77', 'a.b-c_D9': '' })).toEqual({ order_id: 'o-77', 'a.b-c_D9': '' });
    expect(parseMetadata({})).toBeNull();
    expect(parseMetadata(null)).toBeNull();
    expect(() => parseMetadata({ k: 'a\0b' })).toThrow(
      "Invalid 'metadata' (the value of 'k' contains a NUL character)",
    );
    expect(() => parseMetadata({ é: 'v' })).toThrow(HeraldError);
    expect(() => parseMetadata('order_id=o-77')).toThrow(/^Invalid 'metadata' \(must be a JSON object/);
  });

  it('reads metadata.KEY=VALUE search conditions, refusing one no message could match', () => {
    expect(
      metadataFilters({ 'metadata.order_id': 'o-77', status: 'sent', 'metadata.x': ['1', '2'] }),
    ).toEqual([
      { key: 'order_id', value: 'o-77' },
      { key: 'x', value: '1' },
    ]);
    expect(() => metadataFilters({ 'metadata.bad key': 'v' })).toThrow(/^Invalid 'metadata\.bad key' filter/);
    expect(() => metadataFilters({ 'metadata.k': 'v'.repeat(501) })).toThrow(/longer than 500/);
    const many = Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`metadata.k${i}`, 'v']));
    expect(() => metadataFilters(many)).toThrow('At most 20 metadata filters');
    expect(metadataFilterText(' order_id = o-77 ')).toEqual({ key: 'order_id', value: ' o-77' });
    expect(metadataFilterText('k=a=b')).toEqual({ key: 'k', value: 'a=b' });
    expect(metadataFilterText('  ')).toBeNull();
    expect(() => metadataFilterText('order_id')).toThrow(
      'A metadata filter is KEY=VALUE, e.g. order_id=o-77',
    );
  });
});

describe('unknown fields', () => {
  it('refuses any field not in the list, after template, type and to', () => {
    const body = { template: 't', to: 'a@example.org' };
    // Every known field but the two that must have a value may be null, meaning none.
    for (const field of SEND_FIELDS.filter((f) => f !== 'template' && f !== 'type'))
      expect(() => parseSendRequest({ ...body, [field]: null }), field).not.toThrow();
    expect(() => parseSendRequest({ ...body, cc: 'b@example.org' })).toThrow("Unknown field 'cc'");
    expect(() => parseSendRequest({ ...body, __proto__x: 1 })).toThrow("Unknown field '__proto__x'");
    expect(() => parseSendRequest({ to: 'nope', cc: 1, template: 't' })).toThrow(
      "Missing or invalid 'to' (recipient email)",
    );
  });
});
