import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import { clientNetwork } from '../domain/client-network.js';

/**
 * How long a client may take, and how many connections it may hold: a client that sends its
 * request slowly (headers or body a byte at a time) or opens connections and sends nothing holds a
 * socket and its memory, so without these a few clients could hold them all.
 */
export interface ClientLimits {
  /** The request line and headers must arrive within this (Node's headersTimeout). */
  readonly headersTimeoutMs: number;
  /** The whole request, body included, must arrive within this (Node's requestTimeout). */
  readonly requestTimeoutMs: number;
  /** Connections open at once per client (an IPv4 address or an IPv6 /64); 0 for no cap. */
  readonly maxConnectionsPerClient: number;
}

/**
 * 10 s for headers, as careful front ends allow (nginx's client_header_timeout is 60 s but counts
 * between reads); 60 s for a whole request, time for the 5 MiB batch body on a slow uplink.
 */
export const DEFAULT_CLIENT_LIMITS: ClientLimits = {
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 60_000,
  maxConnectionsPerClient: 100,
};

/** How often Node looks for requests past their timeouts (its default, 30 s, would add that much). */
export const CONNECTIONS_CHECK_MS = 1_000;

/**
 * Closes at once every connection from a client that already has `max` open, before any byte of
 * it is read; calls `onRefused` for each.
 */
export function capConnectionsPerClient(server: Server, max: number, onRefused: () => void): void {
  if (max <= 0) return;
  const open = new Map<string, number>();
  server.on('connection', (socket: Socket) => {
    const client = clientNetwork(socket.remoteAddress ?? '');
    const count = open.get(client) ?? 0;
    if (count >= max) {
      onRefused();
      socket.destroy();
      return;
    }
    open.set(client, count + 1);
    socket.once('close', () => {
      const left = (open.get(client) ?? 1) - 1;
      if (left === 0) open.delete(client);
      else open.set(client, left);
    });
  });
}
