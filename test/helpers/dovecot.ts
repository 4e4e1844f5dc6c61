import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import {
  accessSync,
  chmodSync,
  constants,
  chownSync,
  mkdirSync,
  mkdtempSync,
  renameSync,
  rmSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ImapFlow } from 'imapflow';
import { waitUntil } from './wait.js';
import { freePort } from './dead-relays.js';

/**
 * A real IMAP server for the bounce mailbox tests: Debian's Dovecot (`dovecot-imapd`), started by
 * the test with a configuration of its own in a temporary directory (never the system's): it
 * listens on 127.0.0.1 on a free port without TLS, keeps each user's mail as Maildir there, and
 * knows only the users the test adds. Its processes run as `nobody`, so it needs root to start, as
 * CI has. `idle: false` leaves IDLE out of the CAPABILITY Dovecot announces after login, for the
 * poll fallback.
 *
 * Each user has a passwd-file of its own (`users/<name>`), because of how Dovecot notices that
 * one changed (src/auth/db-passwd-file.c, passwd_file_sync): it looks at a file at most once a
 * second, and only compares its mtime (whole seconds) and size with what it read. With one file
 * for every user, a user added in the same second as any lookup (another test's reader logging
 * in) stayed "unknown user" until the next second, and the test's first login failed. A new
 * user's own file is read at its first lookup. A file is replaced whole (temp file and rename, so
 * a lookup never reads half of it), and each version's mtime is a second past the last one's, so
 * a new password of the same length, written in the second the old one was read, is still seen.
 */

const DOVECOT = '/usr/sbin/dovecot';
/** Mail files belong to this uid/gid (nobody:nogroup): Dovecot never accesses mail as root. */
const MAIL_UID = 65534;
const MAIL_GID = 65534;
const NO_IDLE =
  'IMAP4rev1 SASL-IR LOGIN-REFERRALS ID ENABLE SORT THREAD=REFERENCES MULTIAPPEND UNSELECT CHILDREN NAMESPACE UIDPLUS LIST-EXTENDED I18NLEVEL=1 CONDSTORE QRESYNC ESEARCH SEARCHRES WITHIN LIST-STATUS BINARY MOVE LITERAL+';

export class Dovecot {
  /** Why Dovecot cannot be started here (not installed, not root), or null when it can. */
  static unavailable(): string | null {
    try {
      accessSync(DOVECOT, constants.X_OK);
    } catch {
      return `no ${DOVECOT} (Debian package dovecot-imapd)`;
    }
    if (process.getuid?.() !== 0) return 'Dovecot drops to user nobody, which needs root';
    return null;
  }

  private readonly users = new Map<string, string>();
  /** The mtime (whole seconds) given to each user's passwd-file last. */
  private readonly written = new Map<string, number>();
  private output = '';

  private constructor(
    readonly dir: string,
    readonly port: number,
    private readonly child: ChildProcess,
  ) {
    child.stdout?.on('data', (chunk: Buffer) => (this.output += chunk.toString('utf8')));
    child.stderr?.on('data', (chunk: Buffer) => (this.output += chunk.toString('utf8')));
  }

  static async start(options: { idle?: boolean } = {}): Promise<Dovecot> {
    const dir = mkdtempSync(path.join(tmpdir(), 'herald-dovecot-'));
    chmodSync(dir, 0o755);
    for (const sub of ['base', 'state', 'mail', 'users']) mkdirSync(path.join(dir, sub), { mode: 0o755 });
    chownSync(path.join(dir, 'mail'), MAIL_UID, MAIL_GID);
    const port = await freePort();
    const config = [
      'protocols = imap',
      'listen = 127.0.0.1',
      `base_dir = ${dir}/base`,
      `state_dir = ${dir}/state`,
      `instance_name = herald-test-${port}`,
      'default_internal_user = nobody',
      'default_internal_group = nogroup',
      'default_login_user = nobody',
      'ssl = no',
      'disable_plaintext_auth = no',
      'auth_mechanisms = plain login',
      // A wrong password is answered at once: the tests retry logins quickly.
      'auth_failure_delay = 0',
      'log_path = /dev/stderr',
      'first_valid_uid = 1',
      'mail_location = maildir:~/Maildir',
      ...(options.idle === false ? [`imap_capability = ${NO_IDLE}`] : []),
      'passdb {',
      '  driver = passwd-file',
      `  args = scheme=PLAIN username_format=%u ${dir}/users/%u`,
      '}',
      'userdb {',
      '  driver = passwd-file',
      `  args = username_format=%u ${dir}/users/%u`,
      '}',
      // No auth penalty: after a failed login Dovecot holds back every login from the same
      // address (2 s, doubling to 15 s, for half a minute), the right ones too, and every test
      // logs in from 127.0.0.1. A wrong password's retries are Herald's back-off alone.
      'service anvil {',
      '  unix_listener anvil-auth-penalty {',
      '    mode = 0',
      '  }',
      '}',
      'service imap-login {',
      '  inet_listener imap {',
      '    address = 127.0.0.1',
      `    port = ${port}`,
      '  }',
      '  inet_listener imaps {',
      '    port = 0',
      '  }',
      '}',
      '',
    ].join('\n');
    writeFileSync(path.join(dir, 'dovecot.conf'), config);
    const child = spawn(DOVECOT, ['-F', '-c', path.join(dir, 'dovecot.conf')], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const dovecot = new Dovecot(dir, port, child);
    await waitUntil(
      () =>
        new Promise<true | undefined>((resolve) => {
          if (child.exitCode !== null) throw new Error(`dovecot exited: ${dovecot.output}`);
          const socket = createConnection({ port, host: '127.0.0.1' });
          socket.once('connect', () => (socket.destroy(), resolve(true)));
          socket.once('error', () => resolve(undefined));
        }),
      { what: () => `dovecot to listen on ${port}: ${dovecot.output}` },
    );
    return dovecot;
  }

  /**
   * Adds a user (known at once), or changes its password (seen by the first login in a later
   * second than the last lookup: Dovecot looks at the file at most once a second).
   */
  setUser(user: string, password: string): void {
    if (!/^[a-z0-9.@_-]+$/i.test(user)) throw new Error(`not a user name for a file name: ${user}`);
    this.users.set(user, password);
    const file = path.join(this.dir, 'users', user);
    const temp = `${file}.new`;
    writeFileSync(temp, `${user}:{PLAIN}${password}:${MAIL_UID}:${MAIL_GID}::${this.dir}/mail/${user}::\n`);
    const mtime = Math.max(Math.floor(Date.now() / 1000), (this.written.get(user) ?? 0) + 1);
    utimesSync(temp, mtime, mtime);
    this.written.set(user, mtime);
    renameSync(temp, file);
  }

  /** `imap://user:password@127.0.0.1:port/MAILBOX?tls=none` for HERALD_BOUNCE_IMAP_URL. */
  url(user: string, mailbox = 'INBOX', password = this.users.get(user) ?? ''): string {
    const auth = `${encodeURIComponent(user)}:${encodeURIComponent(password)}`;
    return `imap://${auth}@127.0.0.1:${this.port}/${encodeURIComponent(mailbox)}?tls=none`;
  }

  /**
   * Puts a message straight into the user's Maildir, as the server's delivery agent would (no
   * APPEND: faster for a large message), owned by the mail user.
   */
  deliver(user: string, name: string, bytes: Buffer | string): void {
    let dir = path.join(this.dir, 'mail', user);
    for (const level of ['Maildir', 'new']) {
      dir = path.join(dir, level);
      mkdirSync(dir, { recursive: true });
      chownSync(dir, MAIL_UID, MAIL_GID);
    }
    for (const sibling of ['cur', 'tmp']) {
      mkdirSync(path.join(dir, '..', sibling), { recursive: true });
      chownSync(path.join(dir, '..', sibling), MAIL_UID, MAIL_GID);
    }
    const file = path.join(dir, name);
    writeFileSync(file, bytes);
    chownSync(file, MAIL_UID, MAIL_GID);
  }

  /** What Dovecot logged so far (logins, failures). */
  log(): string {
    return this.output;
  }

  /** A client of the test's own, logged in as `user` (to put mail in and look at folders). */
  async client(user: string): Promise<ImapFlow> {
    const client = new ImapFlow({
      host: '127.0.0.1',
      port: this.port,
      secure: false,
      doSTARTTLS: false,
      auth: { user, pass: this.users.get(user)! },
      logger: false,
    });
    client.on('error', () => {});
    await client.connect();
    return client;
  }

  /** The UIDs in a folder (levels separated by `/`, as Herald names them); [] when it does not exist. */
  static async uids(client: ImapFlow, folder: string): Promise<number[]> {
    const status = await client.status(folder.split('/'), { messages: true }).catch(() => false as const);
    if (status === false || status.messages === 0) return [];
    const lock = await client.getMailboxLock(folder.split('/'));
    try {
      return ((await client.search({ all: true }, { uid: true })) || []) as number[];
    } finally {
      lock.release();
    }
  }

  async stop(): Promise<void> {
    if (this.child.exitCode === null) {
      this.child.kill('SIGTERM');
      await once(this.child, 'exit');
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}
