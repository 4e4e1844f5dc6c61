import { createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseOutboundAllow, type OutboundPolicy } from '../../src/domain/outbound.js';
import { SmtpDeliveryError } from '../../src/mail/smtp-failures.js';
import { SmtpMailer } from '../../src/mail/smtp.js';
import type { SmtpTarget } from '../../src/mail/smtp-target.js';
import { SmtpSink } from '../helpers/smtp-sink.js';

/**
 * product.md §8, outbound rules, against real sockets: in production a project's relay on a
 * loopback or private address is refused before any connection is opened, whether it is given as
 * an address or as a name that resolves to one, unless HERALD_OUTBOUND_ALLOW lists it; the
 * operator's own relay (HERALD_SMTP_URL) is trusted.
 */

const envelope = { from: 'a@herald.example', to: 'b@example.org' };
const raw = Buffer.from('Subject: hi\r\n\r\nhello\r\n');
let sink: SmtpSink;
let connections = 0;
let counter: Server;
let counterPort: number;
const sockets = new Set<Socket>();

beforeAll(async () => {
  sink = await new SmtpSink().start();
  // A plain TCP listener that only counts connections: a refused target must not even be dialled.
  counter = createServer((socket) => {
    connections++;
    sockets.add(socket);
    socket.destroy();
  });
  await new Promise<void>((resolve) => counter.listen(0, '127.0.0.1', resolve));
  counterPort = (counter.address() as { port: number }).port;
});
afterAll(async () => {
  for (const socket of sockets) socket.destroy();
  await new Promise((resolve) => counter.close(resolve));
  await sink.stop();
});

const target = (host: string, port: number, extra: Partial<SmtpTarget> = {}): SmtpTarget => ({
  host,
  port,
  security: 'none',
  username: null,
  password: null,
  ...extra,
});

function mailerWith(allow: string, enforce = true): SmtpMailer {
  const outbound: OutboundPolicy = { enforce, allow: parseOutboundAllow(allow) };
  return new SmtpMailer({ timeoutMs: 3000, outbound });
}

async function refusal(work: Promise<unknown>): Promise<SmtpDeliveryError> {
  const error = await work.then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(SmtpDeliveryError);
  return error as SmtpDeliveryError;
}

describe('outbound rules for project relays (production)', () => {
  it('refuses a loopback address, as an address or as a name, without connecting', async () => {
    const mailer = mailerWith('');
    try {
      for (const host of ['127.0.0.1', 'localhost']) {
        for (const work of [
          () => mailer.send(target(host, counterPort), envelope, raw),
          () => mailer.verify(target(host, counterPort)),
        ]) {
          const error = await refusal(work());
          expect(error.failure.kind).toBe('permanent');
          expect(error.failure.message).toMatch(/not allowed.*HERALD_OUTBOUND_ALLOW/);
        }
      }
      expect(connections).toBe(0);
    } finally {
      mailer.close();
    }
  });

  it('delivers to an internal relay that HERALD_OUTBOUND_ALLOW lists by address, block or name', async () => {
    for (const allow of [`127.0.0.1:${sink.port}`, '127.0.0.0/8', 'localhost']) {
      const mailer = mailerWith(allow);
      const before = sink.messages.length;
      try {
        const host = allow === 'localhost' ? 'localhost' : '127.0.0.1';
        const reply = await mailer.send(target(host, sink.port), envelope, raw);
        expect(reply.code).toBe(250);
        await mailer.verify(target(host, sink.port));
      } finally {
        mailer.close();
      }
      expect(sink.messages.length).toBe(before + 1);
    }
  });

  it('keeps a port-limited allowance to its port', async () => {
    const mailer = mailerWith(`127.0.0.1:${sink.port}`);
    try {
      await refusal(mailer.send(target('127.0.0.1', counterPort), envelope, raw));
      expect(connections).toBe(0);
    } finally {
      mailer.close();
    }
  });

  it("trusts the operator's relay, and everything outside production", async () => {
    for (const [mailer, extra] of [
      [mailerWith(''), { trusted: true }],
      [mailerWith('', false), {}],
    ] as const) {
      try {
        const reply = await mailer.send(target('127.0.0.1', sink.port, extra), envelope, raw);
        expect(reply.code).toBe(250);
      } finally {
        mailer.close();
      }
    }
  });
});
