import { Command } from 'commander';
import { notificationView } from '../domain/notification.js';
import type { ContentView, NotificationDetail } from '../services/notifications.js';
import { diagnoseTemplate, type TemplateDiagnosis } from '../services/template-preview.js';
import { servicesAction } from './context.js';
import { iso } from './output.js';

interface Shown {
  readonly row: NotificationDetail['notification'];
  readonly attempts: NotificationDetail['attempts'];
  readonly content: ContentView;
  readonly template: TemplateDiagnosis;
}

function showJson({ row, attempts, content, template }: Shown): Record<string, unknown> {
  let data: unknown = content.data;
  try {
    data = JSON.parse(content.data);
  } catch {
    // Shown as the note the content view gives.
  }
  return {
    ...notificationView(row),
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
      relay: a.relay,
    })),
  };
}

function templateLines(row: Shown['row'], template: TemplateDiagnosis): string[] {
  if (template.found) {
    return template.blank !== null && template.blank.length > 0
      ? [`rendered blank: ${template.blank.map((name) => `{{${name}}}`).join(', ')}`]
      : [];
  }
  return [
    `no template named "${row.template}" in this project` +
      (template.suggestion === null ? '' : `; did you mean "${template.suggestion}"?`),
    `templates: ${template.names.length > 0 ? template.names.join(', ') : '(none)'}`,
  ];
}

function showText(shown: Shown, status: string): string {
  const { row, attempts, content, template } = shown;
  return [
    `${row.request_id}  ${status}  (attempts: ${row.attempts}${row.transport ? `, transport: ${row.transport}` : ''})`,
    `template: ${row.template}   to: ${row.recipient}`,
    ...(row.error_message ? [`error: ${row.error_message}`] : []),
    ...templateLines(row, template),
    ...attempts.map(
      (a) =>
        `  #${a.attempt} ${iso(a.finished_at)} ${a.outcome}${a.relay ? ` (${a.relay})` : ''}: ${a.response ?? ''}`,
    ),
    ...(content.subject !== null ? ['', `Subject: ${content.subject}`, '', content.text ?? ''] : []),
    ...(content.html ? ['', '--- HTML ---', content.html] : []),
    ...(content.masked > 0
      ? ['', `(${content.masked} secret value${content.masked === 1 ? '' : 's'} hidden; --reveal shows them)`]
      : []),
  ].join('\n');
}

export function notificationCommands(): Command {
  const notification = new Command('notification').description('inspect and cancel notifications');

  notification
    .command('show')
    .description('status, attempts and the rendered message (captured messages in full)')
    .argument('<request_id>', 'the request_id returned by the send call')
    .option('--reveal', 'show values of placeholders named like password, secret, token or code')
    .action(
      servicesAction(
        async ({ notifications, templates }, out, requestId: string, options: { reveal?: boolean }) => {
          const { notification: row, attempts } = await notifications.detail(requestId);
          const template = await diagnoseTemplate(templates, {
            ...row,
            data: row.content_erased_at === null ? row.data : null,
          });
          const rerender = template.found ? template.rerender : undefined;
          const content = notifications.content(row, options.reveal ?? false, rerender);
          const shown = { row, attempts, content, template };
          const json = showJson(shown);
          out.print(json, showText(shown, String(json.status)));
        },
      ),
    );

  notification
    .command('cancel')
    .description('cancel a queued notification, as DELETE /api/v1/notifications/{request_id} does')
    .argument('<request_id>', 'the request_id returned by the send call')
    .action(
      servicesAction(async ({ notifications }, out, requestId: string) => {
        const body = await notifications.cancel(requestId, 'any');
        out.print({ ...body }, `${body.request_id}  ${body.status}  (${body.error_message ?? ''})`);
      }),
    );

  return notification;
}

export function statsCommand(): Command {
  return new Command('stats')
    .description('notifications by state (queued, sending, sent, failed)')
    .option('--project <project>', 'only this project (name or id)')
    .action(
      servicesAction(async ({ notifications, projects }, out, options: { project?: string }) => {
        const projectId =
          options.project === undefined ? undefined : (await projects.resolve(options.project)).id;
        out.print({ ...(await notifications.counts(projectId)) });
      }),
    );
}
