import { Command } from 'commander';
import { errors } from '../domain/errors.js';
import { relayStatusJson, smtpJson } from '../services/json-views.js';
import type { RelayStatus, RelayView, SmtpSettingsView } from '../services/smtp-settings.js';
import { urlHost } from '../domain/url-host.js';
import { describeSmtpTarget } from '../mail/smtp-target.js';
import { given, projectSubcommand, servicesAction } from './context.js';
import { readSecret } from './read-secret.js';

/** A stored relay in a line: its address, security and login, never its password. */
function relayShown(view: RelayView): string {
  const password = view.username === null ? '' : view.hasPassword ? ', password stored' : ', no password';
  return `${describeSmtpTarget(view)}${password}`;
}

/** Who sends a message when the project's own from address is not set (domain/sender.ts). */
function senderShown(view: SmtpSettingsView): string {
  if (view.fromEmail === null) return "none (the project's from address is used)";
  const name = view.fromName === null ? '' : `${view.fromName} `;
  return `${name}<${view.fromEmail}> (when the project has no from address of its own)`;
}

/**
 * `smtp show` for a person: the project's settings, then each relay its mail goes to, and its
 * state. With no relay at all, mail is captured outside production and fails in production.
 */
function smtpShown(
  view: SmtpSettingsView | null,
  statuses: readonly RelayStatus[],
  production: boolean,
): string {
  if (view === null && statuses.length === 0)
    return production
      ? "No SMTP settings of its own, and Herald has no relay (HERALD_SMTP_URL): its mail fails with 'SMTP not configured'."
      : 'No SMTP settings of its own, and Herald has no relay (HERALD_SMTP_URL): its mail is captured, not sent (capture mode).';
  const settings =
    view === null
      ? ["No SMTP settings of its own: its mail goes through Herald's relay (HERALD_SMTP_URL)."]
      : [
          `Relay:     ${relayShown(view)}`,
          `Fallback:  ${view.fallback === null ? 'none' : relayShown(view.fallback)}`,
          `From:      ${senderShown(view)}`,
          `Updated:   ${new Date(view.updatedAt).toISOString()}`,
        ];
  const relays = statuses.map((status) => {
    const whose = status.source === 'project' ? 'its own' : "Herald's";
    const state =
      status.down === null
        ? 'up'
        : `down since ${new Date(status.down.since).toISOString()}: ${status.down.lastError ?? 'no error recorded'}` +
          (status.down.nextProbeAt === null
            ? ''
            : status.down.nextProbeAt <= Date.now()
              ? '; next probe due now'
              : `; next probe ${new Date(status.down.nextProbeAt).toISOString()}`);
    return `  ${status.role.padEnd(8)}  ${status.relay} (${whose}): ${state}`;
  });
  return [...settings, 'Its mail goes to:', ...relays].join('\n');
}

export function smtpCommands(): Command {
  const smtp = new Command('smtp').description("a project's own SMTP relay");

  projectSubcommand(smtp, 'set', 'use this relay for the project (the password is stored encrypted)')
    .requiredOption(
      '--url <url>',
      'smtp://user:pass@host:port or smtps://…; ?security=auto|starttls|tls|none (default auto: STARTTLS when offered, required with a login)',
    )
    .option(
      '--fallback-url <url>',
      'a second relay that takes over when this one fails or is down (same form; "" removes it; left out, kept)',
    )
    .option('--from-email <email>', 'sender address when the project has none')
    .option('--from-name <name>', 'sender display name')
    .option(
      '--password-stdin',
      "read the relay's password from stdin instead of the URL (smtp://user@host:port), out of the process list and shell history",
    )
    .action(
      servicesAction(
        async (
          { smtpSettings },
          out,
          options: {
            project: string;
            url: string;
            fallbackUrl?: string;
            fromEmail?: string;
            fromName?: string;
            passwordStdin?: boolean;
          },
        ) => {
          let password: string | undefined;
          if (options.passwordStdin) {
            password = await readSecret('SMTP password');
            // An unset variable piped in must not erase the stored password; a URL without one does that.
            if (password === '') throw errors.invalidInput('No password on stdin (--password-stdin)');
          }
          const view = await smtpSettings.setFromUrl(options.project, options.url, {
            ...given(options, 'fromEmail', 'fromName', 'fallbackUrl'),
            ...(password !== undefined && { password }),
          });
          const fallback =
            view.fallback === null ? '' : `, fallback ${urlHost(view.fallback.host)}:${view.fallback.port}`;
          out.print(
            smtpJson(view),
            `SMTP for project ${view.projectId}: ${urlHost(view.host)}:${view.port} (${view.security})${fallback}.`,
          );
        },
      ),
    );

  projectSubcommand(
    smtp,
    'show',
    "show the project's SMTP settings (without passwords) and whether its relays are up",
  ).action(
    servicesAction(async ({ smtpSettings, config }, out, options: { project: string }) => {
      const view = await smtpSettings.get(options.project);
      const statuses = await smtpSettings.relays(options.project);
      const relays = statuses.map(relayStatusJson);
      out.print(
        view === null ? { configured: false, relays } : { configured: true, ...smtpJson(view), relays },
        smtpShown(view, statuses, config.production),
      );
    }),
  );

  projectSubcommand(
    smtp,
    'clear',
    "remove the project's SMTP settings (the global default applies again)",
  ).action(
    servicesAction(async ({ smtpSettings }, out, options: { project: string }) => {
      const cleared = await smtpSettings.clear(options.project);
      out.print({ cleared }, cleared ? 'SMTP settings removed.' : 'The project had no SMTP settings.');
    }),
  );

  return smtp;
}
