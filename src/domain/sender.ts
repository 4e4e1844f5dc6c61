import type { Mailbox } from './address.js';

/** Where a message's From can come from, in the order they are consulted. */
export interface SenderSources {
  readonly project: {
    readonly fromEmail: string | null;
    readonly fromName: string | null;
    readonly contactEmail: string | null;
  };
  /** The project's own SMTP settings, if it has them. */
  readonly smtp: { readonly fromEmail: string | null; readonly fromName: string | null } | null;
  /** HERALD_SMTP_FROM. */
  readonly defaultFrom: Mailbox | null;
}

/**
 * The sender of a project's messages: the project's from email, else its SMTP settings' from
 * email, else HERALD_SMTP_FROM, else its contact email; null when none is set. Delivery and the
 * dashboard's test email both use this, so a test shows the From that real mail will carry.
 */
export function senderFor({ project, smtp, defaultFrom }: SenderSources): Mailbox | null {
  if (project.fromEmail !== null) return mailbox(project.fromEmail, project.fromName);
  if (smtp?.fromEmail) return mailbox(smtp.fromEmail, smtp.fromName ?? project.fromName);
  if (defaultFrom !== null) return defaultFrom;
  return project.contactEmail === null ? null : mailbox(project.contactEmail, project.fromName);
}

function mailbox(address: string, name: string | null): Mailbox {
  return name === null ? { address } : { name, address };
}
