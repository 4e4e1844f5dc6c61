import { hash } from 'node:crypto';
import type { Kysely } from 'kysely';
import { parseGivenMailbox } from '../domain/address.js';
import { errors } from '../domain/errors.js';
import { LOGIN_WINDOW_MS, loginKeys, loginRefusal, type LoginKeyKind } from '../domain/login-throttle.js';
import { decoyHash, hashPassword, verifyPassword } from '../security/password.js';
import {
  consumeSetupTokens,
  countAdmins,
  deleteAdminUnlessLast,
  findAdminByEmail,
  findAdminById,
  hasSetupToken,
  insertAdmin,
  insertSetupToken,
  listAdmins,
  updateAdminPassword,
} from '../storage/admins.js';
import {
  addLoginFailure,
  clearLoginFailures,
  loginFailures,
  pruneLoginFailures,
} from '../storage/login-attempts.js';
import type { AdminRow, Database } from '../storage/schema.js';
import {
  deleteExpiredSessions,
  deleteSession,
  deleteSessionsOfAdmin,
  extendSession,
  findSession,
  insertSession,
} from '../storage/sessions.js';
import { isUniqueViolation } from '../storage/unique-violation.js';
import { randomToken } from '../security/token.js';

/** Dashboard sessions last a week and are extended when used in their second half. */
export const SESSION_TTL_MS = 7 * 86_400_000;
export const PASSWORD_LIMITS = { min: 10, max: 1024 } as const;

export interface Admin {
  readonly id: number;
  readonly email: string;
  readonly createdAt: number;
}

export interface Session {
  readonly admin: Pick<Admin, 'id' | 'email'>;
  /** The synchronizer token every state-changing request of this session must carry. */
  readonly csrfToken: string;
  readonly expiresAt: number;
}

export interface NewSession extends Session {
  /** The cookie value; only its SHA-256 is stored. */
  readonly token: string;
}

function toAdmin(row: AdminRow): Admin {
  return { id: row.id, email: row.email, createdAt: row.created_at };
}

export function sha256(value: string): string {
  return hash('sha256', value, 'hex');
}

/** An admin's email as it is stored, however it was typed; null when it is not one address. */
export function adminEmail(raw: string): string | null {
  const mailbox = parseGivenMailbox(raw.trim());
  return mailbox === null || mailbox.name !== undefined ? null : mailbox.address.toLowerCase();
}

function checkEmail(raw: string): string {
  const address = adminEmail(raw);
  if (address === null) throw errors.invalidInput('Enter a valid email address');
  return address;
}

function checkPassword(password: string): string {
  if (password.length < PASSWORD_LIMITS.min || password.length > PASSWORD_LIMITS.max) {
    throw errors.invalidInput(`Password must be ${PASSWORD_LIMITS.min}–${PASSWORD_LIMITS.max} characters`);
  }
  return password;
}

/** What a login came to: the admin, a wrong email or password, or too many failures before it. */
export type LoginResult =
  | { readonly kind: 'ok'; readonly admin: Admin }
  | { readonly kind: 'refused' }
  | { readonly kind: 'throttled'; readonly retryAfterSeconds: number };

export type LoginOutcome = 'success' | 'failure' | 'throttled';

/** Throttle keys kept at most (the least recently failed go first), and how often that is enforced. */
const LOGIN_KEYS_KEPT = 100_000;
const LOGIN_PRUNE_EVERY_MS = 60_000;

/**
 * Dashboard administrators, their sessions, and the one-time setup tokens that create the first
 * admin. Session ids and setup tokens are stored only as SHA-256 hashes: a copy of the database does
 * not let anyone log in.
 */
export class AdminService {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly now: () => number = Date.now,
    /** Told about every login attempt (metrics); must not throw. */
    private readonly onLogin: (outcome: LoginOutcome) => void = () => {},
  ) {}

  private nextLoginPrune = 0;

  async hasAdmins(): Promise<boolean> {
    return (await countAdmins(this.db)) > 0;
  }

  async list(): Promise<Admin[]> {
    return (await listAdmins(this.db)).map(toAdmin);
  }

  async create(email: string, password: string): Promise<Admin> {
    const address = checkEmail(email);
    const hash = await hashPassword(checkPassword(password));
    const now = this.now();
    try {
      const row = await insertAdmin(this.db, {
        email: address,
        password_hash: hash,
        created_at: now,
        updated_at: now,
      });
      // Setup links only ever create the first admin; once one exists they are dead weight.
      await consumeSetupTokens(this.db, null);
      return toAdmin(row);
    } catch (error) {
      if (isUniqueViolation(error))
        throw errors.invalidInput(`An admin with email ${address} already exists`);
      throw error;
    }
  }

  /**
   * Removes an admin and ends its sessions at once. The last admin stays: without one nobody could
   * log in to the dashboard (`herald admin create` would still let the operator back in).
   */
  async remove(email: string): Promise<Admin> {
    const address = checkEmail(email);
    const result = await deleteAdminUnlessLast(this.db, address);
    if (result.outcome === 'deleted') return toAdmin(result.admin);
    throw result.outcome === 'missing'
      ? errors.adminNotFound(address)
      : errors.invalidInput(`${address} is the only admin; add another before removing it`);
  }

  /** A new setup token (returned once, stored hashed); each one stays valid until an admin exists. */
  async createSetupToken(): Promise<string> {
    const token = randomToken();
    await insertSetupToken(this.db, sha256(token), this.now());
    return token;
  }

  async isSetupTokenValid(token: string): Promise<boolean> {
    if (token.length > 100) return false;
    return (await hasSetupToken(this.db, sha256(token))) && !(await this.hasAdmins());
  }

  /** Creates the first admin with a setup token; the token (and every other) is used up. */
  async completeSetup(token: string, email: string, password: string): Promise<Admin> {
    const address = checkEmail(email);
    const hash = await hashPassword(checkPassword(password));
    const now = this.now();
    const admin = await this.db.transaction().execute(async (tx) => {
      if (!(await consumeSetupTokens(tx, sha256(token)))) return null;
      if ((await countAdmins(tx)) > 0) return null;
      return insertAdmin(tx, { email: address, password_hash: hash, created_at: now, updated_at: now });
    });
    if (admin === null) throw errors.invalidInput('This setup link has already been used');
    return toAdmin(admin);
  }

  /** The admin with this email and password, or null; unknown emails cost as much time as known ones. */
  async authenticate(email: string, password: string): Promise<Admin | null> {
    const address = adminEmail(email);
    const row = address === null ? undefined : await findAdminByEmail(this.db, address);
    const ok = await verifyPassword(
      password.slice(0, PASSWORD_LIMITS.max),
      row?.password_hash ?? (await decoyHash()),
    );
    return row !== undefined && ok ? toAdmin(row) : null;
  }

  /**
   * A login from the dashboard form: refused without checking the password while the client has
   * too many recent failures (domain/login-throttle.ts), counted in the database so every api
   * process shares the count. Only failures count; a success clears its account-from-client count.
   */
  async logIn(email: string, password: string, clientIp: string): Promise<LoginResult> {
    const now = this.now();
    const windowStart = now - LOGIN_WINDOW_MS;
    const keys = loginKeys(email, clientIp);
    const hashed = Object.fromEntries(
      Object.entries(keys).map(([kind, key]) => [sha256(key), kind as LoginKeyKind]),
    );
    const counted = await loginFailures(this.db, Object.keys(hashed), windowStart);
    const wait = loginRefusal(
      counted.map((row) => ({ ...row, kind: hashed[row.key]! })),
      now,
    );
    if (wait !== null) {
      this.onLogin('throttled');
      return { kind: 'throttled', retryAfterSeconds: wait };
    }
    const admin = await this.authenticate(email, password);
    if (admin === null) {
      await addLoginFailure(this.db, Object.keys(hashed), now, windowStart);
      if (now >= this.nextLoginPrune) {
        this.nextLoginPrune = now + LOGIN_PRUNE_EVERY_MS;
        await pruneLoginFailures(this.db, windowStart, LOGIN_KEYS_KEPT);
      }
      this.onLogin('failure');
      return { kind: 'refused' };
    }
    await clearLoginFailures(this.db, [sha256(keys.accountFromClient)]);
    this.onLogin('success');
    return { kind: 'ok', admin };
  }

  /**
   * Changes the password after checking the current one, and ends every session of this admin
   * (a stolen session must not outlive a password change); the caller starts a fresh one.
   */
  async changePassword(adminId: number, current: string, next: string): Promise<void> {
    const row = await findAdminById(this.db, adminId);
    if (row === undefined || !(await verifyPassword(current, row.password_hash))) {
      throw errors.invalidInput('The current password is not correct');
    }
    const hash = await hashPassword(checkPassword(next));
    await updateAdminPassword(this.db, adminId, hash, this.now());
    await deleteSessionsOfAdmin(this.db, adminId);
  }

  /** A new session with a new id and CSRF token: called at every login, so ids never carry over. */
  async startSession(admin: Pick<Admin, 'id' | 'email'>): Promise<NewSession> {
    const token = randomToken();
    const csrfToken = randomToken();
    const now = this.now();
    const expiresAt = now + SESSION_TTL_MS;
    await deleteExpiredSessions(this.db, now);
    await insertSession(this.db, {
      id_hash: sha256(token),
      admin_id: admin.id,
      csrf_token: csrfToken,
      created_at: now,
      expires_at: expiresAt,
    });
    return { token, admin: { id: admin.id, email: admin.email }, csrfToken, expiresAt };
  }

  async session(token: string): Promise<Session | null> {
    if (token.length === 0 || token.length > 100) return null;
    const now = this.now();
    const idHash = sha256(token);
    const row = await findSession(this.db, idHash, now);
    if (row === undefined) return null;
    let expiresAt = row.expires_at;
    if (expiresAt - now < SESSION_TTL_MS / 2) {
      expiresAt = now + SESSION_TTL_MS;
      await extendSession(this.db, idHash, expiresAt);
    }
    return {
      admin: { id: row.admin_id, email: row.email },
      csrfToken: row.csrf_token,
      expiresAt,
    };
  }

  async endSession(token: string): Promise<void> {
    if (token.length > 0 && token.length <= 100) await deleteSession(this.db, sha256(token));
  }
}
