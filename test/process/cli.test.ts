import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { loadConfig } from '../../src/config.js';
import { closeServices, openServices, type Services } from '../../src/compose.js';
import { buildApp } from '../../src/http/app.js';
import { createLogger } from '../../src/logger.js';
import { freshDatabase, type TestDatabase } from '../helpers/database.js';
import { HERALD_CLI, runHerald } from '../helpers/processes.js';
import { testEnv } from '../helpers/services.js';

/**
 * The `herald` commands of product.md §2, run as real processes on the database a server is
 * using at the same time: every change is visible to the server at once.
 */

const exec = promisify(execFile);
let database: TestDatabase;
let env: Record<string, string>;
let services: Services;
let app: FastifyInstance;

async function herald(...args: string[]): Promise<Record<string, unknown>> {
  const { stdout } = await exec(process.execPath, [...HERALD_CLI, ...args, '--json'], {
    env: { ...process.env, ...env },
  });
  const lines = stdout.trim().split('\n');
  expect(lines).toHaveLength(1);
  return JSON.parse(lines[0]!) as Record<string, unknown>;
}

async function heraldFails(...args: string[]): Promise<{ code: number; stderr: string; stdout: string }> {
  try {
    await exec(process.execPath, [...HERALD_CLI, ...args], {
      env: { ...process.env, ...env },
    });
  } catch (error) {
    const e = error as { code: number; stderr: string; stdout: string };
    return { code: e.code, stderr: e.stderr, stdout: e.stdout };
  }
  throw new Error(`herald ${args.join(' ')} succeeded`);
}

function send(key: string) {
  return app.inject({
    method: 'POST',
    url: '/api/v1/notifications',
    headers: { authorization: `Bearer ${key}` },
    payload: { template: 'user_created', data: { user_name: 'Jane' } },
  });
}

beforeAll(async () => {
  database = await freshDatabase();
  env = testEnv(database);
  services = await openServices(loadConfig(env), createLogger('silent'));
  app = await buildApp(services);
});

afterAll(async () => {
  await app.close();
  await closeServices(services);
  await database.drop();
});

describe('herald CLI', () => {
  let apiKey: string;

  it('prints its version', async () => {
    const { stdout } = await exec(process.execPath, [...HERALD_CLI, '--version'], {
      env: { ...process.env, ...env },
    });
    const { version } = JSON.parse(readFileSync('package.json', 'utf8')) as { version: string };
    expect(stdout.trim()).toBe(version);
    const asJson = await exec(process.execPath, [...HERALD_CLI, '--version', '--json'], {
      env: { ...process.env, ...env },
    });
    expect(JSON.parse(asJson.stdout)).toEqual({ version });
  });

  it('creates a project and shows its key only at creation', async () => {
    const project = await herald(
      'project',
      'create',
      '--name',
      'shop',
      '--contact-email',
      'ops@shop.example',
      '--from-email',
      'no-reply@shop.example',
      '--from-name',
      'Shop',
      '--quota',
      '100',
      '--quota-period',
      'day',
    );
    expect(project).toMatchObject({
      name: 'shop',
      contact_email: 'ops@shop.example',
      quota: 100,
      quota_period: 'day',
    });
    apiKey = String(project.api_key);
    expect(apiKey).toMatch(/^hrl_[0-9A-Za-z]{38}$/);
    expect(project.key_prefix).toBe(apiKey.slice(0, 12));

    const shown = await herald('project', 'show', 'shop');
    const listed = await herald('project', 'list');
    for (const output of [shown, listed]) expect(JSON.stringify(output)).not.toContain(apiKey);
    expect(shown).toMatchObject({ id: project.id, quota_used: 0 });
    expect((listed.projects as unknown[]).length).toBe(1);
  });

  it('manages templates that the running server uses at once', async () => {
    const created = await herald(
      'template',
      'create',
      '--project',
      'shop',
      '--name',
      'user_created',
      '--subject',
      'Welcome {{user_name}}',
      '--text',
      'Hello {{ user_name }}, role {{role}}',
      '--html',
      '<p>{{user_name}}</p>',
    );
    expect(created).toMatchObject({ name: 'user_created', placeholders: ['user_name', 'role'] });
    const updated = await herald(
      'template',
      'update',
      '--project',
      '1',
      '--name',
      'user_created',
      '--subject',
      'Hi',
    );
    expect(updated).toMatchObject({ subject: 'Hi', text: 'Hello {{ user_name }}, role {{role}}' });
    // Nothing to change is refused; the same content again makes no version and says so.
    const nothing = await heraldFails('template', 'update', '--project', 'shop', '--name', 'user_created');
    expect(nothing.code).toBe(1);
    expect(nothing.stderr).toContain(
      'Nothing to change: give --subject, --text (--text-file), --html (--html-file) or --layout',
    );
    const same = await exec(
      process.execPath,
      [...HERALD_CLI, 'template', 'update', '--project', 'shop', '--name', 'user_created', '--subject', 'Hi'],
      { env: { ...process.env, ...env } },
    );
    expect(same.stdout).toContain(
      `Template user_created already is that: still version ${String(updated.version)}.`,
    );
    const list = await herald('template', 'list', '--project', 'shop');
    expect((list.templates as { name: string }[]).map((t) => t.name)).toEqual(['user_created']);

    const response = await send(apiKey);
    expect(response.statusCode).toBe(202);
    const requestId = response.json<{ request_id: string }>().request_id;
    const shown = await herald('notification', 'show', requestId);
    expect(shown).toMatchObject({
      request_id: requestId,
      status: 'queued',
      to: 'ops@shop.example',
      attempts_log: [],
    });
    expect(await herald('stats')).toMatchObject({ queued: 1, sent: 0 });

    const canceled = await herald('notification', 'cancel', requestId);
    expect(canceled).toMatchObject({ request_id: requestId, status: 'failed', error_message: 'Canceled' });
    const again = await heraldFails('notification', 'cancel', requestId);
    expect(again.code).toBe(1);
    expect(again.stderr).toBe('herald: Notification can no longer be canceled\n');
    const api = await app.inject({
      url: `/api/v1/notifications/${requestId}`,
      headers: { authorization: `Bearer ${apiKey}` },
    });
    expect(api.json()).toMatchObject({ status: 'failed', error_message: 'Canceled' });
  });

  it("reads template and layout bodies from files and stdin, past the command line's limit", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'herald-bodies-'));
    try {
      // 200 KiB of text: more than one argument may be on Linux (128 KiB).
      const text = `Hello {{user_name}}\n${'x'.repeat(200 * 1024)}`;
      writeFileSync(path.join(dir, 'body.txt'), text);
      const created = await runHerald(
        [
          'template',
          'create',
          '--project',
          'shop',
          '--name',
          'long_body',
          '--subject',
          'Long',
          '--text-file',
          path.join(dir, 'body.txt'),
          '--html-file',
          '-',
          '--json',
        ],
        env,
        60_000,
        '<p>{{user_name}}</p>',
      );
      expect(created.code, created.stderr).toBe(0);
      const stored = await services.templates.get('shop', 'long_body');
      expect(stored.text).toBe(text);
      expect(stored.html).toBe('<p>{{user_name}}</p>');

      // An editor's byte order mark is not part of the body.
      writeFileSync(path.join(dir, 'frame.html'), '\uFEFF<main>{{{content}}}</main>');
      const layout = await runHerald(
        [
          'layout',
          'create',
          '--project',
          'shop',
          '--name',
          'framed',
          '--html-file',
          path.join(dir, 'frame.html'),
        ],
        env,
      );
      expect(layout.code, layout.stderr).toBe(0);
      expect((await services.layouts.get('shop', 'framed')).html).toBe('<main>{{{content}}}</main>');

      // One way to give a body at a time; a file that is not there, or too large, is one line.
      const update = (...args: string[]) =>
        runHerald(['template', 'update', '--project', 'shop', '--name', 'long_body', ...args], env);
      const both = await update('--text', 'x', '--text-file', path.join(dir, 'body.txt'));
      expect(both.code).toBe(2);
      expect(both.stderr).toContain("option '--text-file <path>' cannot be used with option '--text <body>'");
      const missing = await update('--text-file', path.join(dir, 'nope.txt'));
      expect(missing.code).toBe(1);
      expect(missing.stderr.trim()).toBe(
        `herald: --text-file: cannot read ${path.join(dir, 'nope.txt')} (ENOENT)`,
      );
      writeFileSync(path.join(dir, 'huge.txt'), 'x'.repeat(2 * 1024 * 1024 + 1));
      const huge = await update('--text-file', path.join(dir, 'huge.txt'));
      expect(huge.code).toBe(1);
      expect(huge.stderr.trim()).toBe(
        `herald: --text-file: ${path.join(dir, 'huge.txt')} is larger than 2 MiB`,
      );
      const none = await runHerald(
        ['template', 'create', '--project', 'shop', '--name', 'no_text', '--subject', 'S'],
        env,
      );
      expect(none.code).toBe(1);
      expect(none.stderr).toContain('A template needs a text body: give --text or --text-file');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('creates a layout and changes only the frames an update gives, saying which it did', async () => {
    const project = ['--project', 'shop'];
    const created = await runHerald(
      ['layout', 'create', ...project, '--name', 'plain', '--text', '{{content}}\n-- Shop'],
      env,
    );
    expect(created.code, created.stderr).toBe(0);
    expect(created.stdout).toBe('Created layout plain.\n');
    const updated = await herald(
      'layout',
      'update',
      ...project,
      '--name',
      'plain',
      '--html',
      '<div>{{{content}}}</div>',
    );
    expect(updated).toMatchObject({
      name: 'plain',
      html: '<div>{{{content}}}</div>',
      text: '{{content}}\n-- Shop',
    });
    const cleared = await runHerald(['layout', 'update', ...project, '--name', 'plain', '--html', ''], env);
    expect(cleared.code, cleared.stderr).toBe(0);
    expect(cleared.stdout).toBe('Updated layout plain.\n');
    expect(await services.layouts.get('shop', 'plain')).toMatchObject({
      html: null,
      text: '{{content}}\n-- Shop',
    });
    const missing = await heraldFails(
      'layout',
      'update',
      ...project,
      '--name',
      'nope',
      '--text',
      '{{content}}',
    );
    expect(missing.code).toBe(1);
    expect(missing.stderr.trim()).toBe('herald: Layout not found: nope');
    await services.layouts.delete('shop', 'plain');
  });

  it('manages layouts, locale variants and versions, and rolls back', async () => {
    const project = ['--project', 'shop'];
    const frame = await herald(
      'layout',
      'create',
      ...project,
      '--name',
      'frame',
      '--html',
      '<main>{{{content}}}</main>',
      '--text',
      '{{content}}\n-- Shop',
    );
    expect(frame).toMatchObject({ name: 'frame' });
    const v1 = await herald(
      'template',
      'create',
      ...project,
      '--name',
      'order',
      '--layout',
      'frame',
      '--subject',
      'Order {{id}}',
      '--text',
      '{{#each lines}}- {{this}}\n{{/each}}',
    );
    expect(v1).toMatchObject({ name: 'order', version: 1, layout: 'frame' });
    const v2 = await herald(
      'template',
      'create',
      ...project,
      '--name',
      'order',
      '--locale',
      'fr',
      '--subject',
      'Commande {{id}}',
      '--text',
      '{{#each lines}}- {{this}}\n{{/each}}',
    );
    expect(v2).toMatchObject({ version: 2, locales: { fr: { subject: 'Commande {{id}}' } } });
    // A variant of a template that does not exist says which, and what to do.
    const orphan = await heraldFails(
      'template',
      'create',
      ...project,
      '--name',
      'invoice',
      '--locale',
      'fr',
      '--subject',
      'Facture',
      '--text',
      'x',
    );
    expect(orphan.code).toBe(1);
    expect(orphan.stderr).toContain(
      'herald: Template invoice not found: create it without --locale first, then add its fr variant',
    );
    const versions = await herald('template', 'versions', ...project, '--name', 'order');
    expect((versions.versions as { version: number }[]).map((v) => v.version)).toEqual([2, 1]);
    // --version here is the command's own option, not a request for Herald's version.
    const v3 = await herald('template', 'rollback', ...project, '--name', 'order', '--version', '1');
    expect(v3).toMatchObject({ version: 3, locales: {}, outcome: 'updated' });
    // Version 1's content is the current content now: no version is made.
    expect(
      await herald('template', 'rollback', ...project, '--name', 'order', '--version', '1'),
    ).toMatchObject({
      version: 3,
      outcome: 'unchanged',
    });
    const notNumber = await heraldFails(
      'template',
      'rollback',
      ...project,
      '--name',
      'order',
      '--version',
      'v2',
    );
    expect(notNumber.code).toBe(2);
    expect(notNumber.stderr).toContain(
      'A version is a whole number of up to 9 digits, as template versions lists them.',
    );
    // A layout in use cannot go; a template that does not parse is refused with its place.
    const inUse = await heraldFails('layout', 'delete', ...project, '--name', 'frame');
    expect(inUse.code).toBe(1);
    expect(inUse.stderr).toMatch(/1 template/);
    const broken = await heraldFails(
      'template',
      'update',
      ...project,
      '--name',
      'order',
      '--text',
      'Hi {{#if x}} no end',
    );
    expect(broken.code).toBe(1);
    expect(broken.stderr).toMatch(/^herald: Invalid template: .*line 1, column \d+/m);
  });

  it('stores SMTP settings without ever printing the password', async () => {
    const set = await herald(
      'smtp',
      'set',
      '--project',
      'shop',
      '--url',
      'smtp://mailer:hunter2-secret@relay.example:2525',
    );
    expect(set).toMatchObject({ host: 'relay.example', port: 2525, username: 'mailer', has_password: true });
    const shown = await herald('smtp', 'show', '--project', 'shop');
    for (const output of [set, shown]) expect(JSON.stringify(output)).not.toContain('hunter2');
    const stored = await services.storage.db
      .selectFrom('smtp_settings')
      .selectAll()
      .executeTakeFirstOrThrow();
    expect(stored.password_enc).toMatch(/^v1:/);
    expect(JSON.stringify(stored)).not.toContain('hunter2');
    expect((await services.smtpSettings.forDelivery(stored.project_id))?.target.password).toBe(
      'hunter2-secret',
    );
    expect(await herald('smtp', 'clear', '--project', 'shop')).toEqual({ cleared: true });
  });

  it('reads the SMTP password from stdin, keeping it off the command line', async () => {
    const url = 'smtp://mailer@relay.example:2525';
    const set = await runHerald(
      ['smtp', 'set', '--project', 'shop', '--url', url, '--password-stdin', '--json'],
      env,
      60_000,
      'hunter3 from stdin\n',
    );
    expect(set.stderr).toBe('');
    expect(JSON.parse(set.stdout)).toMatchObject({ username: 'mailer', has_password: true });
    expect(set.stdout).not.toContain('hunter3');
    const { project_id: projectId } = await services.storage.db
      .selectFrom('smtp_settings')
      .select('project_id')
      .executeTakeFirstOrThrow();
    // The line end that ends the input is not part of the password.
    expect((await services.smtpSettings.forDelivery(projectId))?.target.password).toBe('hunter3 from stdin');

    // Refused, the stored password kept: a password in the URL too, a URL without a user, and
    // nothing on stdin (an unset variable piped in).
    for (const [refusedUrl, input, error] of [
      [
        'smtp://mailer:inline@relay.example:2525',
        'hunter4\n',
        'Give the SMTP password in the URL or apart from it, not both',
      ],
      ['smtp://relay.example:2525', 'hunter5\n', 'A password needs a user in the SMTP URL'],
      [url, '\n', 'No password on stdin'],
    ] as const) {
      const refused = await runHerald(
        ['smtp', 'set', '--project', 'shop', '--url', refusedUrl, '--password-stdin'],
        env,
        60_000,
        input,
      );
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain(error);
    }
    expect((await services.smtpSettings.forDelivery(projectId))?.target.password).toBe('hunter3 from stdin');
    expect(await herald('smtp', 'clear', '--project', 'shop')).toEqual({ cleared: true });
  });

  it(
    'sets a fallback relay, shows it without its password and whether each relay is up',
    { timeout: 120_000 },
    async () => {
      const set = await herald(
        'smtp',
        'set',
        '--project',
        'shop',
        '--url',
        'smtp://relay.example:2525',
        '--fallback-url',
        'smtps://backup:s3cond-secret@backup.example',
      );
      expect(set).toMatchObject({
        host: 'relay.example',
        fallback: {
          host: 'backup.example',
          port: 465,
          security: 'tls',
          username: 'backup',
          has_password: true,
        },
      });
      // Left out, the fallback stays.
      await herald('smtp', 'set', '--project', 'shop', '--url', 'smtp://relay.example:2526');
      const shown = await herald('smtp', 'show', '--project', 'shop');
      expect(shown).toMatchObject({
        port: 2526,
        fallback: { host: 'backup.example', has_password: true },
        relays: [
          { role: 'primary', relay: 'relay.example:2526', source: 'project', up: true },
          { role: 'fallback', relay: 'backup.example:465', source: 'project', up: true },
        ],
      });
      for (const output of [set, shown]) expect(JSON.stringify(output)).not.toContain('s3cond');
      // For a person: a line a relay, words for each part, no JSON, no password.
      const text = await runHerald(['smtp', 'show', '--project', 'shop'], env);
      expect(text.code, text.stderr).toBe(0);
      expect(text.stdout.split('\n')).toEqual([
        'Relay:     smtp://relay.example:2526 (security=auto)',
        'Fallback:  smtps://backup@backup.example:465 (security=tls), password stored',
        "From:      none (the project's from address is used)",
        expect.stringMatching(/^Updated: {3}\d{4}-\d\d-\d\dT[\d:.]+Z$/) as unknown,
        'Its mail goes to:',
        '  primary   relay.example:2526 (its own): up',
        '  fallback  backup.example:465 (its own): up',
        '',
      ]);
      const project = await services.projects.resolve('shop');
      expect((await services.smtpSettings.forDelivery(project.id))?.fallback).toMatchObject({
        host: 'backup.example',
        password: 's3cond-secret',
      });
      const cleared = await herald(
        'smtp',
        'set',
        '--project',
        'shop',
        '--url',
        'smtp://relay.example',
        '--fallback-url',
        '',
      );
      expect(cleared).toMatchObject({ fallback: null });
      const same = await heraldFails(
        'smtp',
        'set',
        '--project',
        'shop',
        '--url',
        'smtp://a.example:25',
        '--fallback-url',
        'smtp://A.example:25',
      );
      expect(same.code).not.toBe(0);
      expect(same.stderr).toContain('fallback relay must be another host or port');
      expect(await herald('smtp', 'clear', '--project', 'shop')).toEqual({ cleared: true });
    },
  );

  it('rotates the key: the old one is refused by the running server at once', async () => {
    expect((await send(apiKey)).statusCode).toBe(202);
    const rotated = await herald('project', 'rotate-key', 'shop');
    const newKey = String(rotated.api_key);
    expect(newKey).not.toBe(apiKey);
    expect((await send(apiKey)).statusCode).toBe(401);
    expect((await send(newKey)).statusCode).toBe(202);
  });

  it('updates a project and deletes a template', async () => {
    expect(await herald('project', 'update', 'shop', '--quota', 'unlimited')).toMatchObject({
      quota: 'unlimited',
    });
    expect(await herald('template', 'delete', '--project', 'shop', '--name', 'user_created')).toMatchObject({
      deleted: true,
    });
  });

  it(
    'deletes a project: refused while its mail waits, unless forced; its key refused at once',
    { timeout: 60_000 },
    async () => {
      const created = await herald('project', 'create', '--name', 'scratch');
      const key = String(created.api_key);
      await herald(
        'template',
        'create',
        '--project',
        'scratch',
        '--name',
        'hi',
        '--subject',
        'Hi',
        '--text',
        'Hello',
      );
      const queued = await app.inject({
        method: 'POST',
        url: '/api/v1/notifications',
        headers: { authorization: `Bearer ${key}` },
        payload: { template: 'hi', to: 'jane@example.org' },
      });
      expect(queued.statusCode).toBe(202);
      const waiting = await heraldFails('project', 'delete', 'scratch');
      expect(waiting.code).toBe(1);
      expect(waiting.stderr).toContain(
        'Project scratch has 1 notification queued or being sent; wait until they are sent, or delete with force to discard them',
      );
      expect(await herald('project', 'delete', 'scratch', '--force')).toEqual({
        deleted: true,
        id: created.id,
        name: 'scratch',
      });
      expect((await send(key)).statusCode).toBe(401);
      expect((await heraldFails('project', 'show', 'scratch')).stderr).toContain(
        'Project not found: scratch',
      );
    },
  );

  // Thirteen processes of the CLI, one after another: more than the default timeout on a busy machine.
  it('reports errors on stderr with a non-zero exit', { timeout: 120_000 }, async () => {
    const missing = await heraldFails('project', 'show', 'nope', '--json');
    expect(missing.code).toBe(1);
    expect(missing.stdout).toBe('');
    expect(JSON.parse(missing.stderr)).toEqual({ error: 'Project not found: nope' });
    const duplicate = await heraldFails('project', 'create', '--name', 'shop');
    expect(duplicate.stderr).toContain('already exists');
    const badQuota = await heraldFails('project', 'create', '--name', 'x', '--quota', 'lots');
    expect(badQuota.code).toBe(1);
    const usage = await heraldFails('project', 'create');
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain("error: required option '--name <name>' not specified");
    expect(usage.stderr).toContain('Usage: herald project create');
    // A misspelled option is named, with the nearest, rather than reported as the option missing.
    const typo = await heraldFails('project', 'create', '--nmae', 'x');
    expect(typo.code).toBe(2);
    expect(typo.stderr).toMatch(/^error: unknown option '--nmae'\n\(Did you mean --name\?\)\n/);
    expect(typo.stderr).not.toContain('required option');
    // Under --json a usage error is one JSON object too, without the help.
    for (const [args, error] of [
      [['project', 'create', '--json'], "required option '--name <name>' not specified"],
      [['project', 'create', '--nmae=x', '--json'], "unknown option '--nmae'\n(Did you mean --name?)"],
      [['project', 'create', '--name', 'x', '--quota-period', 'week', '--json'], "option '--quota-period"],
      [['project', 'nope', '--json'], "unknown command 'nope'"],
      [['template', '--json'], 'herald template needs a command: see herald template --help'],
    ] as const) {
      const failed = await heraldFails(...args);
      expect(failed.code).toBe(2);
      expect(failed.stdout).toBe('');
      const lines = failed.stderr.trim().split('\n');
      expect(lines).toHaveLength(1);
      expect((JSON.parse(lines[0]!) as { error: string }).error).toContain(error);
    }
    // Help asked for is no error.
    const help = await runHerald(['help', 'template', '--json'], env);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('Usage: herald template');
    expect(help.stderr).toBe('');
  });

  it('shows what rendered blank, and the closest name for a template that does not exist', async () => {
    const { project, apiKey: key } = await services.projects.create({
      name: 'diagnosis',
      fromEmail: 'noreply@herald.example',
    });
    await services.templates.create(project.id, {
      name: 'user_created',
      subject: 'Welcome {{user_name}}',
      text: 'Your role: {{role}}',
    });
    const post = (template: string) =>
      app.inject({
        method: 'POST',
        url: '/api/v1/notifications',
        headers: { authorization: `Bearer ${key}` },
        payload: { template, to: 'jane@example.org', data: { user_name: 'Jane', role: null } },
      });
    const wrong = (await post('User_Created')).json<{ request_id: string }>().request_id;
    const right = (await post('user_created')).json<{ request_id: string }>().request_id;

    const missing = await herald('notification', 'show', wrong);
    expect(missing.template_missing).toEqual({ templates: ['user_created'], did_you_mean: 'user_created' });
    const found = await herald('notification', 'show', right);
    expect(found.blank_placeholders).toEqual(['role']);
    expect(found).not.toHaveProperty('template_missing');
  });

  it('warns at creation of a project whose sends would have no from address', async () => {
    const run = (...args: string[]) =>
      exec(process.execPath, [...HERALD_CLI, 'project', 'create', ...args], {
        env: { ...process.env, ...env },
      });
    const bare = await run('--name', 'no-sender');
    expect(bare.stdout).toContain('Created project no-sender');
    expect(bare.stderr).toContain('herald: project no-sender has no from address');
    expect(bare.stderr).toContain('herald project update no-sender --from-email ADDRESS');
    // Any source of a From will do: the contact email is one.
    const quiet = await run('--name', 'no-sender-json', '--json');
    expect(JSON.parse(quiet.stderr)).toEqual({
      warning: expect.stringContaining('project no-sender-json has no from address'),
    });
    const contact = await run('--name', 'contact-sender', '--contact-email', 'ops@contact.example', '--json');
    expect(contact.stderr).toBe('');
    const withFrom = await run('--name', 'from-sender', '--from-email', 'noreply@from.example');
    expect(withFrom.stderr).toBe('');
  });

  it('migrates idempotently', async () => {
    // The database was made by an earlier command: nothing is left to apply.
    expect(await herald('migrate')).toEqual({ migrated: true, database: expect.any(String), applied: [] });
  });
});
