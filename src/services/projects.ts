import type { Kysely } from 'kysely';
import { checkQuotaLimit, checkQuotaPeriod, type QuotaPeriod } from '../domain/quota.js';
import { BIDI_CONTROL, parseGivenMailbox } from '../domain/address.js';
import { generateApiKey, hashApiKey, isWellFormedApiKey } from '../domain/api-key.js';
import { errors } from '../domain/errors.js';
import { countWaiting } from '../storage/notifications.js';
import {
  deleteProjectRow,
  findProjectById,
  findProjectByKeyHash,
  findProjectByName,
  insertProject,
  listProjects,
  updateProject,
} from '../storage/projects.js';
import type { Database, ProjectRow } from '../storage/schema.js';
import { isUniqueViolation } from '../storage/unique-violation.js';

export interface ProjectInput {
  readonly name?: string;
  readonly contactEmail?: string | null;
  readonly fromEmail?: string | null;
  readonly fromName?: string | null;
  /** null = unlimited. */
  readonly quotaLimit?: number | null;
  readonly quotaPeriod?: QuotaPeriod;
}

export interface Project {
  readonly id: number;
  readonly name: string;
  readonly contactEmail: string | null;
  readonly fromEmail: string | null;
  readonly fromName: string | null;
  readonly quotaLimit: number | null;
  readonly quotaPeriod: QuotaPeriod;
  readonly keyPrefix: string;
  readonly createdAt: number;
  readonly updatedAt: number;
}

export function toProject(row: ProjectRow): Project {
  return {
    id: row.id,
    name: row.name,
    contactEmail: row.contact_email,
    fromEmail: row.from_email,
    fromName: row.from_name,
    quotaLimit: row.quota_limit,
    quotaPeriod: row.quota_period as QuotaPeriod,
    keyPrefix: row.api_key_prefix,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

const NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9 _.-]{0,99}$/;

function checkName(name: string): string {
  const trimmed = name.trim();
  // All-digit names would be ambiguous with ids wherever a project is named by "name or id".
  if (!NAME_PATTERN.test(trimmed) || /^\d+$/.test(trimmed)) {
    throw errors.invalidInput(
      'Project name must be 1–100 ASCII letters (A–Z, a–z), digits, spaces, dots, dashes or underscores, ' +
        'starting with a letter or digit, and not only digits',
    );
  }
  // The dashboard's page for a new project is /projects/new, and its pages take names for ids.
  if (trimmed === 'new') throw errors.invalidInput("Project name 'new' is reserved: choose another");
  return trimmed;
}

function checkEmail(value: string | null | undefined, label: string): string | null | undefined {
  if (value === undefined || value === null) return value;
  if (value === '') return null;
  const mailbox = parseGivenMailbox(value);
  if (mailbox === null || mailbox.name !== undefined)
    throw errors.invalidInput(`${label} must be an email address`);
  return mailbox.address;
}

/** A from name as a project's or a relay's settings keep it: one line of at most 200 characters. */
export function checkFromName(value: string | null | undefined): string | null | undefined {
  if (value === undefined || value === null) return value;
  const trimmed = value.replace(/[\r\n\t]+/g, ' ').trim();
  if (trimmed.length > 200) throw errors.invalidInput('From name must be at most 200 characters');
  // The From name is where a reversed name would mislead most (address.ts BIDI_CONTROL).
  if (BIDI_CONTROL.test(trimmed))
    throw errors.invalidInput(
      'From name may not contain a direction override (U+202A–U+202E, U+2066–U+2069)',
    );
  return trimmed === '' ? null : trimmed;
}

/**
 * The longest a key is answered from memory. A backstop only: on PostgreSQL a change made while
 * the trigger that announces it was off (a restore with --disable-triggers, a replication apply)
 * sends no notice, and is seen within this time.
 */
export const KEY_CACHE_MAX_AGE_MS = 60_000;

/** Waits `ms` (a change's settle time), or not at all for 0. */
async function settle(ms: number): Promise<void> {
  if (ms > 0) await new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Projects by key hash, for the send path. It is consulted only while nothing has changed the
 * projects: `externalChanges` moves when another connection (another process, the CLI) may have
 * changed them (Storage.externalChanges), and `generation` with every change made through this
 * service, so a rotated key or a new quota is never served from the cache.
 */
class KeyCache {
  private readonly rows = new Map<string, { readonly row: ProjectRow; readonly at: number }>();
  private token = '';
  generation = 0;

  constructor(
    private readonly externalChanges: () => number,
    private readonly now: () => number,
  ) {}

  /** The current version of the data the cache may hold; the cache is emptied when it moves. */
  current(): string {
    const token = `${this.externalChanges()}:${this.generation}`;
    if (token !== this.token) {
      this.rows.clear();
      this.token = token;
    }
    return token;
  }

  get(hash: string): ProjectRow | undefined {
    this.current();
    const kept = this.rows.get(hash);
    if (kept === undefined || this.now() - kept.at < KEY_CACHE_MAX_AGE_MS) return kept?.row;
    this.rows.delete(hash);
    return undefined;
  }

  /** Keeps a row read while the data was at `token`, unless anything changed since. */
  set(hash: string, row: ProjectRow, token: string): void {
    if (this.current() !== token) return;
    if (this.rows.size >= 10_000) this.rows.clear();
    this.rows.set(hash, { row, at: this.now() });
  }
}

export class ProjectService {
  private readonly keyCache: KeyCache | null;

  constructor(
    private readonly db: Kysely<Database>,
    private readonly defaults: { readonly limit: number | null; readonly period: QuotaPeriod },
    options: {
      readonly externalChanges?: (() => number) | undefined;
      /** Storage.projectChangesSettleMs: how long until every process has seen a key change. */
      readonly changesSettleMs?: number;
      /** Storage.projectUpdatesSettleMs: how long a change to a project's settings waits. */
      readonly updatesSettleMs?: number;
      /** Told once a project is deleted: workers should look at once for mail they hold of it. */
      readonly onDeleted?: () => void;
      readonly now?: () => number;
    } = {},
  ) {
    this.now = options.now ?? Date.now;
    this.onDeleted = options.onDeleted ?? (() => {});
    this.changesSettleMs = options.changesSettleMs ?? 0;
    this.updatesSettleMs = options.updatesSettleMs ?? 0;
    this.keyCache = options.externalChanges ? new KeyCache(options.externalChanges, this.now) : null;
  }

  private readonly now: () => number;
  private readonly onDeleted: () => void;
  private changes = 0;
  private readonly changesSettleMs: number;
  private readonly updatesSettleMs: number;

  /** How many changes to projects this service has made (a worker's DeletedProjects looks again). */
  get changesMade(): number {
    return this.changes;
  }

  /**
   * Every change to projects goes through here, so the key cache can never serve an old row. The
   * generation moves before the write (a lookup already in flight is not cached) and again after
   * it (a lookup that read the row between the two is dropped).
   */
  private async write<T>(change: () => Promise<T>): Promise<T> {
    if (this.keyCache !== null) this.keyCache.generation++;
    try {
      return await change();
    } finally {
      if (this.keyCache !== null) this.keyCache.generation++;
      this.changes++;
    }
  }

  /** Creates a project and its API key. The key is returned here and never again. */
  async create(input: ProjectInput & { name: string }): Promise<{ project: Project; apiKey: string }> {
    const key = generateApiKey();
    const now = this.now();
    try {
      const row = await this.write(() =>
        insertProject(this.db, {
          name: checkName(input.name),
          contact_email: checkEmail(input.contactEmail, 'Contact email') ?? null,
          from_email: checkEmail(input.fromEmail, 'From email') ?? null,
          from_name: checkFromName(input.fromName) ?? null,
          quota_limit: checkQuotaLimit(
            input.quotaLimit === undefined ? this.defaults.limit : input.quotaLimit,
          ),
          quota_period: checkQuotaPeriod(input.quotaPeriod ?? this.defaults.period),
          api_key_hash: key.hash,
          api_key_prefix: key.prefix,
          created_at: now,
          updated_at: now,
        }),
      );
      return { project: toProject(row), apiKey: key.key };
    } catch (error) {
      if (isUniqueViolation(error)) throw errors.projectExists(input.name.trim());
      throw error;
    }
  }

  /** Changes what `input` gives; a value given as it is already changes nothing, not even `updated_at`. */
  async update(ref: string | number, input: ProjectInput): Promise<Project> {
    const current = await this.resolve(ref);
    const requested = {
      // A name kept as it is stays valid, even one the rules now refuse (a project named `new`
      // before it was reserved), so its other settings can still be saved.
      ...(input.name !== undefined && input.name.trim() !== current.name && { name: checkName(input.name) }),
      ...(input.contactEmail !== undefined && {
        contact_email: checkEmail(input.contactEmail, 'Contact email'),
      }),
      ...(input.fromEmail !== undefined && { from_email: checkEmail(input.fromEmail, 'From email') }),
      ...(input.fromName !== undefined && { from_name: checkFromName(input.fromName) }),
      ...(input.quotaLimit !== undefined && { quota_limit: checkQuotaLimit(input.quotaLimit) }),
      ...(input.quotaPeriod !== undefined && { quota_period: checkQuotaPeriod(input.quotaPeriod) }),
    };
    const changed = Object.entries(requested).filter(
      ([column, value]) => current[column as keyof typeof requested] !== value,
    );
    if (changed.length === 0) return toProject(current);
    const changes = { ...(Object.fromEntries(changed) as typeof requested), updated_at: this.now() };
    try {
      const row = await this.write(() => updateProject(this.db, current.id, changes));
      if (row === undefined) throw errors.projectNotFound(String(ref));
      await settle(this.updatesSettleMs);
      return toProject(row);
    } catch (error) {
      if (isUniqueViolation(error)) throw errors.projectExists(String(input.name));
      throw error;
    }
  }

  /**
   * Replaces the project's key. The old key is refused by every process once this returns: on
   * PostgreSQL, where server processes keep keys in memory until the notice of a change reaches
   * them, it returns only after the time in which every one of them has either received the
   * notice or stopped keeping keys (about 2 s).
   */
  async rotateKey(ref: string | number): Promise<{ project: Project; apiKey: string }> {
    const current = await this.resolve(ref);
    const key = generateApiKey();
    const row = await this.write(() =>
      updateProject(this.db, current.id, {
        api_key_hash: key.hash,
        api_key_prefix: key.prefix,
        updated_at: this.now(),
      }),
    );
    if (row === undefined) throw errors.projectNotFound(String(ref));
    await settle(this.changesSettleMs);
    return { project: toProject(row), apiKey: key.key };
  }

  /**
   * Deletes a project and everything of it (deleteProjectRow): its key stops working at once, as
   * after rotateKey. Refused while mail of the project is queued or being sent, unless `force`:
   * then mail still queued is never sent (a worker holding some drops it at its next look, which
   * the delete asks for), and a message in an SMTP transaction at that moment may still be
   * delivered, its outcome not recorded.
   */
  async delete(ref: string | number, options: { readonly force?: boolean } = {}): Promise<Project> {
    const current = await this.resolve(ref);
    const deleted = await this.write(() =>
      this.db.transaction().execute(async (tx) => {
        const waiting = options.force === true ? 0 : await countWaiting(tx, current.id);
        if (waiting > 0)
          throw errors.conflict(
            `Project ${current.name} has ${waiting} notification${waiting === 1 ? '' : 's'} queued or being sent; ` +
              'wait until they are sent, or delete with force to discard them',
          );
        return deleteProjectRow(tx, current.id);
      }),
    );
    if (!deleted) throw errors.projectNotFound(String(ref));
    this.onDeleted();
    await settle(this.changesSettleMs);
    return toProject(current);
  }

  async list(): Promise<Project[]> {
    return (await listProjects(this.db)).map(toProject);
  }

  async get(ref: string | number): Promise<Project> {
    return toProject(await this.resolve(ref));
  }

  /** A project named by its numeric id or its name. */
  async resolve(ref: string | number): Promise<ProjectRow> {
    // Exactly as given: names are stored trimmed, so ` shop` (`%20shop` in a path) names none.
    const text = String(ref);
    const row = /^\d+$/.test(text)
      ? await findProjectById(this.db, Number(text))
      : await findProjectByName(this.db, text);
    if (row === undefined) throw errors.projectNotFound(text);
    return row;
  }

  /**
   * The project a bearer token belongs to, or null. Malformed keys and keys with a bad checksum are
   * refused before any database lookup. Keys are kept in memory while nothing has changed the
   * projects: on SQLite a commit anywhere is seen within milliseconds (data_version); on PostgreSQL
   * its notice arrives within milliseconds. Either way rotateKey and delete wait until every
   * process has seen the change (Storage.projectChangesSettleMs) before they report success, and
   * on SQLite update does too (Storage.projectUpdatesSettleMs).
   */
  async authenticate(token: string | null): Promise<ProjectRow | null> {
    if (token === null || !isWellFormedApiKey(token)) return null;
    const hash = hashApiKey(token);
    if (this.keyCache === null) return (await findProjectByKeyHash(this.db, hash)) ?? null;
    const cached = this.keyCache.get(hash);
    if (cached !== undefined) return cached;
    const version = this.keyCache.current();
    const row = await findProjectByKeyHash(this.db, hash);
    if (row !== undefined) this.keyCache.set(hash, row, version);
    return row ?? null;
  }
}
