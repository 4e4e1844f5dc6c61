import type { Kysely } from 'kysely';
import { errors } from '../domain/errors.js';
import { OPEN_OUTBOUND, type OutboundPolicy } from '../domain/outbound.js';
import { isDown, type RelayRole } from '../domain/relay-health.js';
import { storedPasswordSurvives } from '../domain/smtp-credentials.js';
import { describeSmtpTarget, parseSmtpUrl, relayKey, type SmtpTarget } from '../mail/smtp-target.js';
import type { SecretBox } from '../security/cipher.js';
import { findRelayHealth, healthOf } from '../storage/relay-health.js';
import type { Database, SmtpSecurity, SmtpSettingsRow } from '../storage/schema.js';
import { deleteSmtpSettings, findSmtpSettings, upsertSmtpSettings } from '../storage/smtp-settings.js';
import { checkFromName, type ProjectService } from './projects.js';
import { checkFromEmail, checkRelay, relayHost } from './smtp-relay-input.js';

/** A relay as shown to people: its password, if any, is write-only. */
export interface RelayView {
  readonly host: string;
  readonly port: number;
  readonly security: SmtpSecurity;
  readonly username: string | null;
  readonly hasPassword: boolean;
}

/** SMTP settings as shown to people: the password is write-only and never leaves the service. */
export interface SmtpSettingsView extends RelayView {
  readonly projectId: number;
  readonly fromEmail: string | null;
  readonly fromName: string | null;
  readonly updatedAt: number;
  /** The fallback relay (product.md §10); null without one. */
  readonly fallback: RelayView | null;
}

/** A relay to store: the primary, or the fallback (whose password is kept as the primary's is). */
export interface RelayInput {
  readonly host: string;
  readonly port: number;
  readonly security: SmtpSecurity;
  readonly username?: string | null;
  /** undefined keeps the stored password if host, port and username are unchanged; null or '' removes it. */
  readonly password?: string | null;
}

export interface SmtpSettingsInput extends RelayInput {
  readonly fromEmail?: string | null;
  readonly fromName?: string | null;
  /** undefined keeps the stored fallback relay; null removes it. */
  readonly fallback?: RelayInput | null;
}

/** A relay's state as the dashboard and the CLI show it (product.md §10). */
export interface RelayStatus {
  readonly role: RelayRole;
  /** `host:port`. */
  readonly relay: string;
  /** The relay without its password, e.g. `smtp://user@host:587 (security=auto)`. */
  readonly target: string;
  /** The project's own settings, or Herald's (HERALD_SMTP_URL, HERALD_SMTP_FALLBACK_URL). */
  readonly source: 'project' | 'global';
  /** While it is down: since when, its last failure, when it is probed next. */
  readonly down: {
    readonly since: number;
    readonly lastError: string | null;
    readonly nextProbeAt: number | null;
  } | null;
}

/** A relay as a settings row stores it: the primary's columns, or the fallback's. */
interface StoredRelay {
  readonly host: string;
  readonly port: number;
  readonly security: SmtpSecurity;
  readonly username: string | null;
  readonly passwordEnc: string | null;
}

function primaryOf(row: SmtpSettingsRow): StoredRelay {
  const { host, port, security, username } = row;
  return { host, port, security, username, passwordEnc: row.password_enc };
}

/** The fallback relay a row stores; null without one. */
function fallbackOf(row: SmtpSettingsRow): StoredRelay | null {
  if (row.fallback_host === null || row.fallback_port === null) return null;
  return {
    host: row.fallback_host,
    port: row.fallback_port,
    security: row.fallback_security ?? 'auto',
    username: row.fallback_username,
    passwordEnc: row.fallback_password_enc,
  };
}

function relayView({ passwordEnc, ...relay }: StoredRelay): RelayView {
  return { ...relay, hasPassword: passwordEnc !== null };
}

function toView(row: SmtpSettingsRow): SmtpSettingsView {
  const fallback = fallbackOf(row);
  return {
    projectId: row.project_id,
    ...relayView(primaryOf(row)),
    fromEmail: row.from_email,
    fromName: row.from_name,
    updatedAt: row.updated_at,
    fallback: fallback === null ? null : relayView(fallback),
  };
}

export interface ProjectSmtp {
  readonly target: SmtpTarget;
  /** The relay that takes over when the primary fails (product.md §10). */
  readonly fallback: SmtpTarget | null;
  readonly fromEmail: string | null;
  readonly fromName: string | null;
}

/** Herald's own relays, for projects without settings of their own. */
export interface GlobalRelays {
  readonly primary: SmtpTarget | null;
  readonly fallback: SmtpTarget | null;
}

export interface SmtpSettingsOptions {
  readonly now?: () => number;
  /** Herald's own relays, for projects without settings of their own. */
  readonly globals?: GlobalRelays;
  /** The outbound rules a project's relays are held to (product.md §8). */
  readonly outbound?: OutboundPolicy;
}

export class SmtpSettingsService {
  private readonly now: () => number;
  private readonly globals: GlobalRelays;
  private readonly outbound: OutboundPolicy;

  constructor(
    private readonly db: Kysely<Database>,
    private readonly projects: ProjectService,
    private readonly secrets: SecretBox,
    options: SmtpSettingsOptions = {},
  ) {
    this.now = options.now ?? Date.now;
    this.globals = options.globals ?? { primary: null, fallback: null };
    this.outbound = options.outbound ?? OPEN_OUTBOUND;
  }

  /**
   * `herald smtp set --url smtp://user:pass@host:port [--fallback-url URL]`. Without `fallbackUrl`
   * the stored fallback stays; an empty one removes it. A fallback URL without a password keeps the
   * stored one while its host, port and user are the same. `password` is the relay's password
   * given apart from the URL (read from stdin), which must then carry none.
   */
  async setFromUrl(
    projectRef: string | number,
    url: string,
    options: {
      fromEmail?: string | null;
      fromName?: string | null;
      fallbackUrl?: string | null;
      password?: string;
    } = {},
  ): Promise<SmtpSettingsView> {
    const { fallbackUrl, password, ...from } = options;
    const target = parseSmtpUrl(url);
    if (password !== undefined && target.password !== null)
      throw errors.invalidInput('Give the SMTP password in the URL or apart from it, not both');
    if (password !== undefined && target.username === null)
      throw errors.invalidInput('A password needs a user in the SMTP URL: smtp://user@host:port');
    return this.set(projectRef, {
      ...target,
      password: password ?? target.password,
      ...from,
      ...(fallbackUrl !== undefined && { fallback: parseFallbackUrl(fallbackUrl) }),
    });
  }

  async set(projectRef: string | number, input: SmtpSettingsInput): Promise<SmtpSettingsView> {
    const project = await this.projects.resolve(projectRef);
    const host = relayHost(input.host);
    checkRelay({ host, port: input.port, security: input.security }, this.outbound);
    const fromEmail = checkFromEmail(input.fromEmail);
    const current = await findSmtpSettings(this.db, project.id);
    const username = input.username?.trim() || null;
    // A host stored before hosts were normalised (`127.1`) is compared in its usual form.
    const keep =
      current !== undefined &&
      storedPasswordSurvives(
        { ...current, host: relayHost(current.host) },
        { host, port: input.port, username },
      );
    const password = this.passwordColumn(input.password, keep ? current.password_enc : null);
    const fallback = this.fallbackColumns(input.fallback, current, { host, port: input.port });
    const row = await upsertSmtpSettings(this.db, {
      project_id: project.id,
      host,
      port: input.port,
      security: input.security,
      username,
      password_enc: password,
      from_email: fromEmail,
      from_name: checkFromName(input.fromName) ?? null,
      updated_at: this.now(),
      ...fallback,
    });
    return toView(row);
  }

  /** The fallback columns to store: kept, removed or replaced (its password as the primary's is). */
  private fallbackColumns(
    input: RelayInput | null | undefined,
    current: SmtpSettingsRow | undefined,
    primary: { host: string; port: number },
  ): Pick<
    SmtpSettingsRow,
    'fallback_host' | 'fallback_port' | 'fallback_security' | 'fallback_username' | 'fallback_password_enc'
  > {
    const none = {
      fallback_host: null,
      fallback_port: null,
      fallback_security: null,
      fallback_username: null,
      fallback_password_enc: null,
    };
    if (input === undefined) {
      if (current === undefined) return none;
      const { fallback_host, fallback_port, fallback_security, fallback_username, fallback_password_enc } =
        current;
      if (
        fallback_host !== null &&
        fallback_port !== null &&
        relayKey({ host: relayHost(fallback_host), port: fallback_port }) === relayKey(primary)
      )
        throw errors.invalidInput(
          `The fallback relay must be another host or port than the primary: the fallback kept, ` +
            `${relayKey(primary)}, is the primary (give another fallback relay, or remove it)`,
        );
      return { fallback_host, fallback_port, fallback_security, fallback_username, fallback_password_enc };
    }
    if (input === null) return none;
    const host = relayHost(input.host);
    checkRelay({ host, port: input.port, security: input.security }, this.outbound, 'Fallback SMTP');
    if (relayKey({ host, port: input.port }) === relayKey(primary))
      throw errors.invalidInput('The fallback relay must be another host or port than the primary');
    const username = input.username?.trim() || null;
    const stored =
      current?.fallback_host != null && current.fallback_port != null
        ? {
            host: relayHost(current.fallback_host),
            port: current.fallback_port,
            username: current.fallback_username,
          }
        : null;
    const keep = stored !== null && storedPasswordSurvives(stored, { host, port: input.port, username });
    return {
      fallback_host: host,
      fallback_port: input.port,
      fallback_security: input.security,
      fallback_username: username,
      fallback_password_enc: this.passwordColumn(
        input.password,
        keep ? (current?.fallback_password_enc ?? null) : null,
      ),
    };
  }

  /**
   * A relay's sealed password to store: the one given (an empty one is none), or when none is
   * given, `kept`, the stored one when it survives the change (`storedPasswordSurvives`).
   */
  private passwordColumn(given: string | null | undefined, kept: string | null): string | null {
    if (given === undefined) return kept;
    return given === null || given === '' ? null : this.secrets.seal(given);
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
    const fallback = fallbackOf(row);
    return {
      target: this.target(primaryOf(row)),
      fallback: fallback === null ? null : this.target(fallback),
      fromEmail: row.from_email,
      fromName: row.from_name,
    };
  }

  /**
   * The relays the project's mail goes through, for the dashboard's checks: its own (as
   * forDelivery), else Herald's (HERALD_SMTP_URL and HERALD_SMTP_FALLBACK_URL); null when neither.
   */
  async forChecks(
    projectId: number,
  ): Promise<{ readonly target: SmtpTarget; readonly fallback: SmtpTarget | null } | null> {
    const own = await this.forDelivery(projectId);
    if (own !== null) return own;
    const { primary, fallback } = this.globals;
    return primary === null ? null : { target: primary, fallback };
  }

  private target({ passwordEnc, ...relay }: StoredRelay): SmtpTarget {
    return { ...relay, password: passwordEnc === null ? null : this.secrets.open(passwordEnc) };
  }

  /**
   * The relays the project's mail goes through, its own or Herald's, with what is known of each:
   * down since when, why, and when it is probed next (product.md §10).
   */
  async relays(projectRef: string | number): Promise<RelayStatus[]> {
    const project = await this.projects.resolve(projectRef);
    const own = await findSmtpSettings(this.db, project.id);
    const source = own === undefined ? ('global' as const) : ('project' as const);
    const view = own === undefined ? null : toView(own);
    const targets: [RelayRole, Pick<SmtpTarget, 'host' | 'port' | 'security' | 'username'> | null][] =
      view === null
        ? [
            ['primary', this.globals.primary],
            ['fallback', this.globals.primary === null ? null : this.globals.fallback],
          ]
        : [
            ['primary', view],
            ['fallback', view.fallback],
          ];
    const present = targets.flatMap(([role, target]) => (target === null ? [] : [{ role, target }]));
    const known = new Map(
      (
        await findRelayHealth(
          this.db,
          present.map(({ target }) => relayKey(target)),
        )
      ).map((row) => [row.relay, healthOf(row)]),
    );
    return present.map(({ role, target }) => {
      const relay = relayKey(target);
      const health = known.get(relay);
      return {
        role,
        relay,
        target: describeSmtpTarget(target),
        source,
        down:
          health === undefined || !isDown(health)
            ? null
            : { since: health.downSince!, lastError: health.lastError, nextProbeAt: health.probeAt },
      };
    });
  }
}

/** A fallback relay's URL as `smtp set --fallback-url` takes it: empty (or null) removes it. */
function parseFallbackUrl(url: string | null): RelayInput | null {
  if (url === null || url.trim() === '') return null;
  const target = parseSmtpUrl(url.trim());
  return { ...target, password: target.password ?? undefined };
}
