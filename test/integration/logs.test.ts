import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/logger.js';
import { startServer, type RunningServer } from '../../src/server.js';
import { freshDatabase } from '../helpers/database.js';
import { seedProject, testEnv } from '../helpers/services.js';
import { SmtpSink } from '../helpers/smtp-sink.js';
import { waitUntil } from '../helpers/wait.js';

/** What an operator reads: JSON lines off a terminal, the true transport at start, failures at warn. */

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function serve(env: Record<string, string>): Promise<{ server: RunningServer; lines: string[] }> {
  const database = await freshDatabase();
  const config = loadConfig(testEnv(database, { HERALD_PORT: '0', HERALD_DELIVERY_POLL_MS: '20', ...env }));
  const lines: string[] = [];
  const logger = createLogger('info', { write: (line: string) => void lines.push(line) });
  const server = await startServer(config, 'all', logger);
  cleanups.push(async () => {
    await server.stop();
    await database.drop();
  });
  return { server, lines };
}

const parsed = (lines: string[]) => lines.map((line) => JSON.parse(line) as Record<string, unknown>);

describe('logs', () => {
  it('are one JSON object per line and log a rejected delivery at warn with project, request id and reply', async () => {
    const sink = new SmtpSink();
    await sink.start();
    cleanups.push(() => sink.stop());
    sink.rejectRecipients.set('gone@example.org', [550, '5.1.1 No such user']);
    const { server, lines } = await serve({ HERALD_SMTP_URL: `smtp://127.0.0.1:${sink.port}` });
    const { projectId, apiKey } = await seedProject(server.services);
    const response = await fetch(`${server.url}/api/v1/notifications`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ template: 'user_created', to: 'gone@example.org', type: 'email', data: {} }),
    });
    expect(response.status).toBe(202);
    const { request_id: requestId } = (await response.json()) as { request_id: string };
    const warning = await waitUntil(
      () => parsed(lines).find((line) => line.requestId === requestId && line.level === 40),
      { what: 'the delivery failure at warn' },
    );
    expect(warning).toMatchObject({ projectId, smtpCode: 550, msg: 'delivery failed permanently' });
    expect(String(warning.reply)).toContain('550');
    const started = parsed(lines).find((line) => String(line.msg).startsWith('Herald all started'));
    expect(String(started?.mailTransport)).toMatch(/^SMTP smtp:\/\/127\.0\.0\.1:\d+ .*HERALD_SMTP_URL/);
    expect(String(started?.mailTransport)).toContain(`:${sink.port} `);
  });

  it('say capture at start only when nothing else is configured', async () => {
    const { lines } = await serve({});
    const started = parsed(lines).find((line) => String(line.msg).startsWith('Herald all started'));
    expect(String(started?.mailTransport)).toMatch(/^capture \(no SMTP configured/);
  });
});
