import nodemailer from 'nodemailer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeServices, openServices, type Services } from '../../src/compose.js';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/logger.js';
import { backend, freshDatabase, type TestDatabase } from '../helpers/database.js';
import { hostileReport } from '../helpers/hostile-report.js';
import { httpRequest, ProcessGroup } from '../helpers/processes.js';
import { testEnv } from '../helpers/services.js';
import { SmtpSink } from '../helpers/smtp-sink.js';
import { waitUntil } from '../helpers/wait.js';
import { freePort } from '../helpers/dead-relays.js';

/**
 * Hostile bounce reports against another project's mail, on a real `herald serve` (role all: the
 * API in one process, delivery and the bounce listener in its child). While five connections send
 * reports that cost mailparser most of a second each to plain bounces@ (no token needed), project
 * B keeps sending; each of its messages is timed from the send request to the relay's receipt,
 * which crosses the child's event loop. The figures (B's p99 under attack against alone) are
 * printed for docs/security.md, never asserted: they depend on the machine. What is asserted
 * cannot be noisy: every hostile report gets an answer of its own and every message of B arrives.
 */

const DOMAIN = 'bounces.example.com';
const SENDS = 100;
let database: TestDatabase;
let services: Services;
let sink: SmtpSink;
const group = new ProcessGroup();

beforeAll(async () => {
  database = await freshDatabase();
  services = await openServices(loadConfig(testEnv(database)), createLogger('silent'));
  sink = await new SmtpSink().start();
});

afterAll(async () => {
  await group.killAll();
  await closeServices(services);
  await sink?.stop();
  await database.drop();
});

const p99 = (values: number[]) => [...values].sort((a, b) => a - b)[Math.ceil(values.length * 0.99) - 1]!;

describe(`another project's mail while strangers send hostile bounce reports (${backend})`, () => {
  it('all arrives, and every hostile report is answered on its own', async () => {
    const b = await services.projects.create({ name: 'bystander', fromEmail: 'b@shop.example' });
    await services.templates.create(b.project.id, { name: 'welcome', subject: 'Hi', text: 'Hello' });
    await services.smtpSettings.setFromUrl(b.project.id, sink.url);
    const port = await freePort();
    const { url } = await group.http('all', 'all', {
      ...testEnv(database),
      HERALD_LOG_LEVEL: 'info',
      HERALD_BOUNCE_DOMAIN: DOMAIN,
      HERALD_BOUNCE_SMTP_PORT: String(port),
      HERALD_BOUNCE_RATE_PER_MINUTE: '100000',
    });

    /** B's messages one after another: send request to the relay's receipt, in ms. */
    const bystander = async (count: number): Promise<number[]> => {
      const latencies: number[] = [];
      for (let i = 0; i < count; i++) {
        const started = performance.now();
        const reply = await httpRequest(`${url}/api/v1/notifications`, {
          headers: { authorization: `Bearer ${b.apiKey}` },
          body: { template: 'welcome', to: `b${i}-${started}@example.org` },
        });
        expect(reply.status).toBe(202);
        const requestId = (JSON.parse(reply.body) as { request_id: string }).request_id;
        await waitUntil(
          () => sink.messages.find((m) => m.parsed.headers.get('x-herald-request-id') === requestId),
          { intervalMs: 2, timeoutMs: 60_000, what: `B's message ${requestId} at the relay` },
        );
        latencies.push(performance.now() - started);
      }
      return latencies;
    };

    await bystander(10);
    const alone = p99(await bystander(SENDS));
    let running = true;
    const answers = new Map<number, number>();
    const attacker = async () => {
      const raw = hostileReport(DOMAIN);
      while (running) {
        const transport = nodemailer.createTransport({
          host: '127.0.0.1',
          port,
          secure: false,
          ignoreTLS: true,
        });
        const code = await transport.sendMail({ envelope: { from: '', to: `bounces@${DOMAIN}` }, raw }).then(
          (info) => Number(info.response.slice(0, 3)),
          (error: { responseCode?: number }) => error.responseCode ?? 0,
        );
        transport.close();
        answers.set(code, (answers.get(code) ?? 0) + 1);
      }
    };
    const attackers = Promise.all(Array.from({ length: 5 }, attacker));
    const underAttack = p99(await bystander(SENDS));
    running = false;
    await attackers;
    expect(answers.get(250) ?? 0).toBeGreaterThan(0);
    // 250 once read, 451 past the reports waiting to be parsed: never a dropped connection.
    expect([...answers.keys()].every((code) => code === 250 || code === 451)).toBe(true);
    console.info(
      `bounce isolation (${backend}), project B's send-to-relay p99: alone ${alone.toFixed(1)} ms; ` +
        `under 5 connections of hostile reports ${underAttack.toFixed(1)} ms (${(underAttack / alone).toFixed(1)}x alone); ` +
        `answers ${JSON.stringify(Object.fromEntries(answers))}`,
    );
  }, 300_000);
});
