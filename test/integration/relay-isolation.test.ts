import { createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWorker } from '../../src/roles.js';
import { DEADLINE_EXCEEDED, NOT_SMTP } from '../../src/mail/smtp-failures.js';
import type { StatusBody } from '../../src/services/notifications.js';
import type { Worker } from '../../src/roles.js';
import { createTestContext, seedProject, type TestContext } from '../helpers/services.js';
import { SmtpSink } from '../helpers/smtp-sink.js';
import { waitUntil } from '../helpers/wait.js';

/**
 * product.md §8 with real misbehaving SMTP peers: each faulty relay's mail fails with a clear
 * error_message within the transaction deadline, and a healthy project's mail sent while all of
 * them hold their lanes still arrives within 2 s. Every faulty project sends more messages than a
 * relay's share of the lanes and five relays stall, so together they would take every lane if each
 * relay could take its share; two more projects reach one stalled host with different logins.
 */

const TIMEOUT_MS = 3000;
/** More than a relay's share of the lanes (5), so that five stalled relays could fill them all. */
const PER_FAULT = 8;

type Fault = (socket: Socket) => void;

/** What an attempt to a relay that takes the connection and never greets says (or, once it is down, names). */
const SILENT =
  /^(Relay down: )?The relay at 127\.0\.0\.1:\d+ accepted the connection but sent no greeting before the 3 s deadline$/;

/** A peer that speaks just enough SMTP to reach the point where it misbehaves. */
function smtpUntil(misbehave: 'after-dot' | 'data-silence'): Fault {
  return (socket) => {
    let inData = false;
    let buffer = '';
    socket.write('220 relay.test ESMTP\r\n');
    socket.on('data', (chunk) => {
      buffer += chunk.toString('latin1');
      if (inData) {
        if (!buffer.includes('\r\n.\r\n')) return;
        buffer = '';
        inData = false;
        if (misbehave === 'after-dot') socket.destroy();
        return; // data-silence: never answers the final dot
      }
      let end: number;
      while ((end = buffer.indexOf('\r\n')) >= 0) {
        const line = buffer.slice(0, end).toUpperCase();
        buffer = buffer.slice(end + 2);
        if (line.startsWith('EHLO')) socket.write('250-relay.test\r\n250 8BITMIME\r\n');
        else if (line.startsWith('DATA')) {
          inData = true;
          socket.write('354 go ahead\r\n');
          return;
        } else if (line.startsWith('QUIT')) socket.end('221 bye\r\n');
        else socket.write('250 OK\r\n');
      }
    });
  };
}

const FAULTS: { name: string; fault: Fault; tls?: boolean; error: RegExp }[] = [
  {
    name: 'drip-feeds its greeting',
    fault: (socket) => {
      const timer = setInterval(() => socket.write('220-still here\r\n'), 200);
      socket.on('close', () => clearInterval(timer));
    },
    // A relay that sent something has spoken: the deadline, or nodemailer's own greeting timeout
    // (the same length), whichever fired first.
    error: new RegExp(`${DEADLINE_EXCEEDED}|Greeting never received`),
  },
  {
    name: 'never answers the final dot',
    fault: smtpUntil('data-silence'),
    // It greeted and took the whole message: only its answer is missing.
    error:
      /^(Relay down: )?The relay was sent the whole message and did not confirm it within the \d+ s deadline: it may have been delivered/,
  },
  // Its later messages are not tried once it is judged down (product.md §10): they say so.
  {
    name: 'answers 421 at the greeting',
    fault: (s) => s.end('421 4.3.2 too busy\r\n'),
    error: /^(Relay down: )?SMTP 421/,
  },
  {
    name: 'disconnects after the final dot',
    fault: smtpUntil('after-dot'),
    error: /closed|ECONNRESET|EPIPE/i,
  },
  {
    name: 'fails the TLS handshake',
    fault: (s) => s.end('this is not TLS\r\n'),
    tls: true,
    error: /TLS|SSL|socket|closed|wrong version/i,
  },
  // Three relays that accept and then say nothing: with the two slow ones above, more stalled
  // relays than the lanes could hold if each took its full share.
  ...[1, 2, 3].map((n) => ({
    name: `never greets (${n})`,
    fault: (() => undefined) as Fault,
    error: SILENT,
  })),
  {
    name: 'is not an SMTP server',
    fault: (s) => s.write('INFO {"server_id":"SECRET"}\r\n'),
    error: new RegExp(`^${NOT_SMTP}$`),
  },
];

let sink: SmtpSink;
let ctx: TestContext;
let worker: Worker;
const servers: Server[] = [];
const sockets = new Set<Socket>();

async function faultyRelay(fault: Fault): Promise<number> {
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => undefined);
    fault(socket);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  servers.push(server);
  return (server.address() as { port: number }).port;
}

async function send(apiKey: string, to: string): Promise<string> {
  const response = await ctx.app.inject({
    method: 'POST',
    url: '/api/v1/notifications',
    headers: { authorization: `Bearer ${apiKey}` },
    payload: { template: 'user_created', to, data: { user_name: 'Jane' } },
  });
  expect(response.statusCode).toBe(202);
  return response.json<{ request_id: string }>().request_id;
}

async function status(apiKey: string, requestId: string): Promise<StatusBody> {
  const response = await ctx.app.inject({
    url: `/api/v1/notifications/${requestId}`,
    headers: { authorization: `Bearer ${apiKey}` },
  });
  return response.json<StatusBody>();
}

beforeAll(async () => {
  sink = await new SmtpSink().start();
  ctx = await createTestContext({
    HERALD_SMTP_TIMEOUT_MS: String(TIMEOUT_MS),
    HERALD_DELIVERY_MAX_ATTEMPTS: '1',
    HERALD_DELIVERY_POLL_MS: '20',
    // 20 lanes with 5 reserved, and 5 per relay: five stalled relays could fill the other 15.
    HERALD_DELIVERY_CONCURRENCY: '20',
    HERALD_SMTP_MAX_CONNECTIONS: '5',
  });
  worker = createWorker(ctx.services);
  worker.start();
});

afterAll(async () => {
  await worker.stop();
  await ctx.close();
  for (const socket of sockets) socket.destroy();
  await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
  await sink.stop();
});

describe('one relay never stalls another project', () => {
  it(
    'fails each faulty relay clearly within the deadline while a healthy project is served within 2 s',
    { timeout: 120_000 },
    async () => {
      const faulty: { name: string; apiKey: string; ids: string[]; error: RegExp }[] = [];
      for (const { name, fault, tls, error } of FAULTS) {
        const port = await faultyRelay(fault);
        const project = await seedProject(ctx.services);
        await ctx.services.smtpSettings.setFromUrl(
          project.projectId,
          tls ? `smtps://127.0.0.1:${port}` : `smtp://127.0.0.1:${port}?security=none`,
        );
        faulty.push({ name, apiKey: project.apiKey, ids: [], error });
      }
      // One stalled host behind two logins is one relay, not two.
      const sharedPort = await faultyRelay(() => undefined);
      for (const user of ['alice', 'bob']) {
        const project = await seedProject(ctx.services);
        await ctx.services.smtpSettings.setFromUrl(
          project.projectId,
          `smtp://${user}:secret@127.0.0.1:${sharedPort}?security=none`,
        );
        faulty.push({
          name: `shared host, login ${user}`,
          apiKey: project.apiKey,
          ids: [],
          error: SILENT,
        });
      }
      for (let i = 0; i < PER_FAULT; i++)
        for (const project of faulty) project.ids.push(await send(project.apiKey, `user${i}@example.org`));

      // Every faulty relay now has mail in flight: their combined messages outnumber the lanes.
      const healthy = await seedProject(ctx.services);
      await ctx.services.smtpSettings.setFromUrl(
        healthy.projectId,
        `smtp://127.0.0.1:${sink.port}?security=none`,
      );
      const sentAt = Date.now();
      const id = await send(healthy.apiKey, 'healthy@example.org');
      const body = await waitUntil(
        async () => {
          const current = await status(healthy.apiKey, id);
          return current.status === 'queued' ? undefined : current;
        },
        { timeoutMs: 2000, intervalMs: 10, what: "the healthy project's message within 2 s" },
      );
      expect(body.status).toBe('sent');
      console.info(
        `relay isolation: the healthy project's message was sent ${Date.now() - sentAt} ms after its 202`,
      );

      for (const project of faulty) {
        for (const requestId of project.ids) {
          const final = await waitUntil(
            async () => {
              const current = await status(project.apiKey, requestId);
              return current.status === 'queued' ? undefined : current;
            },
            { timeoutMs: 60_000, what: `${project.name}: ${requestId} to fail` },
          );
          expect(final.status, project.name).toBe('failed');
          expect(final.error_message, project.name).toMatch(project.error);
          expect(final.error_message, project.name).not.toContain('SECRET');
          // Each attempt ended within the deadline (plus the time to close the connection).
          const { attempts } = await ctx.services.notifications.detail(requestId);
          for (const attempt of attempts)
            expect(attempt.finished_at - attempt.started_at, project.name).toBeLessThan(TIMEOUT_MS + 1000);
        }
      }
    },
  );
});
