import { Command } from 'commander';
import { suppressionView } from '../services/suppressions.js';
import { projectSubcommand, servicesAction } from './context.js';

export function suppressionCommands(): Command {
  const suppression = new Command('suppression').description(
    "a project's suppression list: addresses that are not mailed",
  );

  projectSubcommand(suppression, 'list', 'the suppressed addresses, newest first').action(
    servicesAction(async ({ suppressions }, out, options: { project: string }) => {
      const rows = await suppressions.list(options.project);
      out.printList(
        'suppressions',
        rows.map(suppressionView),
        (r) => r,
        'No suppressed addresses.',
        (r) => `${r.email}\t${r.reason}\t${r.created_at}\t${r.detail ?? ''}`,
      );
    }),
  );

  projectSubcommand(suppression, 'add', 'stop mailing an address (reason: manual)')
    .requiredOption('--email <email>', 'the address')
    .action(
      servicesAction(async ({ suppressions }, out, options: { project: string; email: string }) => {
        const { entry, created } = await suppressions.add(options.project, options.email);
        const row = suppressionView(entry);
        out.print(
          { ...row },
          created
            ? `${row.email} is suppressed (${row.reason}).`
            : `${row.email} was already suppressed (${row.reason}, since ${row.created_at}); its entry is kept.`,
        );
      }),
    );

  projectSubcommand(suppression, 'remove', 'mail an address again')
    .requiredOption('--email <email>', 'the address')
    .action(
      servicesAction(async ({ suppressions }, out, options: { project: string; email: string }) => {
        const email = await suppressions.remove(options.project, options.email);
        out.print({ removed: true, email }, `${email} removed.`);
      }),
    );

  return suppression;
}
