import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { closeServices, openServices, type Services } from '../../src/compose.js';
import { NOTIFICATION_EVENTS } from '../../src/domain/events.js';
import { createLogger } from '../../src/logger.js';
import { suppressionView } from '../../src/services/suppressions.js';
import { freshDatabase, type TestDatabase } from '../helpers/database.js';
import { heraldJson, runHerald } from '../helpers/processes.js';
import { seedProject, testEnv } from '../helpers/services.js';

/**
 * `herald webhook create|list|delete` and `herald suppression add|list|remove` (product.md §5) as
 * real processes, on the database that services in this process use at the same time.
 */

let database: TestDatabase;
let env: Record<string, string>;
let services: Services;
let shop: { projectId: number; name: string };

interface EndpointJson {
  id: number;
  project_id: number;
  url: string;
  events: string[];
  enabled: boolean;
  created_at: string;
  secret?: string;
}

beforeAll(async () => {
  database = await freshDatabase();
  env = testEnv(database);
  services = await openServices(loadConfig(env), createLogger('silent'));
  shop = await seedProject(services, { name: 'shop' });
  await seedProject(services, { name: 'other' });
});

afterAll(async () => {
  await closeServices(services);
  await database.drop();
});

/** Runs a command that must fail: non-zero exit, nothing on stdout, the message on stderr. */
async function fails(args: readonly string[], message: string | RegExp): Promise<string> {
  const result = await runHerald(args, env);
  expect(result.code, `herald ${args.join(' ')}: ${result.stdout}${result.stderr}`).not.toBe(0);
  expect(result.stdout).toBe('');
  if (typeof message === 'string') expect(result.stderr).toContain(message);
  else expect(result.stderr).toMatch(message);
  // A domain error is one line, not a stack trace.
  expect(result.stderr).not.toMatch(/\n\s+at /);
  return result.stderr;
}

// Each test runs several processes, each a cold start of Node with tsx.
describe('herald webhook', { timeout: 90_000 }, () => {
  let created: EndpointJson;

  it('creates an endpoint and prints its secret once', async () => {
    created = await heraldJson<EndpointJson>(
      [
        'webhook',
        'create',
        '--project',
        'shop',
        '--url',
        'https://hooks.example.com/herald',
        '--events',
        'notification.failed,notification.bounced',
      ],
      env,
    );
    expect(created).toMatchObject({
      id: expect.any(Number) as unknown,
      url: 'https://hooks.example.com/herald',
      events: ['notification.failed', 'notification.bounced'],
    });
    expect(created.secret).toMatch(/^whsec_[A-Za-z0-9+/]+={0,2}$/);
    const key = Buffer.from(created.secret!.slice('whsec_'.length), 'base64');
    expect(key.length).toBeGreaterThanOrEqual(24);
    expect(key.length).toBeLessThanOrEqual(64);

    // The server sees the endpoint at once, and signs with the secret that was printed.
    const row = await services.storage.db
      .selectFrom('webhook_endpoints')
      .selectAll()
      .where('id', '=', created.id)
      .executeTakeFirstOrThrow();
    expect(row.project_id).toBe(shop.projectId);
    expect(row.secret_enc).not.toContain(created.secret!.slice('whsec_'.length));
    expect(services.openWebhookSecret(row.secret_enc)).toBe(created.secret);
  });

  it('creates an endpoint for every event without --events', async () => {
    const all = await heraldJson<EndpointJson>(
      ['webhook', 'create', '--project', String(shop.projectId), '--url', 'http://127.0.0.1:8080/'],
      env,
    );
    expect(all.events).toEqual([...NOTIFICATION_EVENTS]);
    expect(all.secret).toMatch(/^whsec_/);
    expect(all.secret).not.toBe(created.secret);
    expect((await services.webhooks.get(shop.projectId, all.id)).events).toBeNull();
  });

  it('lists the endpoints without their secrets', async () => {
    const list = await runHerald(['webhook', 'list', '--project', 'shop', '--json'], env);
    expect(list.code, list.stderr).toBe(0);
    const { webhooks } = JSON.parse(list.stdout) as { webhooks: EndpointJson[] };
    expect(webhooks.map((w) => w.id)).toContain(created.id);
    expect(webhooks.find((w) => w.id === created.id)).toMatchObject({
      url: 'https://hooks.example.com/herald',
      events: ['notification.failed', 'notification.bounced'],
      enabled: true,
    });
    for (const webhook of webhooks) expect(webhook).not.toHaveProperty('secret');
    expect(list.stdout).not.toContain('whsec_');
    expect(list.stdout).not.toContain(created.secret!.slice('whsec_'.length));

    const text = await runHerald(['webhook', 'list', '--project', 'shop'], env);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toContain('https://hooks.example.com/herald');
    expect(text.stdout).not.toContain('whsec_');

    const empty = await heraldJson<{ webhooks: unknown[] }>(['webhook', 'list', '--project', 'other'], env);
    expect(empty.webhooks).toEqual([]);
  });

  it('refuses an unknown event, a bad URL and an unknown project with a clear message', async () => {
    const before = (await services.webhooks.list(shop.projectId)).length;
    const url = ['--url', 'https://hooks.example.com/x'];
    await fails(
      ['webhook', 'create', '--project', 'shop', ...url, '--events', 'notification.sent,notification.opened'],
      'Unknown event "notification.opened"; events are notification.sent, notification.deferred',
    );
    await fails(
      ['webhook', 'create', '--project', 'shop', ...url, '--events', ','],
      'No events named; events are notification.sent',
    );
    await fails(
      ['webhook', 'create', '--project', 'shop', '--url', 'ftp://hooks.example.com/x'],
      'Webhook URL must start with http:// or https://',
    );
    await fails(
      ['webhook', 'create', '--project', 'shop', '--url', 'https://user:pass@hooks.example.com/x'],
      'Webhook URL must not contain a user name or password',
    );
    await fails(['webhook', 'create', '--project', 'shop', '--url', 'not a url'], /Webhook URL/);
    await fails(['webhook', 'create', '--project', 'nope', ...url], 'Project not found: nope');
    await fails(['webhook', 'list', '--project', 'nope'], 'Project not found: nope');
    expect(await services.webhooks.list(shop.projectId)).toHaveLength(before);
  });

  it("does not delete another project's endpoint", async () => {
    await fails(
      ['webhook', 'delete', '--project', 'other', '--id', String(created.id)],
      `Webhook endpoint not found: ${created.id}`,
    );
    expect((await services.webhooks.get(shop.projectId, created.id)).id).toBe(created.id);
    await fails(['webhook', 'delete', '--project', 'shop', '--id', 'abc'], 'Webhook endpoint not found');
  });

  it('deletes an endpoint', async () => {
    const deleted = await heraldJson<{ deleted: boolean; id: number }>(
      ['webhook', 'delete', '--project', 'shop', '--id', String(created.id)],
      env,
    );
    expect(deleted).toEqual({ deleted: true, id: created.id });
    const { webhooks } = await heraldJson<{ webhooks: EndpointJson[] }>(
      ['webhook', 'list', '--project', 'shop'],
      env,
    );
    expect(webhooks.map((w) => w.id)).not.toContain(created.id);
    await fails(
      ['webhook', 'delete', '--project', 'shop', '--id', String(created.id)],
      `Webhook endpoint not found: ${created.id}`,
    );
  });
});

describe('herald suppression', { timeout: 90_000 }, () => {
  interface Entry {
    email: string;
    reason: string;
    created_at: string;
    request_id: string | null;
    detail: string | null;
  }

  it('adds an address (manual, lowercased), lists it and removes it', async () => {
    const added = await heraldJson<Entry>(
      ['suppression', 'add', '--project', 'shop', '--email', 'Jane@Example.org'],
      env,
    );
    expect(added).toEqual({
      email: 'jane@example.org',
      reason: 'manual',
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/) as unknown,
      request_id: null,
      detail: null,
    });
    // The server's own service sees it at once.
    expect((await services.suppressions.list(shop.projectId)).map((s) => s.email)).toEqual([
      'jane@example.org',
    ]);

    const { suppressions } = await heraldJson<{ suppressions: Entry[] }>(
      ['suppression', 'list', '--project', 'shop'],
      env,
    );
    expect(suppressions).toEqual([added]);
    const elsewhere = await heraldJson<{ suppressions: Entry[] }>(
      ['suppression', 'list', '--project', 'other'],
      env,
    );
    expect(elsewhere.suppressions).toEqual([]);

    const text = await runHerald(['suppression', 'list', '--project', 'shop'], env);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toContain('jane@example.org');
    expect(text.stdout).toContain('manual');

    const removed = await heraldJson<{ removed: boolean; email: string }>(
      ['suppression', 'remove', '--project', 'shop', '--email', 'JANE@example.org'],
      env,
    );
    expect(removed).toEqual({ removed: true, email: 'jane@example.org' });
    expect(await services.suppressions.list(shop.projectId)).toEqual([]);
  });

  it('prints the address it removed, as add does, when given a name and address', async () => {
    const added = await heraldJson<Entry>(
      ['suppression', 'add', '--project', 'shop', '--email', 'Jane Roe <Jane.Roe@Example.org>'],
      env,
    );
    expect(added.email).toBe('jane.roe@example.org');
    const removed = await heraldJson<{ removed: boolean; email: string }>(
      ['suppression', 'remove', '--project', 'shop', '--email', 'Jane Roe <JANE.ROE@example.org>'],
      env,
    );
    expect(await services.suppressions.list(shop.projectId)).toEqual([]);
    expect(removed).toEqual({ removed: true, email: 'jane.roe@example.org' });
  });

  it('says an address was already suppressed, and keeps its entry', async () => {
    const added = await runHerald(
      ['suppression', 'add', '--project', 'shop', '--email', 'twice@example.org'],
      env,
    );
    expect(added.code, added.stderr).toBe(0);
    expect(added.stdout).toBe('twice@example.org is suppressed (manual).\n');
    const [entry] = (await services.suppressions.list(shop.projectId)).map(suppressionView);

    const again = await runHerald(
      ['suppression', 'add', '--project', 'shop', '--email', 'Twice <TWICE@Example.org>'],
      env,
    );
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toBe(
      `twice@example.org was already suppressed (manual, since ${entry!.created_at}); its entry is kept.\n`,
    );
    expect(
      await heraldJson<Entry>(
        ['suppression', 'add', '--project', 'shop', '--email', 'Twice@example.org'],
        env,
      ),
    ).toEqual(entry);

    await services.suppressions.remove(shop.projectId, 'twice@example.org');
  });

  it('refuses what is not an address, an address not listed, and an unknown project', async () => {
    await fails(
      ['suppression', 'add', '--project', 'shop', '--email', 'not-an-email'],
      'Not an email address: "not-an-email"',
    );
    await fails(
      ['suppression', 'remove', '--project', 'shop', '--email', 'nobody@example.org'],
      'Not on the suppression list: "nobody@example.org"',
    );
    await fails(
      ['suppression', 'add', '--project', 'nope', '--email', 'a@example.org'],
      'Project not found: nope',
    );
    await fails(['suppression', 'list', '--project', 'nope'], 'Project not found: nope');
    // An entry of one project cannot be removed through another.
    await services.suppressions.add(shop.projectId, 'kept@example.org');
    await fails(
      ['suppression', 'remove', '--project', 'other', '--email', 'kept@example.org'],
      'Not on the suppression list',
    );
    expect((await services.suppressions.list(shop.projectId)).map((s) => s.email)).toEqual([
      'kept@example.org',
    ]);
  });

  it('prints errors as JSON with --json', async () => {
    const result = await runHerald(
      ['suppression', 'add', '--project', 'shop', '--email', 'bad', '--json'],
      env,
    );
    expect(result.code).toBe(1);
    expect(JSON.parse(result.stderr.trim())).toEqual({ error: 'Not an email address: "bad"' });
  });
});
