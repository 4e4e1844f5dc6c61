/**
 * The accept baseline: a bare node:http server that does the least an accept endpoint must do —
 * read the body, JSON.parse it, answer 202 with a body shaped like Herald's send response.
 * Run as its own process (like Herald) so that it never shares a CPU core with the bench.
 *
 *   node --import tsx bench/lib/bare-server.ts PORT   → prints "ready PORT" once listening
 */
import { createServer } from 'node:http';
import { randomUUID } from 'node:crypto';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { HOST, freePort, waitForHttp } from './net.js';
import { spawnTracked, type Tracked } from './processes.js';

function serve(port: number): void {
  let nextId = 0;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      if (req.method === 'GET') {
        res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
        return;
      }
      try {
        JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch {
        res.writeHead(400, { 'content-type': 'application/json' }).end('{"error":"Invalid JSON body"}');
        return;
      }
      nextId += 1;
      const body = JSON.stringify({
        id: nextId,
        request_id: randomUUID(),
        status: 'queued',
        message: 'Notification queued for delivery',
      });
      res.writeHead(202, { 'content-type': 'application/json; charset=utf-8' }).end(body);
    });
  });
  server.keepAliveTimeout = 65_000;
  server.listen(port, HOST, () => process.stdout.write(`ready ${port}\n`));
  const close = () => {
    server.close(() => process.exit(0));
    server.closeAllConnections();
  };
  process.on('SIGTERM', close);
  process.on('SIGINT', close);
}

export interface BareServer {
  port: number;
  process: Tracked;
}

/** Starts the bare server as a child process and waits until it answers. */
export async function startBareServer(repoRoot: string): Promise<BareServer> {
  const port = await freePort();
  const child = spawnTracked(
    'bare node:http server',
    process.execPath,
    ['--import', 'tsx', fileURLToPath(import.meta.url), String(port)],
    { cwd: repoRoot, stdio: ['ignore', 'ignore', 'inherit'] },
  );
  await waitForHttp(port, '/healthz', { timeoutMs: 15_000, process: child });
  return { port, process: child };
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  serve(Number(process.argv[2] ?? 3999));
}
