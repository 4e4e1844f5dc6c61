import { Command } from 'commander';
import type { SmtpSettingsView } from '../services/smtp-settings.js';
import { urlHost } from '../domain/url-host.js';
import { projectSubcommand, servicesAction } from './context.js';
import { iso } from './output.js';

/** SMTP settings as printed: the password is never shown, only whether one is stored. */
function smtpJson(view: SmtpSettingsView): Record<string, unknown> {
  return {
    project_id: view.projectId,
    host: view.host,
    port: view.port,
    security: view.security,
    username: view.username,
    has_password: view.hasPassword,
    from_email: view.fromEmail,
    from_name: view.fromName,
    updated_at: iso(view.updatedAt),
  };
}

export function smtpCommands(): Command {
  const smtp = new Command('smtp').description("a project's own SMTP relay");

  projectSubcommand(smtp, 'set', 'use this relay for the project (the password is stored encrypted)')
    .requiredOption(
      '--url <url>',
      'smtp://user:pass@host:port or smtps://…; ?security=auto|starttls|tls|none (default auto: STARTTLS when offered, required with a login)',
    )
    .option('--from-email <email>', 'sender address when the project has none')
    .option('--from-name <name>', 'sender display name')
    .action(
      servicesAction(
        async (
          { smtpSettings },
          out,
          options: { project: string; url: string; fromEmail?: string; fromName?: string },
        ) => {
          const view = await smtpSettings.setFromUrl(options.project, options.url, {
            ...(options.fromEmail !== undefined && { fromEmail: options.fromEmail }),
            ...(options.fromName !== undefined && { fromName: options.fromName }),
          });
          out.print(
            smtpJson(view),
            `SMTP for project ${view.projectId}: ${urlHost(view.host)}:${view.port} (${view.security}).`,
          );
        },
      ),
    );

  projectSubcommand(smtp, 'show', "show the project's SMTP settings (without the password)").action(
    servicesAction(async ({ smtpSettings }, out, options: { project: string }) => {
      const view = await smtpSettings.get(options.project);
      out.print(view === null ? { configured: false } : { configured: true, ...smtpJson(view) });
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
