import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { closeServices, openServices, type Services } from '../../src/compose.js';
import { buildApp } from '../../src/http/app.js';
import { createLogger } from '../../src/logger.js';
import { clientWith, ok } from '../helpers/admin.js';
import { freshDatabase, type TestDatabase } from '../helpers/database.js';
import { expectError } from '../helpers/http.js';
import { heraldJson, runHerald } from '../helpers/processes.js';
import { seedProject, testEnv } from '../helpers/services.js';

/**
 * `herald token create|list|revoke` (product.md §13) as real processes, on the database a server
 * in this process uses at the same time; and the management API refusing an input in the words
 * the CLI uses for it.
 */

let database: TestDatabase;
let env: Record<string, string>;
let services: Services;
let app: FastifyInstance;
let project: string;

beforeAll(async () => {
  database = await freshDatabase();
  env = testEnv(database);
  services = await openServices(loadConfig(env), createLogger('silent'));
  app = await buildApp(services);
  project = (await seedProject(services, { name: 'shop' })).name;
});

afterAll(async () => {
  await app?.close();
  await closeServices(services);
  await database.drop();
});

/** A command that must fail: non-zero exit, nothing on stdout; returns its `--json` error. */
async function cliError(args: readonly string[]): Promise<string> {
  const result = await runHerald([...args, '--json'], env);
  expect(result.code, `herald ${args.join(' ')}: ${result.stdout}${result.stderr}`).not.toBe(0);
  expect(result.stdout).toBe('');
  return (JSON.parse(result.stderr.trim().split('\n')[0]!) as { error: string }).error;
}

interface TokenJson {
  id: number;
  name: string;
  prefix: string;
  created_at: string;
  last_used_at: string | null;
  revoked_at: string | null;
}

describe('herald token', { timeout: 120_000 }, () => {
  it('creates a token shown once, lists it by prefix, and revokes it for the running server at once', async () => {
    const created = await heraldJson<{ id: number; name: string; token: string }>(
      ['token', 'create', '--name', 'ci'],
      env,
    );
    expect(Object.keys(created).sort()).toEqual(['id', 'name', 'token']);
    expect(created).toMatchObject({ name: 'ci' });
    expect(created.token).toMatch(/^hrla_[0-9A-Za-z]{38}$/);
    const admin = clientWith(app, created.token);
    expect(ok<{ projects: unknown[] }>(await admin.get('/projects')).projects).toHaveLength(1);

    const { tokens } = await heraldJson<{ tokens: TokenJson[] }>(['token', 'list'], env);
    expect(tokens).toEqual([
      expect.objectContaining({
        id: created.id,
        name: 'ci',
        prefix: created.token.slice(0, 13),
        revoked_at: null,
      }),
    ]);
    expect(tokens[0]!.last_used_at).not.toBeNull();
    expect(JSON.stringify(tokens)).not.toContain(created.token.slice(13));

    expect(await cliError(['token', 'create', '--name', 'ci'])).toBe(
      'An admin token named "ci" already exists',
    );

    const revoked = await heraldJson(['token', 'revoke', '--id', String(created.id)], env);
    expect(revoked).toEqual({ revoked: true, id: created.id, name: 'ci', outcome: 'revoked' });
    expectError(await admin.get('/projects'), 401, 'Invalid or missing admin token');
    // Again: nothing to do, and said so, without failing a script that repeats it.
    const again = await runHerald(['token', 'revoke', '--id', String(created.id)], env);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toMatch(
      new RegExp(
        `^Admin token ci \\(id ${created.id}\\) was already revoked \\(since \\d{4}-\\d\\d-\\d\\dT[\\d:.]+Z\\)\\.\\n$`,
      ),
    );
    expect(await heraldJson(['token', 'revoke', '--id', String(created.id)], env)).toEqual({
      revoked: true,
      id: created.id,
      name: 'ci',
      outcome: 'unchanged',
    });
    expect(await cliError(['token', 'revoke', '--id', '987654'])).toBe('Admin token not found: 987654');
    expect(await cliError(['token', 'revoke', '--id', 'abc'])).toBe(
      'An admin token\'s id is a whole number (as token lists show it), got "abc"',
    );
  });

  it('prints a token once in text too, and says how to make one when there is none', async () => {
    const text = await runHerald(['token', 'create', '--name', 'terraform prod'], env);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(
      /Created admin token terraform prod \(id \d+\)[\s\S]*\n {2}hrla_[0-9A-Za-z]{38}\n/,
    );
    const listed = await runHerald(['token', 'list'], env);
    expect(listed.stdout).toMatch(/terraform prod\s+hrla_[0-9A-Za-z]{8}…\s+never used/);
  });
});

describe(
  'the management API and the CLI refuse the same input in the same words',
  { timeout: 120_000 },
  () => {
    let admin: ReturnType<typeof clientWith>;
    beforeAll(async () => {
      admin = clientWith(app, (await services.adminTokens.create('words')).secret);
    });

    it('for a project name', async () => {
      const error = await cliError(['project', 'create', '--name', 'no/slash']);
      expectError(await admin.post('/projects', { name: 'no/slash' }), 400, error);
      const taken = await cliError(['project', 'create', '--name', project]);
      expectError(await admin.post('/projects', { name: project }), 409, taken);
      const missing = await cliError(['project', 'show', 'nowhere']);
      expectError(await admin.get('/projects/nowhere'), 404, missing);
    });

    it('for a template that does not parse, and one that is not there', async () => {
      const args = [
        'template',
        'create',
        '--project',
        project,
        '--name',
        'broken',
        '--subject',
        'Hi {{#if x}}',
        '--text',
        'x',
      ];
      const error = await cliError(args);
      expect(error).toMatch(/^Invalid template: subject, line 1, column \d+: /);
      expectError(
        await admin.put(`/projects/${project}/templates/broken`, { subject: 'Hi {{#if x}}', text: 'x' }),
        400,
        error,
      );
      const missing = await cliError(['template', 'delete', '--project', project, '--name', 'nothing']);
      expectError(await admin.delete(`/projects/${project}/templates/nothing`), 404, missing);
    });

    it('for an address that is not on the suppression list, and a relay URL', async () => {
      const error = await cliError([
        'suppression',
        'remove',
        '--project',
        project,
        '--email',
        'nobody@example.org',
      ]);
      expectError(await admin.delete(`/projects/${project}/suppressions/nobody@example.org`), 404, error);
      const url = await cliError(['smtp', 'set', '--project', project, '--url', 'http://mail.example']);
      expectError(await admin.put(`/projects/${project}/smtp`, { url: 'http://mail.example' }), 400, url);
    });
  },
);
