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
    .action(async (requestId: string, _options: unknown, command: Command) =>
      withServices(command, async ({ notifications }, out) => {
        const { notification: row, attempts } = await notifications.detail(requestId);
        const json = {
          ...statusBody(row),
          project_id: row.project_id,
          message_id: row.message_id,
          last_error: row.error_message,
          data: JSON.parse(row.data) as unknown,
          subject: row.subject,
          text: row.text_body,
          html: row.html_body,
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
          ...attempts.map((a) => `  #${a.attempt} ${iso(a.finished_at)} ${a.outcome}: ${a.response ?? ''}`),
          ...(row.subject !== null ? ['', `Subject: ${row.subject}`, '', row.text_body ?? ''] : []),
          ...(row.html_body ? ['', '--- HTML ---', row.html_body] : []),
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
