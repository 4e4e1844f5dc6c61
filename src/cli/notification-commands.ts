import { Command } from 'commander';
import { statusBody } from '../services/notifications.js';
import { withServices } from './context.js';
import { iso } from './output.js';

export function notificationCommands(): Command {
  const notification = new Command('notification').description('inspect notifications');

  notification
    .command('show')
    .description('status, attempts and the rendered message (captured messages in full)')
    .argument('<request_id>', 'the request_id returned by the send call')
    .option('--reveal', 'show values of placeholders named like password, secret, token or code')
    .action(async (requestId: string, options: { reveal?: boolean }, command: Command) =>
      withServices(command, async ({ notifications, templates }, out) => {
        const { notification: row, attempts } = await notifications.detail(requestId);
        const content = notifications.content(row, options.reveal ?? false);
        const template = await templates.diagnose(
          row.project_id,
          row.template,
          content.erasedAt === null ? row.data : null,
        );
        let data: unknown = content.data;
        try {
          data = JSON.parse(content.data);
        } catch {
          // Shown as the note the content view gives.
        }
        const json = {
          ...statusBody(row),
          project_id: row.project_id,
          message_id: row.message_id,
          last_error: row.error_message,
          data,
          subject: content.subject,
          text: content.text,
          html: content.html,
          masked_values: content.masked,
          // Placeholders that render blank with this message's data (null: unknown, data erased).
          blank_placeholders: template.found ? template.blank : null,
          ...(template.found
            ? {}
            : { template_missing: { templates: template.names, did_you_mean: template.suggestion } }),
          attempts_log: attempts.map((a) => ({
            attempt: a.attempt,
            started_at: iso(a.started_at),
            finished_at: iso(a.finished_at),
            outcome: a.outcome,
            smtp_code: a.smtp_code,
            response: a.response,
            transport: a.transport,
          })),
        };
        const text = [
          `${row.request_id}  ${json.status}  (attempts: ${row.attempts}${row.transport ? `, transport: ${row.transport}` : ''})`,
          `template: ${row.template}   to: ${row.recipient}`,
          ...(row.error_message ? [`error: ${row.error_message}`] : []),
          ...(template.found
            ? template.blank !== null && template.blank.length > 0
              ? [`rendered blank: ${template.blank.map((name) => `{{${name}}}`).join(', ')}`]
              : []
            : [
                `no template named "${row.template}" in this project` +
                  (template.suggestion === null ? '' : `; did you mean "${template.suggestion}"?`),
                `templates: ${template.names.length > 0 ? template.names.join(', ') : '(none)'}`,
              ]),
          ...attempts.map((a) => `  #${a.attempt} ${iso(a.finished_at)} ${a.outcome}: ${a.response ?? ''}`),
          ...(content.subject !== null ? ['', `Subject: ${content.subject}`, '', content.text ?? ''] : []),
          ...(content.html ? ['', '--- HTML ---', content.html] : []),
          ...(content.masked > 0
            ? [
                '',
                `(${content.masked} secret value${content.masked === 1 ? '' : 's'} hidden; --reveal shows them)`,
              ]
            : []),
        ];
        out.print(json, text.join('\n'));
      }),
    );

  return notification;
}

export function statsCommand(): Command {
  return new Command('stats')
    .description('notifications by state (queued, sending, sent, failed)')
    .option('--project <project>', 'only this project (name or id)')
    .action(async (options: { project?: string }, command: Command) =>
      withServices(command, async ({ notifications, projects }, out) => {
        const projectId =
          options.project === undefined ? undefined : (await projects.resolve(options.project)).id;
        out.print({ ...(await notifications.counts(projectId)) });
      }),
    );
}
