import { Command } from 'commander';
import { NOTIFICATION_EVENTS } from '../domain/events.js';
import { endpointJson } from '../services/json-views.js';
import { projectSubcommand, servicesAction } from './context.js';

export function webhookCommands(): Command {
  const webhook = new Command('webhook').description(
    "a project's webhook endpoints (signed event callbacks)",
  );

  projectSubcommand(webhook, 'create', 'add an endpoint; its signing secret is printed once and never again')
    .requiredOption('--url <url>', 'http(s) URL that receives the events')
    .option('--events <list>', `comma-separated events (default: all of ${NOTIFICATION_EVENTS.join(', ')})`)
    .action(
      servicesAction(
        async ({ webhooks }, out, options: { project: string; url: string; events?: string }) => {
          const { endpoint, secret } = await webhooks.create(options.project, {
            url: options.url,
            ...(options.events !== undefined && { events: options.events }),
          });
          out.print(
            { ...endpointJson(endpoint), secret },
            `Webhook ${endpoint.id} created for ${endpoint.url}\nSigning secret (shown once, store it now): ${secret}`,
          );
        },
      ),
    );

  projectSubcommand(webhook, 'list', "the project's endpoints").action(
    servicesAction(async ({ webhooks }, out, options: { project: string }) => {
      const endpoints = await webhooks.list(options.project);
      out.printList(
        'webhooks',
        endpoints,
        endpointJson,
        'No webhook endpoints.',
        (e) =>
          `${e.id}\t${e.enabled ? 'enabled' : 'disabled'}\t${e.url}\t${(e.events ?? ['all events']).join(',')}`,
      );
    }),
  );

  projectSubcommand(webhook, 'delete', 'remove an endpoint and its delivery history')
    .requiredOption('--id <id>', 'endpoint id (from webhook list)')
    .action(
      servicesAction(async ({ webhooks }, out, options: { project: string; id: string }) => {
        await webhooks.delete(options.project, options.id);
        out.print({ deleted: true, id: Number(options.id) }, `Webhook ${options.id} deleted.`);
      }),
    );

  return webhook;
}
