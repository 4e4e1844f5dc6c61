import { afterEach, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { createWorker } from '../../src/roles.js';
import { buildApp } from '../../src/http/app.js';
import { createTestContext, seedProject, type TestContext } from '../helpers/services.js';
import { SmtpSink } from '../helpers/smtp-sink.js';
import { waitUntil } from '../helpers/wait.js';

/** `GET /metrics`: counters and the queue gauges move with a real delivery run; the token rule. */

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function appWithMetrics(env: Record<string, string>, token: string | null = null) {
  const ctx = await createTestContext(env);
  const app = await buildApp({
    ...ctx.services,
    metricsRoute: { metrics: ctx.services.metrics, production: ctx.config.production, token },
  });
  cleanups.push(async () => {
    await app.close();
    await ctx.close();
  });
  return { ctx, app };
}

/** The value of one sample, e.g. `herald_queue_depth{state="queued"}`; 0 when absent. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number {
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const match = /^([a-z_]+)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (match === null || match[1] !== name) continue;
    const found = Object.fromEntries(
      [...(match[2] ?? '').matchAll(/([a-z_]+)="([^"]*)"/g)].map((m) => [m[1], m[2]]),
    );
    if (Object.entries(labels).every(([k, v]) => found[k] === v)) return Number(match[3]);
  }
  return 0;
}

async function scrape(app: FastifyInstance, headers: Record<string, string> = {}) {
  return app.inject({ url: '/metrics', headers });
}

describe('GET /metrics', () => {
  it('counts accepted and delivered messages and follows the queue during a delivery run', async () => {
    const sink = new SmtpSink();
    await sink.start();
    cleanups.push(() => sink.stop());
    sink.rejectRecipients.set('bad@example.org', [550, '5.1.1 No such user']);
    const { ctx, app }: { ctx: TestContext; app: FastifyInstance } = await appWithMetrics({
      HERALD_SMTP_URL: `smtp://127.0.0.1:${sink.port}`,
      HERALD_DELIVERY_POLL_MS: '20',
    });
    const { projectId, apiKey } = await seedProject(ctx.services);
    const project = String(projectId);
    for (const to of ['a@example.org', 'b@example.org', 'bad@example.org']) {
      const response = await app.inject({
        method: 'POST',
        url: '/api/v1/notifications',
        headers: { authorization: `Bearer ${apiKey}` },
        payload: { template: 'user_created', to, type: 'email', data: { user_name: 'Jo' } },
      });
      expect(response.statusCode).toBe(202);
    }

    // No worker yet: three messages wait, and the oldest is due.
    const before = await scrape(app);
    expect(before.statusCode).toBe(200);
    expect(before.headers['content-type']).toMatch(/^text\/plain/);
    expect(
      sample(before.body, 'herald_notifications_accepted_total', {
        project_id: project,
        outcome: 'accepted',
      }),
    ).toBe(3);
    expect(sample(before.body, 'herald_queue_depth', { state: 'queued' })).toBe(3);
    expect(sample(before.body, 'herald_notifications_delivered_total', { project_id: project })).toBe(0);

    const worker = createWorker(ctx.services);
    worker.start();
    cleanups.push(() => worker.stop());
    const after = await waitUntil(
      async () => {
        const text = (await scrape(app)).body;
        const done =
          sample(text, 'herald_notifications_delivered_total', { outcome: 'sent', project_id: project }) +
          sample(text, 'herald_notifications_delivered_total', { outcome: 'failed', project_id: project });
        return done === 3 ? text : undefined;
      },
      { what: 'three delivery outcomes in /metrics' },
    );
    expect(
      sample(after, 'herald_notifications_delivered_total', { outcome: 'sent', transport: 'smtp' }),
    ).toBe(2);
    expect(sample(after, 'herald_notifications_delivered_total', { outcome: 'failed' })).toBe(1);
    expect(sample(after, 'herald_queue_depth', { state: 'queued' })).toBe(0);
    expect(sample(after, 'herald_queue_oldest_due_age_seconds')).toBe(0);
    expect(sample(after, 'herald_smtp_transaction_duration_seconds_count', { outcome: 'sent' })).toBe(2);
    // The relay's window: it starts at 5 and three answers from one relay at a time grow nothing.
    expect(sample(after, 'herald_smtp_relay_window', { relay: `127.0.0.1:${sink.port}` })).toBe(5);
    expect(after).toContain('herald_webhook_deliveries_total');
    expect(
      sample(after, 'herald_http_request_duration_seconds_count', {
        method: 'POST',
        route: '/api/v1/notifications',
        status_code: '202',
      }),
    ).toBe(3);
    expect(sink.messages).toHaveLength(2);

    // A batch counts as the notifications it carries, accepted or refused.
    const batch = (items: unknown[]) =>
      app.inject({
        method: 'POST',
        url: '/api/v1/notifications/batch',
        headers: { authorization: `Bearer ${apiKey}` },
        payload: items,
      });
    expect(
      (
        await batch([
          { template: 'user_created', to: 'c@example.org' },
          { template: 'user_created', to: 'd@example.org' },
        ])
      ).statusCode,
    ).toBe(202);
    expect((await batch([{ template: '' }, { template: '' }, { template: '' }])).statusCode).toBe(400);
    const batches = (await scrape(app)).body;
    expect(
      sample(batches, 'herald_notifications_accepted_total', { project_id: project, outcome: 'accepted' }),
    ).toBe(5);
    expect(
      sample(batches, 'herald_notifications_accepted_total', { project_id: project, outcome: 'rejected' }),
    ).toBe(3);
  });

  it('is open outside production', async () => {
    const { app } = await appWithMetrics({});
    expect((await scrape(app)).statusCode).toBe(200);
  });

  it('does not exist in production without HERALD_METRICS_TOKEN', async () => {
    const { app } = await appWithMetrics({ NODE_ENV: 'production' });
    const response = await scrape(app);
    expect(response.statusCode).toBe(404);
    expect(response.body).not.toContain('herald_');
  });

  it('needs the bearer token in production when HERALD_METRICS_TOKEN is set', async () => {
    const token = 'metrics-token-0123456789';
    const { app } = await appWithMetrics({ NODE_ENV: 'production', HERALD_METRICS_TOKEN: token }, token);
    expect((await scrape(app)).statusCode).toBe(401);
    expect((await scrape(app, { authorization: 'Bearer wrong-token-0123456789' })).statusCode).toBe(401);
    const ok = await scrape(app, { authorization: `Bearer ${token}` });
    expect(ok.statusCode).toBe(200);
    expect(ok.body).toContain('herald_queue_depth');
  });
});
