import type { Kysely } from 'kysely';
import { parseMailbox } from '../domain/address.js';
import { errors } from '../domain/errors.js';
import { storedPasswordSurvives } from '../domain/smtp-credentials.js';
import { parseSmtpUrl, isSmtpSecurity, type SmtpTarget } from '../mail/smtp-target.js';
import type { SecretBox } from '../security/cipher.js';
import type { Database, SmtpSecurity, SmtpSettingsRow } from '../storage/schema.js';
import { deleteSmtpSettings, findSmtpSettings, upsertSmtpSettings } from '../storage/smtp-settings.js';
import type { ProjectService } from './projects.js';

/** SMTP settings as shown to people: the password is write-only and never leaves the service. */
export interface SmtpSettingsView {
  readonly projectId: number;
  readonly host: string;
  readonly port: number;
  readonly security: SmtpSecurity;
  readonly username: string | null;
  readonly hasPassword: boolean;
  readonly fromEmail: string | null;
  readonly fromName: string | null;
  readonly updatedAt: number;
}

export interface SmtpSettingsInput {
  readonly host: string;
  readonly port: number;
  readonly security: SmtpSecurity;
  readonly username?: string | null;
  /** undefined keeps the stored password if host, port and username are unchanged; null or '' removes it. */
  readonly password?: string | null;
  readonly fromEmail?: string | null;
  readonly fromName?: string | null;
}

function toView(row: SmtpSettingsRow): SmtpSettingsView {
  return {
    projectId: row.project_id,
    host: row.host,
    port: row.port,
    security: row.security,
    username: row.username,
    hasPassword: row.password_enc !== null,
    fromEmail: row.from_email,
    fromName: row.from_name,
    updatedAt: row.updated_at,
  };
}

export interface ProjectSmtp {
  readonly target: SmtpTarget;
  readonly fromEmail: string | null;
  readonly fromName: string | null;
}

export class SmtpSettingsService {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly projects: ProjectService,
    private readonly secrets: SecretBox,
    private readonly now: () => number = Date.now,
  ) {}

  /** `herald smtp set --url smtp://user:pass@host:port`. */
  async setFromUrl(
    projectRef: string | number,
    url: string,
    from: { fromEmail?: string | null; fromName?: string | null } = {},
  ): Promise<SmtpSettingsView> {
    const target = parseSmtpUrl(url);
    return this.set(projectRef, { ...target, password: target.password, ...from });
  }

  async set(projectRef: string | number, input: SmtpSettingsInput): Promise<SmtpSettingsView> {
    const project = await this.projects.resolve(projectRef);
    const host = input.host.trim();
    if (host === '' || host.length > 253 || /[\s/@]/.test(host))
      throw errors.invalidInput('SMTP host is not valid');
    if (!Number.isInteger(input.port) || input.port < 1 || input.port > 65535) {
      throw errors.invalidInput('SMTP port must be between 1 and 65535');
    }
    if (!isSmtpSecurity(input.security))
      throw errors.invalidInput('SMTP security must be auto, starttls, tls or none');
    let fromEmail = input.fromEmail ?? null;
    if (fromEmail !== null && fromEmail !== '') {
      const mailbox = parseMailbox(fromEmail);
      if (mailbox === null || mailbox.name !== undefined)
        throw errors.invalidInput('From email must be an email address');
      fromEmail = mailbox.address;
    }
    const current = await findSmtpSettings(this.db, project.id);
    const username = input.username?.trim() || null;
    const keep =
      current !== undefined && storedPasswordSurvives(current, { host, port: input.port, username });
    const password =
      input.password === undefined
        ? keep
          ? current.password_enc
          : null
        : input.password === null || input.password === ''
          ? null
          : this.secrets.seal(input.password);
    const row = await upsertSmtpSettings(this.db, {
      project_id: project.id,
      host,
      port: input.port,
      security: input.security,
      username,
      password_enc: password,
      from_email: fromEmail || null,
      from_name: input.fromName?.replace(/[\r\n]+/g, ' ').trim() || null,
      updated_at: this.now(),
    });
    return toView(row);
  }

  async get(projectRef: string | number): Promise<SmtpSettingsView | null> {
    const project = await this.projects.resolve(projectRef);
    const row = await findSmtpSettings(this.db, project.id);
    return row === undefined ? null : toView(row);
  }

  async clear(projectRef: string | number): Promise<boolean> {
    const project = await this.projects.resolve(projectRef);
    return deleteSmtpSettings(this.db, project.id);
  }

  /** The project's own relay with its password decrypted, for delivery only. */
  async forDelivery(projectId: number): Promise<ProjectSmtp | null> {
    const row = await findSmtpSettings(this.db, projectId);
    if (row === undefined) return null;
    return {
      target: {
        host: row.host,
        port: row.port,
        security: row.security,
        username: row.username,
        password: row.password_enc === null ? null : this.secrets.open(row.password_enc),
      },
      fromEmail: row.from_email,
      fromName: row.from_name,
    };
  }
}
