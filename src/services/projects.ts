import type { Kysely } from 'kysely';
import type { QuotaPeriod } from '../config.js';
import { parseMailbox } from '../domain/address.js';
import { generateApiKey, hashApiKey, isWellFormedApiKey } from '../domain/api-key.js';
import { errors } from '../domain/errors.js';
import {
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
      'Project name must be 1–100 letters, digits, spaces, dots, dashes or underscores, and not only digits',
    );
  }
  return trimmed;
}

function checkEmail(value: string | null | undefined, label: string): string | null | undefined {
  if (value === undefined || value === null) return value;
  if (value === '') return null;
  const mailbox = parseMailbox(value);
  if (mailbox === null || mailbox.name !== undefined)
    throw errors.invalidInput(`${label} must be an email address`);
  return mailbox.address;
}

function checkFromName(value: string | null | undefined): string | null | undefined {
  if (value === undefined || value === null) return value;
  const trimmed = value.replace(/[\r\n\t]+/g, ' ').trim();
  if (trimmed.length > 200) throw errors.invalidInput('From name must be at most 200 characters');
  return trimmed === '' ? null : trimmed;
}

export class ProjectService {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly defaults: { readonly limit: number | null; readonly period: QuotaPeriod },
    private readonly now: () => number = Date.now,
  ) {}

  /** Creates a project and its API key. The key is returned here and never again. */
  async create(input: ProjectInput & { name: string }): Promise<{ project: Project; apiKey: string }> {
    const key = generateApiKey();
    const now = this.now();
    try {
      const row = await insertProject(this.db, {
        name: checkName(input.name),
        contact_email: checkEmail(input.contactEmail, 'Contact email') ?? null,
        from_email: checkEmail(input.fromEmail, 'From email') ?? null,
        from_name: checkFromName(input.fromName) ?? null,
        quota_limit: input.quotaLimit === undefined ? this.defaults.limit : input.quotaLimit,
        quota_period: input.quotaPeriod ?? this.defaults.period,
        api_key_hash: key.hash,
        api_key_prefix: key.prefix,
        created_at: now,
        updated_at: now,
      });
      return { project: toProject(row), apiKey: key.key };
    } catch (error) {
      if (isUniqueViolation(error)) throw errors.projectExists(input.name.trim());
      throw error;
    }
  }

  async update(ref: string | number, input: ProjectInput): Promise<Project> {
    const current = await this.resolve(ref);
    const changes = {
      ...(input.name !== undefined && { name: checkName(input.name) }),
      ...(input.contactEmail !== undefined && {
        contact_email: checkEmail(input.contactEmail, 'Contact email'),
      }),
      ...(input.fromEmail !== undefined && { from_email: checkEmail(input.fromEmail, 'From email') }),
      ...(input.fromName !== undefined && { from_name: checkFromName(input.fromName) }),
      ...(input.quotaLimit !== undefined && { quota_limit: input.quotaLimit }),
      ...(input.quotaPeriod !== undefined && { quota_period: input.quotaPeriod }),
      updated_at: this.now(),
    };
    try {
      const row = await updateProject(this.db, current.id, changes);
      if (row === undefined) throw errors.projectNotFound(String(ref));
      return toProject(row);
    } catch (error) {
      if (isUniqueViolation(error)) throw errors.projectExists(String(input.name));
      throw error;
    }
  }

  /** Replaces the project's key; the old key stops working with this commit. */
  async rotateKey(ref: string | number): Promise<{ project: Project; apiKey: string }> {
    const current = await this.resolve(ref);
    const key = generateApiKey();
    const row = await updateProject(this.db, current.id, {
      api_key_hash: key.hash,
      api_key_prefix: key.prefix,
      updated_at: this.now(),
    });
    if (row === undefined) throw errors.projectNotFound(String(ref));
    return { project: toProject(row), apiKey: key.key };
  }

  async list(): Promise<Project[]> {
    return (await listProjects(this.db)).map(toProject);
  }

  async get(ref: string | number): Promise<Project> {
    return toProject(await this.resolve(ref));
  }

  /** A project named by its numeric id or its name. */
  async resolve(ref: string | number): Promise<ProjectRow> {
    const text = String(ref).trim();
    const row = /^\d+$/.test(text)
      ? await findProjectById(this.db, Number(text))
      : await findProjectByName(this.db, text);
    if (row === undefined) throw errors.projectNotFound(text);
    return row;
  }

  /**
   * The project a bearer token belongs to, or null. Malformed keys and keys with a bad checksum are
   * refused before any database lookup. No cache: a rotated key must fail at once in every process.
   */
  async authenticate(token: string | null): Promise<ProjectRow | null> {
    if (token === null || !isWellFormedApiKey(token)) return null;
    return (await findProjectByKeyHash(this.db, hashApiKey(token))) ?? null;
  }
}
