import { tmpdir } from 'node:os';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { loadConfig } from '../../src/config.js';
import { createDashboardPlugin } from '../../src/dashboard/plugin.js';
import { createLogger } from '../../src/logger.js';
import { startServer, type RunningServer } from '../../src/server.js';
import { freshDatabase, type TestDatabase } from '../helpers/database.js';
import { testEnv } from '../helpers/services.js';
import { waitUntil } from '../helpers/wait.js';

/**
 * A real Herald (role `all`, listening on a free port, fresh database) with the dashboard, and a
 * headless Chromium driven by playwright-core. The setup link is captured from the plugin and the
 * info log is kept, so tests can check both.
 */
export interface DashboardHarness {
  readonly server: RunningServer;
  readonly url: string;
  readonly setupUrl: string;
  readonly logLines: string[];
  readonly browser: Browser;
  newPage(options?: { width?: number; height?: number }): Promise<{ context: BrowserContext; page: Page }>;
  close(): Promise<void>;
}

export const ADMIN = { email: 'admin@herald.example', password: 'correct horse battery staple' };

export async function startHarness(env: Record<string, string> = {}): Promise<DashboardHarness> {
  const database: TestDatabase = await freshDatabase();
  const config = loadConfig(
    testEnv(database, {
      HERALD_PORT: '0',
      HERALD_LOG_LEVEL: 'info',
      HERALD_DELIVERY_POLL_MS: '50',
      HERALD_DELIVERY_RETRY_BASE_MS: '60000',
      ...env,
    }),
  );
  const logLines: string[] = [];
  const logger = createLogger('info', { write: (line: string) => void logLines.push(line) });
  let setupUrl = '';
  const plugin = createDashboardPlugin({ onSetupLink: (link) => (setupUrl = link) });
  const server = await startServer(config, 'all', logger, [plugin]);
  const browser = await chromium.launch({
    // Set by vitest.config.ts from HERALD_CHROMIUM_PATH or the usual install paths.
    executablePath: process.env.HERALD_CHROMIUM_PATH ?? '/usr/bin/chromium',
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
      '--disable-quic',
    ],
  });
  const url = server.url!;
  return {
    server,
    url,
    setupUrl,
    logLines,
    browser,
    async newPage({ width = 1280, height = 900 } = {}) {
      const context = await browser.newContext({ viewport: { width, height }, baseURL: url });
      await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: url });
      // Fail within a test's time budget, with the locator in the message, not at the test timeout.
      context.setDefaultTimeout(8_000);
      return { context, page: await context.newPage() };
    },
    async close() {
      await browser.close();
      await server.stop();
      await database.drop();
    },
  };
}

/** Opens the setup link and creates the first admin; the page ends up logged in on /projects. */
export async function createFirstAdmin(page: Page, setupUrl: string): Promise<void> {
  await page.goto(setupUrl);
  await page.getByLabel('Email').fill(ADMIN.email);
  await page.getByLabel('Password', { exact: true }).fill(ADMIN.password);
  await page.getByLabel('Repeat the password').fill(ADMIN.password);
  await page.getByRole('button', { name: 'Create admin and log in' }).click();
  await page.waitForURL(/\/projects/);
}

/**
 * Every run takes the screenshots of the main pages; `npm run screenshots`
 * (HERALD_SCREENSHOTS=update) writes them over the committed ones in docs/screenshots, otherwise
 * they go to a temporary folder so a test run leaves the work tree as it was.
 */
const SCREENSHOT_DIR =
  process.env.HERALD_SCREENSHOTS === 'update'
    ? path.resolve('docs/screenshots')
    : path.join(tmpdir(), 'herald-screenshots');

export async function screenshot(page: Page, name: string, fullPage = false): Promise<void> {
  mkdirSync(SCREENSHOT_DIR, { recursive: true });
  await page.screenshot({ path: path.join(SCREENSHOT_DIR, `${name}.png`), fullPage, animations: 'disabled' });
}

/** Sends through the real HTTP API of the listening server. */
export async function apiSend(
  url: string,
  apiKey: string,
  body: Record<string, unknown>,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${url}/api/v1/notifications`, {
    method: 'POST',
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

/** Reloads until `check` passes; the logs are written asynchronously (API log buffer, worker). */
export async function reloadUntil(page: Page, check: () => Promise<boolean>, what: string): Promise<void> {
  let first = true;
  await waitUntil(
    async () => {
      if (!first) await page.reload();
      first = false;
      return (await check()) ? true : undefined;
    },
    { timeoutMs: 10_000, intervalMs: 150, what },
  );
}

/** Every visible form control on the page has a label (or an aria-label): the names of those that do not. */
export async function unlabelledControls(page: Page): Promise<string[]> {
  return page.evaluate<string[]>(`[...document.querySelectorAll('input, select, textarea')]
    .filter((el) => el.type !== 'hidden' && !el.hidden)
    .filter((el) => el.labels.length === 0 && !el.getAttribute('aria-label'))
    .map((el) => el.name || el.id || el.outerHTML)`);
}
