import net from 'node:net';

/**
 * A TCP proxy in front of a service (PostgreSQL in these tests) that can be cut and restored on
 * the same port: an outage as the process under test sees it, while the service stays up for
 * the other tests.
 */
export class TcpProxy {
  private server: net.Server | null = null;
  private readonly sockets = new Set<net.Socket>();
  port = 0;

  constructor(private readonly target: { host: string; port: number }) {}

  async start(): Promise<void> {
    const server = net.createServer((downstream) => {
      const upstream = net.connect(this.target);
      for (const socket of [downstream, upstream]) {
        this.sockets.add(socket);
        socket.on('close', () => this.sockets.delete(socket));
        // A cut destroys both ends; whichever fails first takes the other down with it.
        socket.on('error', () => {
          downstream.destroy();
          upstream.destroy();
        });
      }
      downstream.pipe(upstream).pipe(downstream);
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', () => resolve());
    });
    this.port = (server.address() as net.AddressInfo).port;
    this.server = server;
  }

  /** `url` (a database URL) with its host and port replaced by the proxy's. */
  via(url: string): string {
    const through = new URL(url);
    through.hostname = '127.0.0.1';
    through.port = String(this.port);
    return through.toString();
  }

  /** Drops every connection and stops listening: new connections are refused. */
  async cut(): Promise<void> {
    const server = this.server;
    this.server = null;
    const closed = new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
    for (const socket of this.sockets) socket.destroy();
    await closed;
  }
}
