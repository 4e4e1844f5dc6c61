import { createServer, type Server, type Socket } from 'node:net';
import type { SmtpMailer } from '../../src/mail/smtp.js';

/**
 * Relays that fail the ways product.md §10 names, each counting the connections it gets: one that
 * accepts and never says a word, one that answers `421` at the greeting, and a port that refuses
 * connections (counted on Herald's side, as nothing listens there).
 */
export interface DeadRelay {
  readonly port: number;
  /** When each connection (or, for a refusing port, each connection attempt) began. */
  readonly connections: number[];
  /** Listens on the port from now on: a real SMTP server is started there by the caller. */
  close(): Promise<void>;
}

export type DeadKind = 'silent' | 'greets-421' | 'refuses';

export async function deadRelay(kind: DeadKind, mailer: SmtpMailer): Promise<DeadRelay> {
  if (kind === 'refuses') return refusingPort(mailer);
  const sockets = new Set<Socket>();
  const connections: number[] = [];
  const server: Server = createServer((socket) => {
    connections.push(Date.now());
    sockets.add(socket);
    socket.on('error', () => undefined);
    socket.on('close', () => sockets.delete(socket));
    if (kind === 'greets-421') socket.end('421 4.3.2 Service not available, closing channel\r\n');
    // silent: accepts, then says nothing at all
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as { port: number }).port,
    connections,
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** A free port nothing listens on, so every connection to it is refused. */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/**
 * A refusing port's connection attempts, counted where they start: every send and every probe
 * (a verify) the mailer makes to it opens one connection, as a refused one is never pooled.
 */
async function refusingPort(mailer: SmtpMailer): Promise<DeadRelay> {
  const port = await freePort();
  const connections: number[] = [];
  const send = mailer.send.bind(mailer);
  const verify = mailer.verify.bind(mailer);
  const count = (target: { port: number }) => {
    if (target.port === port) connections.push(Date.now());
  };
  mailer.send = (target, envelope, raw) => {
    count(target);
    return send(target, envelope, raw);
  };
  mailer.verify = (target) => {
    count(target);
    return verify(target);
  };
  return { port, connections, close: () => Promise.resolve() };
}
