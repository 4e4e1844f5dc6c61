import { Command } from 'commander';
import { adminTokenJson } from '../services/json-views.js';
import { createsDatabase, servicesAction } from './context.js';

/** `herald token …`: admin tokens of the management API (product.md §13). */
export function tokenCommands(): Command {
  const token = new Command('token').description('admin tokens of the management API (/api/v1/admin)');

  createsDatabase(token.command('create'))
    .description('create an admin token; it is printed once and never again')
    .requiredOption('--name <name>', 'what the token is for (ci, terraform, …): shown in the audit log')
    .action(
      servicesAction(async ({ adminTokens }, out, options: { name: string }) => {
        const { token: created, secret } = await adminTokens.create(options.name);
        out.print(
          { id: created.id, name: created.name, token: secret },
          `Created admin token ${created.name} (id ${created.id}).\n\n` +
            `Token (shown only now; it manages every project, keep it in your CI's secrets):\n  ${secret}\n`,
        );
      }),
    );

  token
    .command('list')
    .description('list admin tokens (their prefixes, never the tokens)')
    .action(
      servicesAction(async ({ adminTokens }, out) => {
        const list = await adminTokens.list();
        out.printList(
          'tokens',
          list,
          adminTokenJson,
          'No admin tokens yet: herald token create --name NAME',
          (t) => {
            const state =
              t.revokedAt !== null
                ? `revoked ${new Date(t.revokedAt).toISOString()}`
                : t.lastUsedAt === null
                  ? 'never used'
                  : `last used ${new Date(t.lastUsedAt).toISOString()}`;
            return `${String(t.id).padStart(4)}  ${t.name.padEnd(24)} ${t.prefix}…  ${state}`;
          },
        );
      }),
    );

  token
    .command('revoke')
    .description('revoke an admin token: every call made with it from now on is refused')
    .requiredOption('--id <id>', 'token id (from token list)')
    .action(
      servicesAction(async ({ adminTokens }, out, options: { id: string }) => {
        const { token: revoked, outcome } = await adminTokens.revoke(options.id);
        out.print(
          { revoked: true, id: revoked.id, name: revoked.name, outcome },
          outcome === 'revoked'
            ? `Revoked admin token ${revoked.name} (id ${revoked.id}).`
            : `Admin token ${revoked.name} (id ${revoked.id}) was already revoked (since ${new Date(revoked.revokedAt!).toISOString()}).`,
        );
      }),
    );

  return token;
}
