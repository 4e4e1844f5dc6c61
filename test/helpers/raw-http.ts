import { connect, type Socket } from 'node:net';

/** A raw connection to an HTTP server, with what it has received so far and whether it closed. */
export interface RawConnection {
  readonly socket: Socket;
  readonly received: string;
  readonly closed: boolean;
}

/**
 * Opens a TCP connection to 127.0.0.1:`port` (from `localAddress`, another loopback address to be
 * another client) and records what comes back. The socket is added to `opened`, for the suite to
 * destroy at its end.
 */
export async function rawConnection(
  port: number,
  opened: Socket[],
  localAddress = '127.0.0.1',
): Promise<RawConnection> {
  const socket = connect({ port, host: '127.0.0.1', localAddress });
  opened.push(socket);
  let received = '';
  let closed = false;
  socket.setEncoding('utf8').on('data', (chunk: string) => (received += chunk));
  socket.on('error', () => {});
  socket.on('close', () => (closed = true));
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  return {
    socket,
    get received() {
      return received;
    },
    get closed() {
      return closed;
    },
  };
}
