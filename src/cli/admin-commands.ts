import { Command } from 'commander';
import { errors } from '../domain/errors.js';
import { createsDatabase, servicesAction, withServices } from './context.js';
import { iso } from './output.js';
import { readSecret } from './read-secret.js';

export function adminCommands(): Command {
  const admin = new Command('admin').description('dashboard administrators');

  createsDatabase(admin.command('create'))
    .description('create a dashboard admin; the password is read from stdin, never from the command line')
    .requiredOption('--email <email>', 'login email')
    .option('--password-stdin', 'read the password from stdin (required)')
    .action(async (options: { email: string; passwordStdin?: boolean }, command: Command) => {
      if (!options.passwordStdin)
        throw errors.invalidInput('pass the password on stdin with --password-stdin');
      const password = await readSecret('Password');
      await withServices(command, async (services, out) => {
        const created = await services.admins.create(options.email, password);
        out.print(
          { id: created.id, email: created.email, created_at: iso(created.createdAt) },
          `Created admin ${created.email} (id ${created.id}). Log in to the dashboard at /login.`,
        );
      });
    });

  admin
    .command('list')
    .description('list dashboard admins')
    .action(
      servicesAction(async (services, out) => {
        const list = await services.admins.list();
        out.printList(
          'admins',
          list,
          (a) => ({ id: a.id, email: a.email, created_at: iso(a.createdAt) }),
          'No admins yet: open the setup link printed by `herald serve`, or run herald admin create.',
          (a) => `${String(a.id).padStart(4)}  ${a.email}`,
        );
      }),
    );

  admin
    .command('delete')
    .description('remove a dashboard admin and end its sessions (the last admin cannot be removed)')
    .requiredOption('--email <email>', 'login email')
    .action(
      servicesAction(async (services, out, options: { email: string }) => {
        const removed = await services.admins.remove(options.email);
        out.print(
          { id: removed.id, email: removed.email, deleted: true },
          `Removed admin ${removed.email}; its dashboard sessions have ended.`,
        );
      }),
    );

  return admin;
}
