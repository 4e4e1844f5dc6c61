import { once } from 'node:events';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { OPEN_OUTBOUND, parseOutboundAllow, type OutboundPolicy } from '../../src/domain/outbound.js';
import { parseWebhookUrl } from '../../src/domain/webhook-url.js';
import { postWebhook, type PostOptions, type WebhookPost } from '../../src/webhooks/post.js';

const ENFORCED: OutboundPolicy = { enforce: true, allow: [] };
const NOT_ALLOWED = /^Host is not allowed: /;

interface Peer {
  readonly port: number;
  readonly url: string;
  /** TCP connections accepted so far. */
  connections: number;
  /** Requests whose headers arrived so far. */
  requests: number;
}

const servers: http.Server[] = [];

afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    server.close();
    await once(server, 'close');
  }
});

/** A real HTTP server on 127.0.0.1, on an ephemeral port, closed after each test. */
async function peer(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<Peer> {
  const server = http.createServer((req, res) => {
    state.requests++;
    handler(req, res);
  });
  servers.push(server);
  server.on('connection', () => state.connections++);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  const state: Peer = { port, url: `http://127.0.0.1:${port}/hook`, connections: 0, requests: 0 };
  return state;
}

/** A port nothing listens on: bound once, then released. */
async function closedPort(): Promise<number> {
  const server = http.createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  server.close();
  await once(server, 'close');
  return port;
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

const answer =
  (status: number, body: string | Buffer = '', headers: Record<string, string> = {}) =>
  (req: IncomingMessage, res: ServerResponse) => {
    void readBody(req).then(() => {
      res.writeHead(status, headers);
      res.end(body);
    });
  };

const event: WebhookPost = {
  url: '',
  headers: { 'webhook-id': 'msg_1', 'webhook-timestamp': '1700000000', 'webhook-signature': 'v1,abc=' },
  body: '{"type":"notification.sent"}',
};
const open: PostOptions = { timeoutMs: 10_000, outbound: OPEN_OUTBOUND };

function post(url: string, options: Partial<PostOptions> = {}, body = event.body) {
  return postWebhook({ ...event, url, body }, { ...open, ...options });
}

describe('postWebhook answers', () => {
  it('counts a 200 as delivered and keeps the body as the excerpt', async () => {
    const receiver = await peer(answer(200, 'thanks'));
    const result = await post(receiver.url);
    expect(result).toMatchObject({ ok: true, statusCode: 200, excerpt: 'thanks', error: null });
    expect(result.latencyMs).toBeGreaterThanOrEqual(0);
  });

  it('counts a 204 without a body as delivered', async () => {
    const receiver = await peer(answer(204));
    expect(await post(receiver.url)).toMatchObject({ ok: true, statusCode: 204, excerpt: '', error: null });
  });

  it('reports a 500 with its body and no error text', async () => {
    const receiver = await peer(answer(500, 'database is down'));
    expect(await post(receiver.url)).toMatchObject({
      ok: false,
      statusCode: 500,
      excerpt: 'database is down',
      error: null,
    });
  });

  it('never follows a redirect: a 302 is a failure and its target is never called', async () => {
    const target = await peer(answer(200, 'moved here'));
    const receiver = await peer(answer(302, 'see elsewhere', { location: target.url }));
    expect(await post(receiver.url)).toMatchObject({ ok: false, statusCode: 302, excerpt: 'see elsewhere' });
    expect(target.connections).toBe(0);
  });

  it('sends POST with the JSON type, user agent, given headers and the exact body', async () => {
    const seen: { method?: string; headers?: http.IncomingHttpHeaders; body?: Buffer } = {};
    const receiver = await peer((req, res) => {
      void readBody(req).then((body) => {
        Object.assign(seen, { method: req.method, headers: req.headers, body });
        res.end('ok');
      });
    });
    // Several megabytes with multi-byte characters: the whole body is written, and its length in
    // bytes (not characters) is announced.
    const body = JSON.stringify({ type: 'notification.sent', data: { note: 'é€😀'.repeat(300_000) } });
    expect((await post(receiver.url, {}, body)).ok).toBe(true);
    expect(seen.method).toBe('POST');
    expect(seen.body?.toString('utf8')).toBe(body);
    expect(seen.headers).toMatchObject({
      'content-type': 'application/json',
      'user-agent': 'Herald-Webhooks/1',
      'content-length': String(Buffer.byteLength(body)),
      ...event.headers,
    });
  });

  it('sends the user agent it is given', async () => {
    let agent: string | undefined;
    const receiver = await peer((req, res) => {
      agent = req.headers['user-agent'];
      res.end();
    });
    await post(receiver.url, { userAgent: 'Herald-Webhooks/test' });
    expect(agent).toBe('Herald-Webhooks/test');
  });

  it('keeps a computed content-length even when a given header says otherwise', async () => {
    let length: string | undefined;
    const receiver = await peer((req, res) => {
      length = req.headers['content-length'];
      void readBody(req).then(() => res.end());
    });
    const result = await postWebhook(
      { ...event, url: receiver.url, headers: { ...event.headers, 'Content-Length': '1' } },
      open,
    );
    expect(result.ok).toBe(true);
    expect(length).toBe(String(Buffer.byteLength(event.body)));
  });
});

describe('postWebhook against hostile answers', () => {
  it('times out on a peer that accepts and never answers', async () => {
    const receiver = await peer(() => undefined);
    const result = await post(receiver.url, { timeoutMs: 300 });
    expect(result).toEqual({
      ok: false,
      statusCode: null,
      latencyMs: result.latencyMs,
      excerpt: null,
      error: 'Timed out after 300 ms',
    });
    expect(receiver.requests).toBe(1);
  });

  // A 2xx whose body has not finished by the deadline still counts as delivered: the receiver
  // answered with its status line; only the excerpt is partial.
  it.each([
    [200, true],
    [503, false],
  ])(
    'settles at the deadline on a %i whose body drips forever, with a partial excerpt',
    async (status, ok) => {
      const receiver = await peer((req, res) => {
        res.writeHead(status);
        res.write('a');
        const drip = setInterval(() => res.write('a'), 20);
        res.on('close', () => clearInterval(drip));
      });
      const result = await post(receiver.url, { timeoutMs: 400 });
      expect(result).toMatchObject({ ok, statusCode: status, error: null });
      expect(result.excerpt).toMatch(/^a+$/);
      expect(result.excerpt!.length).toBeLessThan(1024);
    },
  );

  // The deadline is far beyond the test's own timeout: only the excerpt's own wait can settle this.
  it('gives a dripping body a second after the status line, not the whole deadline', async () => {
    const receiver = await peer((req, res) => {
      res.writeHead(200);
      res.write('a');
      const drip = setInterval(() => res.write('a'), 100);
      res.on('close', () => clearInterval(drip));
    });
    const result = await post(receiver.url, { timeoutMs: 600_000 });
    expect(result).toMatchObject({ ok: true, statusCode: 200, error: null });
    expect(result.excerpt).toMatch(/^a+$/);
  });

  it('keeps exactly excerptBytes of a 10 MB body', async () => {
    const receiver = await peer(answer(200, Buffer.alloc(10 * 1024 * 1024, 'x')));
    expect((await post(receiver.url)).excerpt).toBe('x'.repeat(1024));
    expect((await post(receiver.url, { excerptBytes: 100 })).excerpt).toBe('x'.repeat(100));
  });

  // The deadline is far beyond the test's own timeout: only stopping at the excerpt can settle this.
  it('stops reading an endless body at the excerpt and closes the connection', async () => {
    let closed!: () => void;
    const peerSawClose = new Promise<void>((resolve) => (closed = resolve));
    const receiver = await peer((req, res) => {
      res.writeHead(200);
      const flood = () => {
        while (!res.destroyed && res.write(Buffer.alloc(64 * 1024, 'y')));
      };
      res.on('drain', flood);
      res.on('close', closed);
      flood();
    });
    const result = await post(receiver.url, { timeoutMs: 600_000, excerptBytes: 5000 });
    expect(result).toMatchObject({ ok: true, statusCode: 200, excerpt: 'y'.repeat(5000), error: null });
    await peerSawClose;
  });

  it('keeps the status of an answer whose connection drops in the middle of the body', async () => {
    const receiver = await peer((req, res) => {
      res.writeHead(202, { 'content-length': '1000' });
      res.write('partial', () => res.destroy());
    });
    expect(await post(receiver.url)).toMatchObject({ ok: true, statusCode: 202, excerpt: 'partial' });
  });

  it('replaces control characters and invalid UTF-8 in the excerpt', async () => {
    const body = Buffer.concat([
      Buffer.from('a\u0000b\u001b[31mc\r\nd\te\u007f\u0085 \rf '),
      Buffer.from([0xff, 0xfe, 0xc3]),
      Buffer.from(' €\n'),
    ]);
    const receiver = await peer(answer(400, body));
    expect((await post(receiver.url)).excerpt).toBe(
      'a\uFFFDb\uFFFD[31mc\nd\te\uFFFD\uFFFD \uFFFDf \uFFFD\uFFFD\uFFFD €\n',
    );
  });

  it('does not show a character cut in half by the excerpt limit as a replacement', async () => {
    const receiver = await peer(answer(200, '€€'));
    expect((await post(receiver.url, { excerptBytes: 4 })).excerpt).toBe('€');
  });

  it('gives no peer bytes back when the answer is not HTTP', async () => {
    const raw = http.createServer();
    servers.push(raw);
    raw.on('connection', (socket) => socket.end('<script>not http</script>\r\n\r\n'));
    raw.listen(0, '127.0.0.1');
    await once(raw, 'listening');
    const { port } = raw.address() as AddressInfo;
    const result = await post(`http://127.0.0.1:${port}/`);
    expect(result).toMatchObject({ ok: false, statusCode: null, excerpt: null });
    expect(result.error).toMatch(/^Not a valid HTTP answer \(HPE_[A-Z_]+\)$/);
  });
});

describe('postWebhook failures without an answer', () => {
  it('reports a closed port as "Connection refused"', async () => {
    const port = await closedPort();
    expect(await post(`http://127.0.0.1:${port}/`)).toMatchObject({
      ok: false,
      statusCode: null,
      excerpt: null,
      error: 'Connection refused',
    });
  });

  it('reports a TLS handshake with a plain HTTP server as a TLS error', async () => {
    const receiver = await peer(answer(200, 'plain'));
    const result = await post(`https://127.0.0.1:${receiver.port}/`);
    expect(result).toMatchObject({ ok: false, statusCode: null, excerpt: null });
    expect(result.error).toMatch(/^TLS error: /);
  });

  it('reports a name that does not resolve', async () => {
    const result = await post('http://herald-webhook-test.invalid/');
    expect(result).toMatchObject({ ok: false, statusCode: null, excerpt: null });
    expect(result.error).toMatch(/^DNS lookup failed: [A-Z_]+$/);
  });

  it('resolves instead of throwing on a header Node refuses to send', async () => {
    const receiver = await peer(answer(200));
    const result = await postWebhook(
      { ...event, url: receiver.url, headers: { 'webhook-id': 'a\r\nx-injected: 1' } },
      open,
    );
    expect(result).toMatchObject({ ok: false, statusCode: null, excerpt: null });
    expect(result.error).toMatch(/^Request failed: /);
    expect(receiver.connections).toBe(0);
  });

  it('resolves instead of throwing on a URL that does not parse', async () => {
    expect(await post('not a url')).toMatchObject({ ok: false, statusCode: null });
  });
});

describe('postWebhook outbound rules', () => {
  it('refuses a loopback address before connecting', async () => {
    const receiver = await peer(answer(200));
    const result = await post(receiver.url, { outbound: ENFORCED });
    expect(result).toMatchObject({ ok: false, statusCode: null, excerpt: null });
    expect(result.error).toMatch(NOT_ALLOWED);
    expect(receiver.connections).toBe(0);
  });

  it('refuses an IPv6 literal that embeds a loopback address', async () => {
    const receiver = await peer(answer(200));
    const result = await post(`http://[::ffff:127.0.0.1]:${receiver.port}/`, { outbound: ENFORCED });
    expect(result.error).toMatch(NOT_ALLOWED);
    expect(receiver.connections).toBe(0);
  });

  it('refuses a name that resolves to loopback, at lookup', async () => {
    const receiver = await peer(answer(200));
    const result = await post(`http://localhost:${receiver.port}/`, { outbound: ENFORCED });
    expect(result).toMatchObject({ ok: false, statusCode: null, excerpt: null });
    expect(result.error).toMatch(NOT_ALLOWED);
    expect(receiver.connections).toBe(0);
  });

  it.each(['127.0.0.1', 'localhost'])('connects to %s when HERALD_OUTBOUND_ALLOW lists it', async (host) => {
    const receiver = await peer(answer(200, 'allowed'));
    const outbound: OutboundPolicy = { enforce: true, allow: parseOutboundAllow('127.0.0.1') };
    const result = await post(`http://${host}:${receiver.port}/`, { outbound });
    expect(result).toMatchObject({ ok: true, statusCode: 200, excerpt: 'allowed' });
  });

  it('honours the port of an allow entry', async () => {
    const receiver = await peer(answer(200));
    const outbound: OutboundPolicy = {
      enforce: true,
      allow: parseOutboundAllow(`127.0.0.1:${receiver.port}`),
    };
    expect((await post(receiver.url, { outbound })).ok).toBe(true);
    const other = await peer(answer(200));
    expect((await post(other.url, { outbound })).error).toMatch(NOT_ALLOWED);
    expect(other.connections).toBe(0);
  });

  it('lets everything through outside production', async () => {
    const receiver = await peer(answer(200));
    expect((await post(`http://localhost:${receiver.port}/`)).ok).toBe(true);
  });
});

describe('parseWebhookUrl', () => {
  it.each([
    ['https://example.com/hooks/herald', 'https://example.com/hooks/herald'],
    ['http://example.com', 'http://example.com/'],
    ['  HTTPS://Example.COM:443/a/../b?x=1&y=%20  ', 'https://example.com/b?x=1&y=%20'],
    ['http://example.com:8080/hook', 'http://example.com:8080/hook'],
    ['http://[2001:db8::1]/hook', 'http://[2001:db8::1]/hook'],
  ])('accepts %j as %j', (raw, normalized) => {
    expect(parseWebhookUrl(raw, OPEN_OUTBOUND)).toBe(normalized);
  });

  it.each([
    ['', /required/],
    ['   ', /required/],
    ['not a url', /spaces/],
    ['example.com/hook', /not a valid URL/],
    ['http://', /not a valid URL/],
    ['ftp://example.com/hook', /http:\/\/ or https:\/\//],
    ['javascript:alert(1)', /http:\/\/ or https:\/\//],
    ['file:///etc/passwd', /http:\/\/ or https:\/\//],
    ['https://user:secret@example.com/hook', /user name or password/],
    ['https://user@example.com/hook', /user name or password/],
    ['https://example.com/hook#part', /fragment/],
    ['https://example.com/hook#', /fragment/],
    ['https://exam\nple.com/hook', /control characters/],
    [`https://example.com/${'a'.repeat(2048)}`, /longer than 2048/],
  ])('refuses %j', (raw, message) => {
    expect(() => parseWebhookUrl(raw, OPEN_OUTBOUND)).toThrow(message);
  });

  it('accepts a URL of exactly 2048 characters', () => {
    const url = `https://example.com/${'a'.repeat(2048 - 'https://example.com/'.length)}`;
    expect(parseWebhookUrl(url, OPEN_OUTBOUND)).toBe(url);
  });

  it('refuses an internal IP literal early in production, unless allowed', () => {
    expect(() => parseWebhookUrl('http://127.0.0.1/hook', ENFORCED)).toThrow(NOT_ALLOWED);
    expect(() => parseWebhookUrl('http://[::1]:8080/hook', ENFORCED)).toThrow(NOT_ALLOWED);
    expect(() => parseWebhookUrl('http://0x7f.1/hook', ENFORCED)).toThrow(NOT_ALLOWED);
    const allowed: OutboundPolicy = { enforce: true, allow: parseOutboundAllow('127.0.0.1') };
    expect(parseWebhookUrl('http://127.0.0.1/hook', allowed)).toBe('http://127.0.0.1/hook');
    expect(parseWebhookUrl('http://127.0.0.1/hook', OPEN_OUTBOUND)).toBe('http://127.0.0.1/hook');
  });

  it('leaves a name to the check at connect time', () => {
    expect(parseWebhookUrl('http://localhost/hook', ENFORCED)).toBe('http://localhost/hook');
  });
});
