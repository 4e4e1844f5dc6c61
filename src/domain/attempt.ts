import type { RenderedMessage } from './message.js';

/**
 * What one delivery attempt came to, as the worker hands it to the lifecycle: the relay's answer
 * (or the capture), or a failure that is transient (the relay is unreachable, slow, or answers
 * 4xx: worth another attempt) or permanent (5xx, a missing template: final).
 */

export type FailureKind = 'transient' | 'permanent';

export interface DeliveryFailure {
  readonly kind: FailureKind;
  /** Stored as the notification's error_message, e.g. `SMTP 550 5.1.1 <x@y>: Recipient address rejected`. */
  readonly message: string;
  readonly smtpCode: number | null;
  /** The SMTP command the reply answered (`MAIL FROM`, `RCPT TO`, `DATA`, …), where known. */
  readonly command?: string | null;
  /**
   * Set by the SMTP adapter: whether the relay's greeting came (false: no connection, no greeting,
   * a failed handshake of implicit TLS), and whether the transaction ran out of time. The relay's
   * health is judged from them (relay-health.ts).
   */
  readonly reached?: boolean;
  readonly timedOut?: boolean;
}

export type Transport = 'smtp' | 'capture';

export type AttemptResult =
  | {
      readonly ok: true;
      readonly transport: Transport;
      readonly smtpCode: number;
      readonly response: string;
      readonly rendered: RenderedMessage;
      readonly messageId: string;
    }
  | {
      readonly ok: false;
      readonly failure: DeliveryFailure;
      readonly transport: Transport | null;
      readonly rendered: RenderedMessage | null;
      readonly messageId: string | null;
    };

/** An attempt that failed before anything was rendered or sent. */
export function failedBeforeSending(failure: DeliveryFailure): AttemptResult {
  return { ok: false, failure, transport: null, rendered: null, messageId: null };
}
