import { parseMailbox, type Mailbox } from '../domain/address.js';
import type { AttachmentInfo } from '../domain/attachments.js';
import { chooseTransport, planDelivery } from '../domain/delivery-plan.js';
import { Messages } from '../domain/errors.js';
import type { AttemptResult, DeliveryFailure } from '../domain/attempt.js';
import { composeMessage, type OutgoingFile } from '../mail/mime.js';
import type { SmtpMailer } from '../mail/smtp.js';
import { SmtpDeliveryError } from '../mail/smtp-failures.js';
import { relayKey, type SmtpTarget } from '../mail/smtp-target.js';
import type { RelayRole } from '../domain/relay-health.js';
import type { RelayEndpoint } from '../storage/relay-health.js';
import type { NotificationRow } from '../storage/schema.js';
import type { RenderedMessage } from '../domain/message.js';
import { TemplateRenderError } from '../domain/template/budget.js';
import type { DeliveryContext } from './loader.js';

export interface DeliveryDeps {
  readonly mailer: SmtpMailer;
  /** HERALD_SMTP_URL, parsed; used by projects without SMTP settings of their own. */
  readonly globalSmtp: SmtpTarget | null;
  /** HERALD_SMTP_FALLBACK_URL, parsed: the global relay's fallback. */
  readonly globalFallback?: SmtpTarget | null;
  /** In production a message with no SMTP server to go to fails; elsewhere it is captured. */
  readonly production: boolean;
  /** HERALD_SMTP_FROM: the sender when neither the project nor its SMTP settings name one. */
  readonly defaultFrom: Mailbox | null;
  /**
   * With HERALD_BOUNCE_DOMAIN: the envelope sender (Return-Path) `bounces+<token>@domain` of a
   * notification, so reports come back to Herald's listener naming the message.
   */
  readonly returnPath?: ((notificationId: number) => string) | null;
  /** A notification's files' bytes, in order, read once per attempt that sends them; null when gone. */
  readonly files?: (notificationId: number) => Promise<readonly Uint8Array[] | null>;
}

const permanent = (message: string): DeliveryFailure => ({ kind: 'permanent', message, smtpCode: null });

/** A relay a message may go to: where (for lanes, health and probes) and how (for the attempt). */
export interface Relay extends RelayEndpoint {
  readonly target: SmtpTarget;
}

/** A message's relays: its primary, and the fallback that takes over when the primary fails. */
export interface Relays {
  readonly primary: Relay;
  readonly fallback: Relay | null;
}

function relayOf(target: SmtpTarget): Relay {
  return {
    relay: relayKey(target),
    host: target.host,
    port: target.port,
    tls: target.security === 'tls',
    trusted: target.trusted === true,
    target,
  };
}

/**
 * One delivery attempt: render the template, plan the delivery from the settings, compose the
 * message and hand it to the relay (or capture it). It reads nothing itself: the loader brought
 * the context, and the worker records the result.
 */
export class Deliverer {
  constructor(private readonly deps: DeliveryDeps) {}

  /** The SMTP client attempts go through (and probes of relays that are down). */
  get mailer(): SmtpMailer {
    return this.deps.mailer;
  }

  /**
   * The relays a notification with this context may go to: the project's own (its primary and
   * fallback), else Herald's (HERALD_SMTP_URL and HERALD_SMTP_FALLBACK_URL). A project with a relay
   * of its own never falls back to Herald's: its own login and sender domain vouch for its mail.
   * Null when no relay is used (capture, or none configured). A fallback that is the primary itself
   * is none: it would take each retry at once, from the relay that just refused it.
   */
  relaysOf(context: DeliveryContext): Relays | null {
    const choice = chooseTransport(context.smtp?.target ?? null, this.deps.globalSmtp, this.deps.production);
    if (choice.kind !== 'project' && choice.kind !== 'global') return null;
    const primary = relayOf(choice.target);
    const target =
      choice.kind === 'project' ? (context.smtp?.fallback ?? null) : (this.deps.globalFallback ?? null);
    const fallback = target === null ? null : relayOf(target);
    return { primary, fallback: fallback?.relay === primary.relay ? null : fallback };
  }

  /** One attempt through the project's `role` relay (its fallback only where it has one). */
  async attempt(
    row: NotificationRow,
    context: DeliveryContext | null,
    role: RelayRole = 'primary',
  ): Promise<AttemptResult> {
    if (context === null) {
      return {
        ok: false,
        failure: permanent(Messages.templateNotFound),
        transport: null,
        rendered: null,
        messageId: null,
      };
    }
    const { project, message, smtp } = context;
    let rendered: RenderedMessage;
    try {
      rendered = message.render(JSON.parse(row.data) as Record<string, unknown>, row.locale);
    } catch (error) {
      // Past the render's bound (or a template the engine refuses): final, with the reason.
      if (!(error instanceof TemplateRenderError)) throw error;
      return {
        ok: false,
        failure: permanent(error.message),
        transport: null,
        rendered: null,
        messageId: null,
      };
    }
    const fallback = role === 'fallback' ? this.relaysOf(context)?.fallback : undefined;
    const planned = planDelivery({
      project: {
        fromEmail: project.from_email,
        fromName: project.from_name,
        contactEmail: project.contact_email,
      },
      // The same plan, through the fallback: the sender and envelope do not change with the relay.
      smtp: smtp !== null && fallback ? { ...smtp, target: fallback.target } : smtp,
      defaultFrom: this.deps.defaultFrom,
      globalTarget: smtp === null && fallback ? fallback.target : this.deps.globalSmtp,
      production: this.deps.production,
      recipient: row.recipient,
      idLeft: row.request_id,
    });
    if (!planned.ok) {
      const failure = permanent(planned.error);
      return { ok: false, failure, transport: planned.transport, rendered, messageId: null };
    }
    const { plan } = planned;
    if (plan.target === null) {
      return {
        ok: true,
        transport: 'capture',
        smtpCode: 250,
        response: '250 Captured (no SMTP server configured)',
        rendered,
        messageId: plan.messageId,
      };
    }
    const attachments = await this.filesOf(row);
    if (attachments === null) {
      const failure = permanent('Attachments are no longer stored (content retention)');
      return { ok: false, failure, transport: 'smtp', rendered, messageId: null };
    }
    const raw = await composeMessage({
      from: plan.from,
      to: plan.to,
      replyTo: row.reply_to === null ? null : parseMailbox(row.reply_to),
      subject: rendered.subject,
      text: rendered.text,
      html: rendered.html,
      messageId: plan.messageId,
      date: new Date(),
      headers: { 'X-Herald-Request-Id': row.request_id },
      attachments,
    });
    try {
      const envelope = this.deps.returnPath
        ? { ...plan.envelope, from: this.deps.returnPath(row.id) }
        : plan.envelope;
      const reply = await this.deps.mailer.send(plan.target, envelope, raw);
      return {
        ok: true,
        transport: 'smtp',
        smtpCode: reply.code,
        response: reply.response,
        rendered,
        messageId: plan.messageId,
      };
    } catch (error) {
      if (!(error instanceof SmtpDeliveryError)) throw error;
      return { ok: false, failure: error.failure, transport: 'smtp', rendered, messageId: plan.messageId };
    }
  }

  /**
   * The files of a message about to be sent, with their bytes read from the store (once for this
   * attempt; a captured message never reads them); null when the bytes are gone.
   */
  private async filesOf(row: NotificationRow): Promise<OutgoingFile[] | null> {
    if (row.attachments === null) return [];
    const listed = JSON.parse(row.attachments) as AttachmentInfo[];
    const contents = (await this.deps.files?.(row.id)) ?? null;
    if (contents === null || contents.length !== listed.length) return null;
    return listed.map((file, i) => ({
      filename: file.filename,
      contentType: file.content_type,
      content: contents[i]!,
    }));
  }
}
