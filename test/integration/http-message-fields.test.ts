import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { countNotifications, expectError, send, sendOk, statusOf } from '../helpers/http.js';
import { createTestContext, seedProject, type TestContext } from '../helpers/services.js';

/**
 * product.md §12 over HTTP: unknown fields refused, `reply_to`, `metadata` and `attachments` with
 * their limits and error strings, the body limits of a send with files, and what the status body
 * shows. Nothing refused is stored.
 */

let ctx: TestContext;
let apiKey: string;
let projectId: number;

beforeAll(async () => {
  ctx = await createTestContext();
  ({ apiKey, projectId } = await seedProject(ctx.services));
});
afterAll(() => ctx.close());

const base = { template: 'user_created', to: 'jane@example.org' };
const b64 = (text: string | Buffer) => Buffer.from(text).toString('base64');
const KiB = 1024;
const MiB = 1024 * 1024;

const batch = (items: unknown[]) =>
  ctx.app.inject({
    method: 'POST',
    url: '/api/v1/notifications/batch',
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
    payload: JSON.stringify(items),
  });

/** Sends a body that must be refused with this error, and checks that nothing was stored. */
async function refused(body: unknown, status: number, error: string | RegExp): Promise<void> {
  const before = await countNotifications(ctx.services, projectId);
  expectError(await send(ctx.app, apiKey, body), status, error);
  expect(await countNotifications(ctx.services, projectId)).toBe(before);
}

describe('unknown fields', () => {
  it.each(['cc', 'bcc', 'subject', 'Template', 'headers', 'from'])("refuses '%s' by name", async (field) => {
    await refused({ ...base, [field]: 'x@example.org' }, 400, `Unknown field '${field}'`);
  });

  it('checks them after template, type and to, and before everything else', async () => {
    await refused({ cc: 'x@example.org' }, 400, "Missing or invalid 'template'");
    await refused({ ...base, type: 'sms', cc: 'x' }, 400, "Only 'email' type is supported");
    await refused({ ...base, to: 'nope', cc: 'x' }, 400, "Missing or invalid 'to' (recipient email)");
    await refused({ ...base, cc: 'x', data: 5 }, 400, "Unknown field 'cc'");
    await refused({ ...base, cc: 'x', attachments: 5 }, 400, "Unknown field 'cc'");
  });

  it('refuses them in a batch item, naming the item', async () => {
    const response = await batch([base, { ...base, cc: 'x@example.org' }]);
    expect(response.statusCode).toBe(400);
    expect(response.json()).toEqual({
      error: "Unknown field 'cc' (item 1)",
      errors: [{ index: 1, error: "Unknown field 'cc'" }],
    });
  });
});

describe('reply_to', () => {
  it('is kept and shown in the status body', async () => {
    const sent = await sendOk(ctx.app, apiKey, { ...base, reply_to: 'Support Desk <help@shop.example>' });
    expect((await statusOf(ctx.app, apiKey, sent.request_id)).reply_to).toBe(
      '"Support Desk" <help@shop.example>',
    );
  });

  it.each([
    ['not an address', 'help desk', 'An address needs an @, e.g. jane@example.org'],
    ['two addresses', 'a@example.org, b@example.org', 'Give one address: a message has one Reply-To'],
    [
      'a header break',
      'a@example.org\r\nBcc: victim@example.org',
      'An address may not contain a line break or a control character',
    ],
    ['a number', 5, 'Give one address as a string, e.g. "jane@example.org"'],
    [
      'a direction override',
      'Help\u202eksed <help@shop.example>',
      'An address may not contain a direction override (U+202A–U+202E, U+2066–U+2069), which can show its name as another',
    ],
  ])("refuses %s with Invalid 'reply_to', and says why", async (_name, value, hint) => {
    await refused({ ...base, reply_to: value }, 400, "Invalid 'reply_to'");
    expect((await send(ctx.app, apiKey, { ...base, reply_to: value })).json()).toEqual({
      error: "Invalid 'reply_to'",
      hint,
    });
  });
});

describe('metadata', () => {
  it('is kept and shown in the status body', async () => {
    const metadata = { order_id: 'o-77', 'tenant.id': 'T_1', empty: '' };
    const sent = await sendOk(ctx.app, apiKey, { ...base, metadata });
    expect((await statusOf(ctx.app, apiKey, sent.request_id)).metadata).toEqual(metadata);
  });

  it('takes 20 keys of 40 characters with values of 500', async () => {
    const metadata = Object.fromEntries(
      Array.from({ length: 20 }, (_, i) => [
        `${String(i).padStart(2, '0')}${'k'.repeat(38)}`,
        'v'.repeat(500),
      ]),
    );
    const sent = await sendOk(ctx.app, apiKey, { ...base, metadata });
    expect((await statusOf(ctx.app, apiKey, sent.request_id)).metadata).toEqual(metadata);
  });

  it.each([
    ['an array', ['a'], /^Invalid 'metadata' \(must be a JSON object/],
    [
      '21 keys',
      Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`k${i}`, 'v'])),
      "Invalid 'metadata' (more than 20 keys)",
    ],
    ['a key of 41 characters', { ['k'.repeat(41)]: 'v' }, /^Invalid 'metadata' \(key "k+" is not 1–40/],
    ['a key with a space', { 'order id': 'v' }, /^Invalid 'metadata' \(key "order id"/],
    ['an empty key', { '': 'v' }, /^Invalid 'metadata' \(key ""/],
    ['a number', { n: 5 }, "Invalid 'metadata' (the value of 'n' is not a string)"],
    [
      'a value of 501 characters',
      { v: 'x'.repeat(501) },
      "Invalid 'metadata' (the value of 'v' is longer than 500 characters)",
    ],
  ])('refuses %s', async (_name, metadata, error) => {
    await refused({ ...base, metadata }, 400, error);
  });
});

describe('attachments', () => {
  it('lists each file in the status body with its safe name, type and size', async () => {
    const sent = await sendOk(ctx.app, apiKey, {
      ...base,
      attachments: [
        { filename: 'Invoice 2026-11.pdf', content: b64('%PDF-1.7 fake') },
        {
          filename: '../../etc/Résumé.txt',
          content: b64('héllo'),
          content_type: 'Text/Plain; charset=utf-8',
        },
        { filename: '.hidden data', content: '' },
        // A parameter's value may be quoted, as RFC 2045 allows and many mail libraries write it.
        { filename: 'rows.csv', content: b64('a,b'), content_type: 'text/csv; charset="utf-8"' },
      ],
    });
    expect((await statusOf(ctx.app, apiKey, sent.request_id)).attachments).toEqual([
      { filename: 'Invoice 2026-11.pdf', content_type: 'application/pdf', size: 13 },
      { filename: 'Résumé.txt', content_type: 'text/plain; charset=utf-8', size: 6 },
      { filename: 'hidden data', content_type: 'application/octet-stream', size: 0 },
      { filename: 'rows.csv', content_type: 'text/csv; charset="utf-8"', size: 3 },
    ]);
  });

  const pe = Buffer.alloc(128);
  pe.write('MZ', 0, 'latin1');
  pe.writeUInt32LE(64, 0x3c);
  pe.write('PE\0\0', 64, 'latin1');

  it.each([
    ['not an array', { filename: 'a.txt', content: '' }, /^Invalid 'attachments' \(must be an array/],
    [
      '11 files',
      Array.from({ length: 11 }, () => ({ filename: 'a.txt', content: '' })),
      "Invalid 'attachments' (more than 10 files)",
    ],
    [
      'a file that is not an object',
      ['a.txt'],
      "Invalid 'attachments' (attachments[0] is not an object {filename, content, content_type?})",
    ],
    [
      'an unknown field in a file',
      [{ filename: 'a.txt', content: '', cid: 'x' }],
      "Invalid 'attachments' (attachments[0] has an unknown field 'cid')",
    ],
    ['no filename', [{ content: '' }], /^Invalid 'attachments' \(attachments\[0\]\.filename is missing/],
    [
      'a filename of nothing but dots',
      [{ filename: ' .. ', content: '' }],
      "Invalid 'attachments' (attachments[0].filename has no usable characters)",
    ],
    [
      'an .exe',
      [{ filename: 'setup.exe', content: '' }],
      "Invalid 'attachments' (attachments[0]: .exe files are not allowed (executable))",
    ],
    ['an .EXE with a trailing dot', [{ filename: 'SETUP.EXE.', content: '' }], /\.exe files are not allowed/],
    [
      'a .js hidden behind a right-to-left override',
      [{ filename: 'invoice\u202Efdp.js', content: '' }],
      /\.js files are not allowed/,
    ],
    [
      'a file without content',
      [{ filename: 'a.txt' }, { filename: 'run.vbs', content: '' }],
      /attachments\[0\]\.content is missing/,
    ],
    [
      'a .bat second',
      [
        { filename: 'a.txt', content: '' },
        { filename: 'run.bat', content: '' },
      ],
      /attachments\[1\]: \.bat files are not allowed/,
    ],
    [
      'an executable content type',
      [{ filename: 'a.bin2', content: '', content_type: 'application/x-msdownload' }],
      "Invalid 'attachments' (attachments[0]: application/x-msdownload is not allowed (executable))",
    ],
    [
      'a content type that is not one',
      [{ filename: 'a.pdf', content: '', content_type: 'a.pdf' }],
      "Invalid 'attachments' (attachments[0].content_type is not a media type such as application/pdf)",
    ],
    [
      'a quoted parameter with a quote in it',
      [{ filename: 'a.txt', content: '', content_type: 'text/plain; x="a\\"; Bcc: y"' }],
      /content_type is not a media type/,
    ],
    [
      'a quoted parameter holding an encoded word',
      [{ filename: 'a.csv', content: '', content_type: 'text/csv; charset="=?utf-8?B?bmFtZT0ieC5leGUi?="' }],
      /content_type is not a media type/,
    ],
    [
      'a quoted parameter that names the file',
      [{ filename: 'a.txt', content: '', content_type: 'text/plain; name="evil.exe"' }],
      "Invalid 'attachments' (attachments[0].content_type names the file; give its name as filename only)",
    ],
    [
      'a content type with a header break',
      [{ filename: 'a.pdf', content: '', content_type: 'text/plain\r\nBcc: x@y.org' }],
      /content_type is not a media type/,
    ],
    [
      'base64 with a line break',
      [{ filename: 'a.txt', content: 'aGVs\nbG8=' }],
      "Invalid 'attachments' (attachments[0].content is not base64 (standard alphabet, padded, without line breaks))",
    ],
    ['base64 without padding', [{ filename: 'a.txt', content: 'aGVsbG8' }], /content is not base64/],
    ['base64url', [{ filename: 'a.txt', content: '-_-_' }], /content is not base64/],
    [
      'a Windows program named .pdf',
      [{ filename: 'invoice.pdf', content: pe.toString('base64') }],
      "Invalid 'attachments' (attachments[0] is an executable program)",
    ],
  ])('refuses %s', async (_name, attachments, error) => {
    await refused({ ...base, attachments }, 400, error);
  });

  it('takes 10 MiB in all and refuses a byte more', async () => {
    const half = Buffer.alloc(5 * MiB, 7).toString('base64');
    const sent = await sendOk(ctx.app, apiKey, {
      ...base,
      attachments: [
        { filename: 'a.bin2', content: half },
        { filename: 'b.dat', content: half },
      ],
    });
    expect((await statusOf(ctx.app, apiKey, sent.request_id)).attachments?.map((f) => f.size)).toEqual([
      5 * MiB,
      5 * MiB,
    ]);
    await refused(
      {
        ...base,
        attachments: [
          { filename: 'a.dat', content: half },
          { filename: 'b.dat', content: Buffer.alloc(5 * MiB + 1).toString('base64') },
        ],
      },
      400,
      "Invalid 'attachments' (more than 10 MiB in all, decoded)",
    );
  });

  it('checks them last, after every other field', async () => {
    await refused(
      { ...base, metadata: [], attachments: [{ filename: 'a.exe', content: '' }] },
      400,
      /^Invalid 'metadata'/,
    );
  });

  it('are refused in a batch', async () => {
    const response = await batch([base, { ...base, attachments: [{ filename: 'a.txt', content: '' }] }]);
    expect(response.statusCode).toBe(400);
    const error = "Invalid 'attachments' (not allowed in a batch: send a message with files on its own)";
    expect(response.json()).toEqual({ error: `${error} (item 1)`, errors: [{ index: 1, error }] });
    // `null` is no files, as in a single send.
    expect((await batch([{ ...base, attachments: null, metadata: { a: 'b' } }])).statusCode).toBe(202);
  });
});

describe('body limits', () => {
  it('takes a send of up to 15 MiB when files make up all but 256 KiB of it', async () => {
    const sent = await sendOk(ctx.app, apiKey, {
      ...base,
      data: { note: 'n'.repeat(200 * KiB) },
      attachments: [{ filename: 'big.zip', content: Buffer.alloc(10 * MiB, 1).toString('base64') }],
    });
    expect((await statusOf(ctx.app, apiKey, sent.request_id)).attachments).toEqual([
      { filename: 'big.zip', content_type: 'application/zip', size: 10 * MiB },
    ]);
  });

  it('refuses a send whose fields beside the files are over 256 KiB, files or not', async () => {
    await refused(
      { ...base, data: { note: 'n'.repeat(300 * KiB) } },
      413,
      'Request body is larger than 256 KiB',
    );
    await refused(
      {
        ...base,
        data: { note: 'n'.repeat(300 * KiB) },
        attachments: [{ filename: 'a.txt', content: b64('hello') }],
      },
      413,
      'Request body is larger than 256 KiB',
    );
    // Bytes that only look like files (a string value, not the field) do not count as files.
    await refused(
      { ...base, data: { attachments: 'n'.repeat(300 * KiB) } },
      413,
      'Request body is larger than 256 KiB',
    );
  });

  it('refuses a body over 15 MiB', async () => {
    const content = Buffer.alloc(11 * MiB + 512 * KiB).toString('base64');
    await refused(
      { ...base, attachments: [{ filename: 'a.zip', content }] },
      413,
      'Request body is larger than 15 MiB',
    );
  });

  it('keeps the batch limit at 5 MiB', async () => {
    const response = await batch([{ ...base, data: { note: 'n'.repeat(5 * MiB) } }]);
    expectError(response, 413, 'Request body is larger than 5 MiB');
  });
});

describe('Idempotency-Key with files', () => {
  it('replays the first response for the same body, and refuses another body', async () => {
    const body = {
      ...base,
      attachments: [{ filename: 'a.txt', content: Buffer.alloc(300 * KiB, 3).toString('base64') }],
    };
    const headers = { 'idempotency-key': 'files-1' };
    const first = await send(ctx.app, apiKey, body, headers);
    expect(first.statusCode).toBe(202);
    const again = await send(ctx.app, apiKey, body, headers);
    expect(again.statusCode).toBe(202);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.json()).toEqual(first.json());
    const other = {
      ...body,
      attachments: [{ filename: 'a.txt', content: Buffer.alloc(300 * KiB, 4).toString('base64') }],
    };
    expect((await send(ctx.app, apiKey, other, headers)).statusCode).toBe(422);
  });
});
