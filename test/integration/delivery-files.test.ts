import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWorker, type Worker } from '../../src/roles.js';
import { parseSmtpUrl } from '../../src/mail/smtp-target.js';
import { Deliverer } from '../../src/worker/deliver.js';
import { settledStatus } from '../helpers/http.js';
import { createTestContext, seedProject, type TestContext } from '../helpers/services.js';
import { SmtpSink, type ReceivedMessage } from '../helpers/smtp-sink.js';

/**
 * product.md §12 end to end: a send with files, a Reply-To and metadata goes through the store and
 * the worker to a real SMTP server, which receives every file byte for byte as a MIME part with
 * its type and its name (RFC 2231 where it is not ASCII), and the Reply-To header. The files are
 * read from the store once per attempt, and not at all for a message that is only captured.
 */

let sink: SmtpSink;
let ctx: TestContext;
let worker: Worker;
let apiKey: string;

beforeAll(async () => {
  sink = await new SmtpSink().start();
  ctx = await createTestContext({ HERALD_SMTP_URL: sink.url, HERALD_DELIVERY_POLL_MS: '20' });
  worker = createWorker(ctx.services);
  worker.start();
  ({ apiKey } = await seedProject(ctx.services, {
    template: {
      name: 'invoice',
      subject: 'Your invoice {{number}}',
      text: 'Invoice {{number}} is attached.',
      html: '<p>Invoice <b>{{number}}</b> is attached.</p>',
    },
  }));
});
afterAll(async () => {
  await worker?.stop();
  await ctx?.close();
  await sink?.stop();
});

async function deliver(body: Record<string, unknown>): Promise<ReceivedMessage> {
  const response = await ctx.app.inject({
    method: 'POST',
    url: '/api/v1/notifications',
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
    payload: JSON.stringify({
      template: 'invoice',
      to: 'jane@example.org',
      data: { number: 'A-1' },
      ...body,
    }),
  });
  expect(response.statusCode, response.body).toBe(202);
  const requestId = response.json<{ request_id: string }>().request_id;
  expect(await settledStatus(ctx.app, apiKey, requestId)).toMatchObject({
    status: 'sent',
    transport: 'smtp',
  });
  const message = sink.messages.find((m) => m.parsed.headers.get('x-herald-request-id') === requestId);
  expect(message).toBeDefined();
  return message!;
}

describe('a send with files over SMTP', () => {
  it('arrives with every file byte for byte, its type and its name, beside the text and HTML', async () => {
    const files = [
      { filename: 'Invoice A-1.pdf', content: randomBytes(700 * 1024) },
      {
        filename: 'Résumé – 2026.txt',
        content: Buffer.from('Grüße, 世界\r\n'),
        content_type: 'text/plain; charset="utf-8"',
      },
      { filename: '請求書 (copy).csv', content: randomBytes(57 * 3 + 1) },
      { filename: 'empty.dat', content: Buffer.alloc(0) },
    ];
    const message = await deliver({
      attachments: files.map(({ content, ...rest }) => ({ ...rest, content: content.toString('base64') })),
    });
    const { parsed, raw } = message;
    expect(parsed.headers.get('content-type')).toMatchObject({ value: 'multipart/mixed' });
    expect(parsed.text?.trim()).toBe('Invoice A-1 is attached.');
    expect(parsed.html).toContain('<p>Invoice <b>A-1</b> is attached.</p>');
    expect(
      parsed.attachments.map((a) => ({
        filename: a.filename,
        contentType: a.contentType,
        size: a.content.length,
      })),
    ).toEqual([
      { filename: 'Invoice A-1.pdf', contentType: 'application/pdf', size: 700 * 1024 },
      { filename: 'Résumé – 2026.txt', contentType: 'text/plain', size: files[1]!.content.length },
      { filename: '請求書 (copy).csv', contentType: 'text/csv', size: 57 * 3 + 1 },
      { filename: 'empty.dat', contentType: 'application/octet-stream', size: 0 },
    ]);
    parsed.attachments.forEach((a, i) => expect(a.content.equals(files[i]!.content), a.filename).toBe(true));
    for (const a of parsed.attachments) expect(a.contentDisposition).toBe('attachment');
    const text = raw.toString('latin1');
    // Non-ASCII names as RFC 2231 parameters (UTF-8, percent-encoded), never raw 8-bit bytes.
    expect(text).toMatch(/filename\*0\*=utf-8''R%C3%A9sum%C3%A9/);
    expect(text).toMatch(/name\*0\*=utf-8''%E8%AB%8B%E6%B1%82%E6%9B%B8/);
    expect(text).not.toMatch(/[^\t\r\n -~]/);
    // base64 in lines of at most 76, CRLF throughout.
    for (const line of text.split('\r\n')) expect(line.length).toBeLessThanOrEqual(998);
    expect(text).not.toMatch(/[^\r]\n/);
    const base64Lines = text.split('\r\n').filter((line) => /^[A-Za-z0-9+/]{40,}=*$/.test(line));
    expect(base64Lines.length).toBeGreaterThan(9000);
    for (const line of base64Lines) expect(line.length).toBeLessThanOrEqual(76);
  });

  it('carries 10 MiB of files in all', async () => {
    const files = [randomBytes(4 * 1024 * 1024), randomBytes(4 * 1024 * 1024), randomBytes(2 * 1024 * 1024)];
    const message = await deliver({
      attachments: files.map((content, i) => ({
        filename: `part-${i}.bin2`,
        content: content.toString('base64'),
      })),
    });
    expect(message.parsed.attachments).toHaveLength(3);
    message.parsed.attachments.forEach((a, i) => expect(a.content.equals(files[i]!)).toBe(true));
  });

  it('sets Reply-To, one mailbox, with its display name', async () => {
    const message = await deliver({ reply_to: '"Billing, Shop" <billing@shop.example>' });
    expect(message.parsed.replyTo?.value).toEqual([
      { name: 'Billing, Shop', address: 'billing@shop.example' },
    ]);
    expect(message.raw.toString('latin1')).toMatch(/^Reply-To: "Billing, Shop" <billing@shop\.example>\r$/m);
    // Without files the message keeps its plain shape.
    expect(message.parsed.headers.get('content-type')).toMatchObject({ value: 'multipart/alternative' });
  });
});

describe('reading the files', () => {
  it('happens once per attempt that sends them, and not for a captured message', async () => {
    const sent = await ctx.app.inject({
      method: 'POST',
      url: '/api/v1/notifications',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      payload: JSON.stringify({
        template: 'invoice',
        to: 'jane@example.org',
        attachments: [{ filename: 'a.txt', content: Buffer.from('one').toString('base64') }],
      }),
    });
    const requestId = sent.json<{ request_id: string }>().request_id;
    await settledStatus(ctx.app, apiKey, requestId);
    const { notification } = await ctx.services.notifications.detail(requestId);
    const reads: number[] = [];
    const files = (id: number) => {
      reads.push(id);
      return Promise.resolve([Buffer.from('one')]);
    };
    const context = await ctx.services.loader.batch().load(notification.project_id, 'invoice');
    const options = { mailer: ctx.services.deliverer.mailer, defaultFrom: null, files };
    const smtp = new Deliverer({ ...options, globalSmtp: parseSmtpUrl(sink.url), production: false });
    expect(await smtp.attempt(notification, context)).toMatchObject({ ok: true, transport: 'smtp' });
    expect(reads).toEqual([notification.id]);
    const capture = new Deliverer({ ...options, globalSmtp: null, production: false });
    expect(await capture.attempt(notification, context)).toMatchObject({ ok: true, transport: 'capture' });
    expect(reads).toEqual([notification.id]);
  });

  it('fails a message whose files are gone rather than send it without them', async () => {
    const sent = await ctx.app.inject({
      method: 'POST',
      url: '/api/v1/notifications',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      payload: JSON.stringify({
        template: 'invoice',
        to: 'jane@example.org',
        attachments: [{ filename: 'a.txt', content: Buffer.from('one').toString('base64') }],
      }),
    });
    const requestId = sent.json<{ request_id: string }>().request_id;
    await settledStatus(ctx.app, apiKey, requestId);
    const { notification } = await ctx.services.notifications.detail(requestId);
    const context = await ctx.services.loader.batch().load(notification.project_id, 'invoice');
    const deliverer = new Deliverer({
      mailer: ctx.services.deliverer.mailer,
      defaultFrom: null,
      globalSmtp: parseSmtpUrl(sink.url),
      production: false,
      files: () => Promise.resolve([]),
    });
    expect(await deliverer.attempt(notification, context)).toMatchObject({
      ok: false,
      failure: { kind: 'permanent', message: 'Attachments are no longer stored (content retention)' },
    });
  });
});
