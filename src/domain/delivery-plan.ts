import { parseMailbox, type Mailbox } from './address.js';
import { Messages } from './errors.js';
import { senderFor, type SenderSources } from './sender.js';

/**
 * Where a project's mail goes: its own SMTP settings, else the operator's HERALD_SMTP_URL, else
 * (outside production only) capture, where the message is rendered and stored but not sent.
 * `none` means mail fails with `SMTP not configured`.
 */
export type TransportChoice<Target> =
  { readonly kind: 'project' | 'global'; readonly target: Target } | { readonly kind: 'capture' | 'none' };

export function chooseTransport<Target>(
  projectTarget: Target | null,
  globalTarget: Target | null,
  production: boolean,
): TransportChoice<Target> {
  if (projectTarget !== null) return { kind: 'project', target: projectTarget };
  if (globalTarget !== null) return { kind: 'global', target: globalTarget };
  return { kind: production ? 'none' : 'capture' };
}

/**
 * A Message-ID in the sender's domain. Delivery derives the left part from the request id, so a
 * resend of the same notification carries the same id and a relay, or a person, recognises it.
 */
export function messageIdFor(idLeft: string, from: Mailbox): string {
  return `${idLeft}@${from.address.slice(from.address.lastIndexOf('@') + 1)}`;
}

export interface DeliveryPlanInput<Target> extends SenderSources {
  /** The project's own SMTP settings: a relay and optional sender. */
  readonly smtp: (SenderSources['smtp'] & { readonly target: Target }) | null;
  readonly globalTarget: Target | null;
  readonly production: boolean;
  readonly recipient: string;
  /** Left part of the Message-ID. */
  readonly idLeft: string;
}

export interface DeliveryPlan<Target> {
  readonly transport: 'smtp' | 'capture';
  /** The relay; null when captured. */
  readonly target: Target | null;
  readonly from: Mailbox;
  readonly to: Mailbox;
  /** SMTP envelope: MAIL FROM and RCPT TO. */
  readonly envelope: { readonly from: string; readonly to: string };
  readonly messageId: string;
}

/** Why a message cannot be sent at all; each is a permanent failure. */
export type PlanProblem = 'recipient' | 'transport' | 'sender';

export type PlanResult<Target> =
  | { readonly ok: true; readonly plan: DeliveryPlan<Target> }
  | {
      readonly ok: false;
      readonly problem: PlanProblem;
      readonly error: string;
      /** The transport the message would have used, for the record. */
      readonly transport: 'smtp' | 'capture' | null;
    };

export const NO_SENDER_ERROR =
  "No from address configured: set the project's from email, its SMTP from email or HERALD_SMTP_FROM";

/**
 * Everything about one message's delivery that follows from settings alone: the relay, the
 * sender, the envelope and the Message-ID. Delivery and the dashboard's test email both plan with
 * it, so a test shows what real mail will do.
 */
export function planDelivery<Target>(input: DeliveryPlanInput<Target>): PlanResult<Target> {
  const choice = chooseTransport(input.smtp?.target ?? null, input.globalTarget, input.production);
  const transport = choice.kind === 'none' ? null : choice.kind === 'capture' ? 'capture' : 'smtp';
  const to = parseMailbox(input.recipient);
  if (to === null)
    return {
      ok: false,
      problem: 'recipient',
      error: `Invalid recipient address: ${input.recipient}`,
      transport,
    };
  if (transport === null)
    return { ok: false, problem: 'transport', error: Messages.smtpNotConfigured, transport };
  const from = senderFor(input);
  if (from === null) return { ok: false, problem: 'sender', error: NO_SENDER_ERROR, transport };
  return {
    ok: true,
    plan: {
      transport,
      target: choice.kind === 'project' || choice.kind === 'global' ? choice.target : null,
      from,
      to,
      envelope: { from: from.address, to: to.address },
      messageId: messageIdFor(input.idLeft, from),
    },
  };
}
