import type { DeliveryFailure } from '../domain/attempt.js';
import { bounded, SmtpDeliveryError } from './smtp-failures.js';

/**
 * How long a login the relay refused with `535` is not tried again by a worker process, unless the
 * SMTP settings change (a new user or password is another login, tried at once).
 */
export const LOGIN_HOLD_MS = 5 * 60_000;

/**
 * The logins to one relay with one user and password, in one worker process, so that a wrong
 * password costs the relay one refused login and not one per queued message: many providers lock
 * the account after a handful (Microsoft 365's smart lockout after ten, an Active Directory
 * behind an Exchange relay often after five), and a locked account stops the mail that a fixed
 * password would have let through. As Postfix's `smtp_sasl_auth_cache_name` does it:
 *
 * - **One at a time until one is accepted.** Connections are made in parallel, but until the relay
 *   has accepted this login once, each waits at its AUTH for the one logging in before it.
 * - **Held after a `535`.** The relay's `535` (RFC 4954: the credentials are invalid) holds the
 *   login for LOGIN_HOLD_MS: every attempt that needs a new connection meanwhile fails at once with
 *   the relay's words, transient (the fallback relay takes it, or it is retried on its back-off),
 *   without a connection. After the hold one login is tried again. Other refusals (`454`, `530`)
 *   are not held: they say nothing about the password.
 */
export class LoginGate {
  private accepted = false;
  /** The login in flight while none has been accepted yet. */
  private trial: Promise<void> | null = null;
  private refusal: { readonly failure: DeliveryFailure; readonly until: number } | null = null;

  constructor(
    private readonly holdMs = LOGIN_HOLD_MS,
    private readonly now: () => number = Date.now,
  ) {}

  /** The failure an attempt that needs a new login ends with now, or null when it may log in. */
  held(): DeliveryFailure | null {
    const refusal = this.refusal;
    if (refusal === null || this.now() >= refusal.until) return null;
    const after = new Date(refusal.until).toISOString().slice(11, 19);
    return {
      ...refusal.failure,
      message: bounded(
        `Login not tried: ${refusal.failure.message}; Herald tries this user and password again ` +
          `after ${after} UTC, or at once when the SMTP settings change`,
      ),
    };
  }

  /**
   * Runs `login` (the AUTH exchange of one connection) when its turn comes; `refused` tells a `535`
   * from other failures, and `judge` words it as a delivery failure. Rejects with SmtpDeliveryError
   * when the login is held, whether before its turn or because the login before it was refused.
   */
  async login(
    login: () => Promise<void>,
    refused: (error: unknown) => boolean,
    judge: (error: unknown) => DeliveryFailure,
  ): Promise<void> {
    while (!this.accepted && this.trial !== null) await this.trial;
    const held = this.held();
    if (held !== null) throw new SmtpDeliveryError(held);
    const attempt = login().then(
      () => {
        this.accepted = true;
        this.refusal = null;
      },
      (error: unknown) => {
        if (refused(error)) {
          this.accepted = false;
          this.refusal = { failure: judge(error), until: this.now() + this.holdMs };
        }
        throw error;
      },
    );
    if (this.accepted) return attempt;
    const trial = attempt.then(
      () => undefined,
      () => undefined,
    );
    this.trial = trial;
    try {
      return await attempt;
    } finally {
      if (this.trial === trial) this.trial = null;
    }
  }
}
