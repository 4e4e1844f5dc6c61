/**
 * A stored SMTP password belongs to one account on one relay. When the host, port or username
 * changes and no new password is given, the old one is dropped: otherwise "verify" or the next
 * delivery would hand it, in AUTH, to whatever host was just typed in (product.md §8).
 */
export interface SmtpAccount {
  readonly host: string;
  readonly port: number;
  readonly username: string | null;
}

export function storedPasswordSurvives(stored: SmtpAccount, next: SmtpAccount): boolean {
  return (
    stored.host.toLowerCase() === next.host.toLowerCase() &&
    stored.port === next.port &&
    (stored.username ?? null) === (next.username ?? null)
  );
}
