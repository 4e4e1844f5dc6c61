import type { Mailbox } from '../domain/address.js';
import { chooseTransport, planDelivery } from '../domain/delivery-plan.js';
import { Messages } from '../domain/errors.js';
import type { AttemptResult, DeliveryFailure } from '../domain/attempt.js';
import { composeMessage } from '../mail/mime.js';
import { SmtpDeliveryError, type SmtpMailer } from '../mail/smtp.js';
import type { SmtpTarget } from '../mail/smtp-target.js';
import { urlHost } from '../domain/url-host.js';
import type { NotificationRow } from '../storage/schema.js';
import type { RenderedMessage } from '../domain/message.js';
import { TemplateRenderError } from '../domain/template/budget.js';
import type { DeliveryContext } from './loader.js';

export interface DeliveryDeps {
  readonly mailer: SmtpMailer;
  /** HERALD_SMTP_URL, parsed; used by projects without SMTP settings of their own. */
  readonly globalSmtp: SmtpTarget | null;
  /** In production a message with no SMTP server to go to fails; elsewhere it is captured. */
  readonly production: boolean;
  /** HERALD_SMTP_FROM: the sender when neither the project nor its SMTP settings name one. */
  readonly defaultFrom: Mailbox | null;
  /**
   * With HERALD_BOUNCE_DOMAIN: the envelope sender (Return-Path) `bounces+<token>@domain` of a
   * notification, so reports come back to Herald's listener naming the message.
   */
  readonly returnPath?: ((notificationId: number) => string) | null;
}

const permanent = (message: string): DeliveryFailure => ({ kind: 'permanent', message, smtpCode: null });

/**
 * One delivery attempt: render the template, plan the delivery from the settings, compose the
 * message and hand it to the relay (or capture it). It reads nothing itself: the loader brought
 * the context, and the worker records the result.
 */
export class Deliverer {
  constructor(private readonly deps: DeliveryDeps) {}

  /**
   * The relay a notification with this context goes to, as host and port: lanes are shared per
   * destination, so one host behind several logins is still one relay. Null when none is used.
   */
  relayOf(context: DeliveryContext): string | null {
    const choice = chooseTransport(context.smtp?.target ?? null, this.deps.globalSmtp, this.deps.production);
    if (choice.kind !== 'project' && choice.kind !== 'global') return null;
    return `${urlHost(choice.target.host.toLowerCase())}:${choice.target.port}`;
  }

  async attempt(row: NotificationRow, context: DeliveryContext | null): Promise<AttemptResult> {
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
    const planned = planDelivery({
      project: {
        fromEmail: project.from_email,
        fromName: project.from_name,
        contactEmail: project.contact_email,
      },
      smtp,
      defaultFrom: this.deps.defaultFrom,
      globalTarget: this.deps.globalSmtp,
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
    const raw = await composeMessage({
      from: plan.from,
      to: plan.to,
      subject: rendered.subject,
      text: rendered.text,
      html: rendered.html,
      messageId: plan.messageId,
      date: new Date(),
      headers: { 'X-Herald-Request-Id': row.request_id },
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
}
