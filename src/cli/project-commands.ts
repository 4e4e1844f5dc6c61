import { Command, Option } from 'commander';
import { parseQuotaLimit, parseQuotaPeriod } from '../config.js';
import type { ProjectInput } from '../services/projects.js';
import { createsDatabase, given, servicesAction } from './context.js';
import { projectJson } from '../services/json-views.js';
import { senderFor } from '../domain/sender.js';

interface ProjectOptions {
  name?: string;
  contactEmail?: string;
  fromEmail?: string;
  fromName?: string;
  quota?: string;
  quotaPeriod?: string;
}

function projectInput(options: ProjectOptions): ProjectInput {
  return {
    ...given(options, 'name', 'contactEmail', 'fromEmail', 'fromName'),
    ...(options.quota !== undefined && { quotaLimit: parseQuotaLimit(options.quota, '--quota') }),
    ...(options.quotaPeriod !== undefined && {
      quotaPeriod: parseQuotaPeriod(options.quotaPeriod, '--quota-period'),
    }),
  };
}

function withProjectOptions(command: Command): Command {
  return command
    .option('--contact-email <email>', 'recipient when a request has no "to"')
    .option('--from-email <email>', 'sender address')
    .option('--from-name <name>', 'sender display name')
    .option('--quota <n>', 'accepted sends per period, or "unlimited"')
    .addOption(new Option('--quota-period <period>', 'quota window').choices(['hour', 'day', 'month']));
}

export function projectCommands(): Command {
  const project = new Command('project').description('manage projects and their API keys');

  withProjectOptions(
    createsDatabase(project.command('create')).description('create a project; prints its API key once'),
  )
    .requiredOption('--name <name>', 'project name')
    .action(
      servicesAction(async ({ projects, defaultFrom }, out, options: ProjectOptions & { name: string }) => {
        const { project: created, apiKey } = await projects.create({
          ...projectInput(options),
          name: options.name,
        });
        out.print(
          { ...projectJson(created), api_key: apiKey },
          `Created project ${created.name} (id ${created.id}).\n\nAPI key (shown only now, store it on your server):\n  ${apiKey}\n`,
        );
        // Accepted sends of a project without a From would all fail later; say so now.
        if (senderFor({ project: created, smtp: null, defaultFrom }) === null) {
          const ref = /^[\w.@-]+$/.test(created.name) ? created.name : String(created.id);
          out.warn(
            `project ${created.name} has no from address, so its sends will fail until it has one: ` +
              `herald project update ${ref} --from-email ADDRESS (or --contact-email), a from address ` +
              "in its SMTP settings (herald smtp set … --from-email), or the server's HERALD_SMTP_FROM.",
          );
        }
      }),
    );

  withProjectOptions(
    project.command('update').description('change a project').argument('<project>', 'name or id'),
  )
    .option('--name <name>', 'new name')
    .action(
      servicesAction(async ({ projects }, out, ref: string, options: ProjectOptions) => {
        out.print(projectJson(await projects.update(ref, projectInput(options))));
      }),
    );

  project
    .command('rotate-key')
    .description('replace the API key; the old key stops working at once')
    .argument('<project>', 'name or id')
    .action(
      servicesAction(async ({ projects }, out, ref: string) => {
        const { project: rotated, apiKey } = await projects.rotateKey(ref);
        out.print(
          { id: rotated.id, name: rotated.name, key_prefix: rotated.keyPrefix, api_key: apiKey },
          `New API key for ${rotated.name} (shown only now; the old key no longer works):\n  ${apiKey}\n`,
        );
      }),
    );

  project
    .command('delete')
    .description(
      'delete a project and everything of it: key, templates, layouts, SMTP settings, webhooks, suppressions, ' +
        'notifications (API and audit log entries stay)',
    )
    .argument('<project>', 'name or id')
    .option('--force', 'also when mail of it is queued or being sent: that mail is never sent')
    .action(
      servicesAction(async ({ projects }, out, ref: string, options: { force?: boolean }) => {
        const deleted = await projects.delete(ref, { force: options.force === true });
        out.print(
          { deleted: true, id: deleted.id, name: deleted.name },
          `Deleted project ${deleted.name} and everything of it; its API key no longer works.`,
        );
      }),
    );

  project
    .command('list')
    .description('list projects')
    .action(
      servicesAction(async ({ projects }, out) => {
        const list = await projects.list();
        out.printList(
          'projects',
          list,
          projectJson,
          'No projects yet: herald project create --name NAME',
          (p) =>
            `${String(p.id).padStart(4)}  ${p.name.padEnd(24)} ${p.keyPrefix}…  quota ${p.quotaLimit ?? 'unlimited'}/${p.quotaPeriod}`,
        );
      }),
    );

  project
    .command('show')
    .description('show a project')
    .argument('<project>', 'name or id')
    .action(
      servicesAction(async ({ projects, notifications }, out, ref: string) => {
        const row = await projects.resolve(ref);
        const quota = await notifications.quota(row);
        out.print({
          ...projectJson(await projects.get(row.id)),
          quota_used: quota?.used ?? null,
          quota_reset: quota === null ? null : new Date(quota.reset * 1000).toISOString(),
        });
      }),
    );

  return project;
}
