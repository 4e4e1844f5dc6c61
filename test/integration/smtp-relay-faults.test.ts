import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { SMTPServer } from 'smtp-server';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import {
  DEADLINE_EXCEEDED,
  NOT_SMTP,
  NOT_TLS,
  SmtpDeliveryError,
  classifySmtpError,
  unansweredRelay,
  unconfirmedMessage,
  unreachedRelay,
} from '../../src/mail/smtp-failures.js';
import { SmtpMailer } from '../../src/mail/smtp.js';
import { classifyReply } from '../../src/domain/bounce/classify.js';
import type { SmtpTarget } from '../../src/mail/smtp-target.js';
import { Deadline } from '../../src/mail/deadline.js';
import { RelayPool } from '../../src/mail/relay-pool.js';

/**
 * product.md §8 against real sockets: a whole SMTP transaction has a deadline, a non-SMTP peer's
 * bytes are never echoed, and credentials never go in clear under `auto`.
 */

const TIMEOUT_MS = 1500;
const mailer = new SmtpMailer({ timeoutMs: TIMEOUT_MS });
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});
afterAll(() => mailer.close());

async function rawServer(onSocket: (socket: Socket) => void): Promise<number> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => undefined);
    onSocket(socket);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closers.push(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise((resolve) => server.close(resolve));
  });
  return (server.address() as { port: number }).port;
}

/**
 * A port whose connections are never taken, as behind a firewall that drops them: a socket that
 * listens with no room in its queue and never accepts (Node's servers accept at once, so a
 * Python one), its one place taken by a first connection. The kernel drops every later SYN.
 */
async function unacceptingPort(): Promise<number> {
  const listener = spawn(
    'python3',
    [
      '-c',
      "import socket, sys\ns = socket.socket()\ns.bind(('127.0.0.1', 0))\ns.listen(0)\nprint(s.getsockname()[1], flush=True)\nsys.stdin.read()",
    ],
    { stdio: ['pipe', 'pipe', 'inherit'] },
  );
  const [line] = (await once(listener.stdout, 'data')) as [Buffer];
  const port = Number(String(line).trim());
  const filler = connect(port, '127.0.0.1');
  await once(filler, 'connect');
  closers.push(async () => {
    filler.destroy();
    if (listener.exitCode !== null || listener.signalCode !== null) return;
    const exited = once(listener, 'exit');
    listener.kill();
    await exited;
  });
  return port;
}

const target = (port: number, extra: Partial<SmtpTarget> = {}): SmtpTarget => ({
  host: '127.0.0.1',
  port,
  security: 'none',
  username: null,
  password: null,
  ...extra,
});

async function failureOf(work: Promise<unknown>): Promise<SmtpDeliveryError> {
  const error = await work.then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(SmtpDeliveryError);
  return error as SmtpDeliveryError;
}

describe('relay faults', () => {
  it('reports a non-SMTP banner as "not an SMTP server" without echoing it', async () => {
    const port = await rawServer((socket) => socket.write('INFO {"server_id":"NATS-SECRET-42"}\r\n'));
    for (const work of [
      mailer.verify(target(port)),
      mailer.send(target(port), { from: 'a@herald.example', to: 'b@example.org' }, Buffer.from('x')),
    ]) {
      const error = await failureOf(work);
      expect(error.failure.message).toBe(NOT_SMTP);
      expect(error.failure.message).not.toContain('NATS-SECRET-42');
    }
  });

  it("says that a relay speaking plain SMTP does not take TLS on connect, without OpenSSL's words", async () => {
    const port = await rawServer((socket) => socket.write('220 plain.example ESMTP\r\n'));
    for (const work of [
      mailer.verify(target(port, { security: 'tls' })),
      mailer.send(
        target(port, { security: 'tls' }),
        { from: 'a@herald.example', to: 'b@example.org' },
        Buffer.from('x'),
      ),
    ]) {
      const error = await failureOf(work);
      expect(error.failure).toMatchObject({ kind: 'transient', message: NOT_TLS, smtpCode: null });
    }
    // A relay that agrees to STARTTLS and goes on in plain text: the same OpenSSL error, on a
    // connection already made with smtp://, where that advice would send the reader in a circle.
    const agrees = await rawServer((socket) => {
      socket.write('220 plain.example ESMTP\r\n');
      let agreed = false;
      socket.on('data', (data) => {
        const line = data.toString('latin1');
        // The client's TLS hello, answered in plain text.
        if (agreed) socket.write('250 still plain\r\n');
        else if (/^EHLO/i.test(line)) socket.write('250-plain.example\r\n250 STARTTLS\r\n');
        else if (/^STARTTLS/i.test(line)) {
          agreed = true;
          socket.write('220 go ahead\r\n');
        }
      });
    });
    const upgrade = await failureOf(
      mailer.send(
        target(agrees, { security: 'starttls' }),
        { from: 'a@herald.example', to: 'b@example.org' },
        Buffer.from('x'),
      ),
    );
    expect(upgrade.failure.kind).toBe('transient');
    // OpenSSL's reason, not its file and line.
    expect(upgrade.failure.message).toBe(
      'The TLS handshake with the relay failed after it agreed to STARTTLS: wrong version number',
    );
  });

  it('bounds a drip-feeding relay by the total deadline, for verify and for send', async () => {
    const port = await rawServer((socket) => {
      socket.write('220 drip.example ESMTP\r\n');
      socket.once('data', () => {
        // Answers EHLO one continuation line at a time, forever: never idle long enough to time out.
        const timer = setInterval(() => socket.write('250-still thinking\r\n'), TIMEOUT_MS / 5);
        socket.on('close', () => clearInterval(timer));
      });
    });
    const verify = await failureOf(mailer.verify(target(port)));
    expect(verify.failure.message).toContain(DEADLINE_EXCEEDED);
    const send = await failureOf(
      mailer.send(target(port), { from: 'a@herald.example', to: 'b@example.org' }, Buffer.from('x')),
    );
    expect(send.failure.message).toContain(DEADLINE_EXCEEDED);
    expect(send.failure.kind).toBe('transient');
    // It greeted: it was reached, and ran out of time.
    expect(send.failure).toMatchObject({ reached: true, timedOut: true });
  });

  it('reports a relay that takes the connection and never greets as not reached, and says so', async () => {
    const port = await rawServer(() => undefined);
    const silent = `The relay at 127.0.0.1:${port} accepted the connection but sent no greeting before the 1.5 s deadline`;
    const send = await failureOf(
      mailer.send(target(port), { from: 'a@herald.example', to: 'b@example.org' }, Buffer.from('x')),
    );
    expect(send.failure).toMatchObject({
      kind: 'transient',
      message: silent,
      reached: false,
      timedOut: true,
    });
    // The dashboard's check of the settings says the same.
    const verify = await failureOf(mailer.verify(target(port)));
    expect(verify.failure.message).toBe(silent);
  });

  it('reports a relay whose address never takes the connection as not reached, and says so', async () => {
    const port = await unacceptingPort();
    const unanswered = `Could not connect to the relay at 127.0.0.1:${port} within the 1.5 s deadline: nothing answered (a firewall may be dropping the connection)`;
    const send = await failureOf(
      mailer.send(target(port), { from: 'a@herald.example', to: 'b@example.org' }, Buffer.from('x')),
    );
    expect(send.failure).toMatchObject({
      kind: 'transient',
      message: unanswered,
      reached: false,
      timedOut: true,
    });
    const verify = await failureOf(mailer.verify(target(port)));
    expect(verify.failure.message).toBe(unanswered);
  });

  it("says so also when nodemailer's own connection timeout ends it before the deadline", async () => {
    const port = await unacceptingPort();
    // The deadline never passes here: nodemailer's timer (the same length in SmtpMailer) ends it.
    const pool = new RelayPool({
      host: '127.0.0.1',
      port,
      secure: false,
      requireTLS: false,
      ignoreTLS: true,
      auth: null,
      timeoutMs: 300,
    });
    const error = await pool
      .send({ from: 'a@herald.example', to: 'b@example.org' }, Buffer.from('x'), new Deadline())
      .then(
        () => null,
        (failure: unknown) => failure,
      );
    pool.close();
    expect(error).toMatchObject({ code: 'ETIMEDOUT', greeted: false, unanswered: true, silent: false });
  });

  it('names the hosting providers that block port 25 when a relay there never answers, outside local networks', () => {
    expect(unansweredRelay({ host: 'mx.example.org', port: 25 }, 30_000)).toBe(
      "Could not connect to the relay at mx.example.org:25 within the 30 s deadline: nothing answered (a firewall may be dropping the connection; many hosting providers block outbound port 25, where a relay's submission port (587, or 465 with smtps://) passes)",
    );
    for (const host of ['10.0.0.25', '127.0.0.1', 'localhost', '::1', 'postfix'])
      expect(unansweredRelay({ host, port: 25 }, 30_000)).not.toContain('hosting providers');
  });

  it('reports a relay that greets and then stalls in the TLS handshake after STARTTLS as reached', async () => {
    const port = await rawServer((socket) => {
      socket.write('220 stall.example ESMTP\r\n');
      socket.on('data', (data: Buffer) => {
        const line = data.toString('latin1');
        if (/^EHLO/i.test(line)) socket.write('250-stall.example\r\n250 STARTTLS\r\n');
        else if (/^STARTTLS/i.test(line)) socket.write('220 2.0.0 Ready to start TLS\r\n');
      });
    });
    const send = await failureOf(
      mailer.send(
        target(port, { security: 'starttls' }),
        { from: 'a@herald.example', to: 'b@example.org' },
        Buffer.from('x'),
      ),
    );
    expect(send.failure).toMatchObject({ kind: 'transient', reached: true, timedOut: true });
    // The deadline, or nodemailer's socket timeout or its bound on the connection's set-up (which
    // ends in the handshake), whichever fired first; never a relay that did not speak.
    expect(send.failure.message).toMatch(
      new RegExp(`^(${DEADLINE_EXCEEDED}|Timeout|TLS handshake timed out)`),
    );
  });

  it('says in a sentence that a relay refused the connection, with its address', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as { port: number }).port;
    await new Promise((resolve) => closed.close(resolve));
    const refused = `The relay at 127.0.0.1:${port} refused the connection: nothing listens on that port, or a firewall rejects it (ECONNREFUSED)`;
    const send = await failureOf(
      mailer.send(target(port), { from: 'a@herald.example', to: 'b@example.org' }, Buffer.from('x')),
    );
    // Classified as any connection not made: the relay's window reads its command (relay-lanes.ts).
    expect(send.failure).toMatchObject({
      kind: 'transient',
      message: refused,
      command: 'CONN',
      reached: false,
      timedOut: false,
    });
    expect((await failureOf(mailer.verify(target(port)))).failure.message).toBe(refused);
  });

  it('says that a relay name does not resolve, or that DNS did not answer, in a sentence', () => {
    const relay = { host: 'smtp.nowhere.example', port: 587 };
    // As nodemailer files a failed look-up (its own code, the system's as originalCode).
    const lookupError = (code: string) =>
      Object.assign(new Error(`getaddrinfo ${code} smtp.nowhere.example`), {
        code: 'EDNS',
        originalCode: code,
      });
    expect(unreachedRelay(lookupError('ENOTFOUND'), relay)).toBe(
      "The relay's host name smtp.nowhere.example does not resolve: no such name in DNS (ENOTFOUND)",
    );
    expect(unreachedRelay(lookupError('EAI_AGAIN'), relay)).toBe(
      "The relay's host name smtp.nowhere.example could not be looked up: DNS did not answer (EAI_AGAIN)",
    );
    // As Node's own look-up fails (under the outbound rules Herald resolves the name itself).
    const byNode = Object.assign(new Error('getaddrinfo ENOTFOUND smtp.nowhere.example'), {
      code: 'ENOTFOUND',
    });
    expect(unreachedRelay(byNode, relay)).toContain('does not resolve');
    expect(unreachedRelay(new Error('Connection closed'), relay)).toBeNull();
    // A name with several addresses, each refusing: Node's AggregateError has no words, and
    // nodemailer files its code as originalCode.
    const everyAddress = () =>
      Object.assign(
        new AggregateError([Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' })], ''),
        {
          code: 'ESOCKET',
          originalCode: 'ECONNREFUSED',
          command: 'CONN',
        },
      );
    expect(unreachedRelay(everyAddress(), relay)).toBe(
      'The relay at smtp.nowhere.example:587 refused the connection: nothing listens on that port, or a firewall rejects it (ECONNREFUSED)',
    );
    const timedOut = Object.assign(new AggregateError([], ''), {
      code: 'ESOCKET',
      originalCode: 'ETIMEDOUT',
    });
    expect(classifySmtpError(timedOut).message).toBe('Connection failed: ETIMEDOUT (ESOCKET)');
  });

  it('says that a message the relay never confirmed may have been delivered', async () => {
    let received = 0;
    const server = new SMTPServer({
      // Its connections hold unread data: close them at once, not after 30 s.
      closeTimeout: 50,
      disabledCommands: ['STARTTLS', 'AUTH'],
      logger: false,
      // Reads the whole message and never answers the final dot.
      onData: (stream) => {
        stream.resume();
        stream.on('end', () => received++);
      },
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    closers.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
    const port = (server.server.address() as { port: number }).port;
    const send = await failureOf(
      mailer.send(target(port), { from: 'a@herald.example', to: 'b@example.org' }, Buffer.from('x\r\n')),
    );
    expect(received).toBe(1);
    expect(send.failure).toMatchObject({
      kind: 'transient',
      message: unconfirmedMessage(TIMEOUT_MS),
      reached: true,
      timedOut: true,
    });
    expect(unconfirmedMessage(TIMEOUT_MS)).toBe(
      'The relay was sent the whole message and did not confirm it within the 1.5 s deadline: it may have been delivered, and a retry may deliver it again',
    );
  });

  it('does not say the whole message was sent while the relay holds it back unread', async () => {
    const server = new SMTPServer({
      // Its connections hold unread data: close them at once, not after 30 s.
      closeTimeout: 50,
      disabledCommands: ['STARTTLS', 'AUTH'],
      logger: false,
      size: 64 * 1024 * 1024,
      // Reads the first chunk of the message, then stops reading: the rest waits in the sockets.
      onData: (stream) => {
        stream.once('data', () => stream.pause());
      },
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    closers.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
    const port = (server.server.address() as { port: number }).port;
    // More than the loopback's socket buffers of both ends hold.
    const large = Buffer.from(`${'x'.repeat(998)}\r\n`.repeat(32 * 1024));
    const send = await failureOf(
      mailer.send(target(port), { from: 'a@herald.example', to: 'b@example.org' }, large),
    );
    expect(send.failure).toMatchObject({ kind: 'transient', reached: true, timedOut: true });
    expect(send.failure.message).not.toBe(unconfirmedMessage(TIMEOUT_MS));
  });

  it('reports a connection closed after the greeting, during EHLO, as reached', async () => {
    const port = await rawServer((socket) => {
      socket.write('220 closing.example ESMTP\r\n');
      socket.once('data', () => socket.destroy());
    });
    const send = await failureOf(
      mailer.send(target(port), { from: 'a@herald.example', to: 'b@example.org' }, Buffer.from('x')),
    );
    expect(send.failure).toMatchObject({ kind: 'transient', reached: true });
  });

  it('reports a 421 to EHLO left without its line end, then a close, as reached', async () => {
    const port = await rawServer((socket) => {
      socket.write('220 busy.example ESMTP\r\n');
      socket.once('data', () => socket.end('421 4.3.2 Too busy, closing'));
    });
    const send = await failureOf(
      mailer.send(target(port), { from: 'a@herald.example', to: 'b@example.org' }, Buffer.from('x')),
    );
    expect(send.failure).toMatchObject({ kind: 'transient', smtpCode: 421, reached: true });
  });

  it('reports a greeting taken as 220 without a space after the code, then a close, as reached', async () => {
    const port = await rawServer((socket) => {
      socket.write('220terse.example\r\n');
      socket.once('data', () => socket.destroy());
    });
    const send = await failureOf(
      mailer.send(target(port), { from: 'a@herald.example', to: 'b@example.org' }, Buffer.from('x')),
    );
    expect(send.failure).toMatchObject({ kind: 'transient', reached: true });
  });

  it('reports a 421 greeting left without its line end, then a close, as not reached', async () => {
    const port = await rawServer((socket) => socket.end('421 4.7.0 Too many connections'));
    const send = await failureOf(
      mailer.send(target(port), { from: 'a@herald.example', to: 'b@example.org' }, Buffer.from('x')),
    );
    expect(send.failure).toMatchObject({ kind: 'transient', smtpCode: 421, reached: false });
  });

  it('reports bytes that are no reply, then a close, as not reached', async () => {
    const port = await rawServer((socket) => socket.end('xyz'));
    const send = await failureOf(
      mailer.send(target(port), { from: 'a@herald.example', to: 'b@example.org' }, Buffer.from('x')),
    );
    expect(send.failure).toMatchObject({ kind: 'transient', reached: false });
  });

  it('reads a 421 to RCPT TO, then a close, as a reply of a step not known, never a refused connection', async () => {
    const port = await rawServer((socket) => {
      socket.write('220 mx.example ESMTP\r\n');
      let buffered = '';
      socket.on('data', (chunk: Buffer) => {
        buffered += String(chunk);
        for (let end = buffered.indexOf('\r\n'); end >= 0; end = buffered.indexOf('\r\n')) {
          const line = buffered.slice(0, end).toUpperCase();
          buffered = buffered.slice(end + 2);
          // Pipelined, as Postfix offers it: MAIL FROM, RCPT TO and DATA go in one write.
          if (line.startsWith('EHLO')) socket.write('250-mx.example\r\n250 PIPELINING\r\n');
          else if (line.startsWith('MAIL')) socket.write('250 2.1.0 Ok\r\n');
          else if (line.startsWith('RCPT')) socket.end('421 4.0.0 Server closing connection\r\n');
        }
      });
    });
    const send = await failureOf(
      mailer.send(target(port), { from: 'a@herald.example', to: 'b@example.org' }, Buffer.from('x')),
    );
    expect(send.failure).toMatchObject({ kind: 'transient', smtpCode: 421, reached: true, command: null });
    const { smtpCode, message, command } = send.failure;
    expect(classifyReply({ code: smtpCode, text: message, command })).toMatchObject({
      type: 'soft',
      category: 'system_error',
    });
  });

  it('reports a greeting other than 220 as not reached', async () => {
    const port = await rawServer((socket) => socket.end('421 4.7.0 Too many connections\r\n'));
    const send = await failureOf(
      mailer.send(target(port), { from: 'a@herald.example', to: 'b@example.org' }, Buffer.from('x')),
    );
    expect(send.failure).toMatchObject({ kind: 'transient', smtpCode: 421, reached: false, command: 'CONN' });
  });
});

describe('credentials and STARTTLS', () => {
  async function plainRelay(): Promise<{ port: number; logins: string[] }> {
    const logins: string[] = [];
    const server = new SMTPServer({
      disabledCommands: ['STARTTLS'],
      allowInsecureAuth: true,
      logger: false,
      onAuth: (auth, _session, callback) => {
        logins.push(`${auth.username}:${auth.password}`);
        callback(null, { user: auth.username });
      },
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    closers.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
    return { port: (server.server.address() as { port: number }).port, logins };
  }

  it('refuses to log in under auto when the relay offers no STARTTLS', async () => {
    const relay = await plainRelay();
    const refused = await failureOf(
      mailer.verify(target(relay.port, { security: 'auto', username: 'u', password: 'p4ss' })),
    );
    expect(relay.logins).toEqual([]);
    // Said as what it is, a setting to change: not as the relay refusing the message.
    // Transient, as a refused login is: mail queued while the settings are fixed is not lost.
    expect(refused.failure).toMatchObject({ kind: 'transient', smtpCode: 500, command: 'STARTTLS' });
    expect(refused.failure.message).toMatch(
      /^The relay refused STARTTLS \(5\d\d .*\), which these SMTP settings require \(security=starttls, or auto with a user\): if it takes TLS on connect, use security=tls; if it has no TLS at all, security=none sends the login in clear, for a network you trust$/,
    );
  });

  it('logs in in clear only with security none chosen explicitly', async () => {
    const relay = await plainRelay();
    await mailer.verify(target(relay.port, { security: 'none', username: 'u', password: 'p4ss' }));
    expect(relay.logins).toEqual(['u:p4ss']);
  });
});
