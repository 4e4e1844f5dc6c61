import type { Kysely } from 'kysely';
import type { Mailbox } from '../domain/address.js';
import { parseMailbox } from '../domain/address.js';
import { Messages } from '../domain/errors.js';
import { CompiledMessage, type RenderedMessage } from '../domain/message.js';
import { senderFor } from '../domain/sender.js';
import type { DeliveryFailure } from '../domain/retry.js';
import { composeMessage } from '../mail/compose.js';
import { SmtpDeliveryError, type SmtpMailer } from '../mail/smtp.js';
import type { SmtpTarget } from '../mail/smtp-target.js';
import type { ProjectSmtp, SmtpSettingsService } from '../services/smtp-settings.js';
import { findProjectById } from '../storage/projects.js';
import type { Database, NotificationRow, ProjectRow, TemplateRow } from '../storage/schema.js';
import { findTemplate } from '../storage/templates.js';

/** What one delivery attempt came to, before the retry policy decides what happens next. */
export type AttemptResult =
  | {
      readonly ok: true;
      readonly transport: 'smtp' | 'capture';
      readonly smtpCode: number;
      readonly response: string;
      readonly rendered: RenderedMessage;
      readonly messageId: string;
    }
  | {
      readonly ok: false;
      readonly failure: DeliveryFailure;
      readonly transport: 'smtp' | 'capture' | null;
      readonly rendered: RenderedMessage | null;
      readonly messageId: string | null;
    };

export interface DeliveryDeps {
  readonly db: Kysely<Database>;
  readonly smtpSettings: SmtpSettingsService;
  readonly mailer: SmtpMailer;
  /** HERALD_SMTP_URL, parsed; used by projects without SMTP settings of their own. */
  readonly globalSmtp: SmtpTarget | null;
  /** Outside production, a message with no SMTP server to go to is captured instead of failing. */
  readonly captureWhenUnconfigured: boolean;
  /** HERALD_SMTP_FROM: the sender when neither the project nor its SMTP settings name one. */
  readonly defaultFrom: Mailbox | null;
}

const permanent = (message: string): DeliveryFailure => ({ kind: 'permanent', message, smtpCode: null });

/**
 * Loads what a claimed batch needs once per project and template, not once per message, and keeps
 * compiled templates across batches (keyed by id and update time, so an edit takes effect at once).
 */
export class Deliverer {
  private readonly compiled = new Map<string, CompiledMessage>();

  constructor(private readonly deps: DeliveryDeps) {}

  batch(): DeliveryBatch {
    return new DeliveryBatch(this.deps, this.compiled);
  }
}

export class DeliveryBatch {
  private readonly projects = new Map<number, Promise<ProjectRow | undefined>>();
  private readonly templates = new Map<string, Promise<TemplateRow | undefined>>();
  private readonly smtp = new Map<number, Promise<ProjectSmtp | null>>();

  constructor(
    private readonly deps: DeliveryDeps,
    private readonly compiled: Map<string, CompiledMessage>,
  ) {}

  private cached<K, V>(map: Map<K, Promise<V>>, key: K, load: () => Promise<V>): Promise<V> {
    let value = map.get(key);
    if (value === undefined) {
      value = load();
      map.set(key, value);
    }
    return value;
  }

  private compile(template: TemplateRow): CompiledMessage {
    const key = `${template.id}:${template.updated_at}`;
    let compiled = this.compiled.get(key);
    if (compiled === undefined) {
      if (this.compiled.size >= 1000) this.compiled.clear();
      compiled = new CompiledMessage({
        subject: template.subject,
        text: template.text_body,
        html: template.html_body,
      });
      this.compiled.set(key, compiled);
    }
    return compiled;
  }

  async attempt(row: NotificationRow): Promise<AttemptResult> {
    const { db } = this.deps;
    const project = await this.cached(this.projects, row.project_id, () =>
      findProjectById(db, row.project_id),
    );
    const template = await this.cached(this.templates, `${row.project_id}\n${row.template}`, () =>
      findTemplate(db, row.project_id, row.template),
    );
    if (project === undefined || template === undefined) {
      return {
        ok: false,
        failure: permanent(Messages.templateNotFound),
        transport: null,
        rendered: null,
        messageId: null,
      };
    }
    const rendered = this.compile(template).render(JSON.parse(row.data) as Record<string, unknown>);
    const to = parseMailbox(row.recipient);
    const projectSmtp = await this.cached(this.smtp, project.id, () =>
      this.deps.smtpSettings.forDelivery(project.id),
    );
    const from = senderFor({
      project: {
        fromEmail: project.from_email,
        fromName: project.from_name,
        contactEmail: project.contact_email,
      },
      smtp: projectSmtp,
      defaultFrom: this.deps.defaultFrom,
    });
    const target = projectSmtp?.target ?? this.deps.globalSmtp;
    const transport = target !== null ? 'smtp' : this.deps.captureWhenUnconfigured ? 'capture' : null;
    const fail = (failure: DeliveryFailure, messageId: string | null = null): AttemptResult => ({
      ok: false,
      failure,
      transport,
      rendered,
      messageId,
    });

    if (to === null) return fail(permanent(`Invalid recipient address: ${row.recipient}`));
    if (transport === null) return fail(permanent(Messages.smtpNotConfigured));
    if (from === null) {
      return fail(
        permanent(
          "No from address configured: set the project's from email, its SMTP from email or HERALD_SMTP_FROM",
        ),
      );
    }
    // A stable Message-ID lets a relay, or a person, recognise a resend of the same notification.
    const messageId = `${row.request_id}@${from.address.slice(from.address.lastIndexOf('@') + 1)}`;
    if (transport === 'capture' || target === null) {
      return {
        ok: true,
        transport: 'capture',
        smtpCode: 250,
        response: '250 Captured (no SMTP server configured)',
        rendered,
        messageId,
      };
    }
    const raw = await composeMessage({
      from,
      to,
      subject: rendered.subject,
      text: rendered.text,
      html: rendered.html,
      messageId,
      date: new Date(),
      headers: { 'X-Herald-Request-Id': row.request_id },
    });
    try {
      const reply = await this.deps.mailer.send(target, { from: from.address, to: to.address }, raw);
      return {
        ok: true,
        transport: 'smtp',
        smtpCode: reply.code,
        response: reply.response,
        rendered,
        messageId,
      };
    } catch (error) {
      if (error instanceof SmtpDeliveryError) return fail(error.failure, messageId);
      throw error;
    }
  }
}
