import type {} from '@fastify/swagger';
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';
import { ContractChecker, injected } from './contract.js';
import { loadConfig, type Config } from '../../src/config.js';
import { closeServices, openServices, type OpenOptions, type Services } from '../../src/compose.js';
import { buildApp } from '../../src/http/app.js';
import { createLogger } from '../../src/logger.js';
import { freshDatabase, type TestDatabase } from './database.js';

export const TEST_SECRET = 'a'.repeat(64);

export interface TestContext {
  readonly services: Services;
  readonly config: Config;
  readonly database: TestDatabase;
  /** The HTTP app, not listening: drive it with `app.inject`. */
  readonly app: FastifyInstance;
  close(): Promise<void>;
}

/** Environment of a test instance: a fresh database, a fixed secret, quiet logs. */
export function testEnv(database: TestDatabase, env: Record<string, string> = {}): Record<string, string> {
  return {
    HERALD_DATA_DIR: database.dataDir,
    HERALD_DATABASE_URL: database.url,
    HERALD_SECRET_KEY: TEST_SECRET,
    HERALD_DEFAULT_QUOTA: 'unlimited',
    HERALD_LOG_LEVEL: 'silent',
    ...env,
  };
}

/**
 * Services and an HTTP app over a fresh database of the backend under test; `open` as for a server
 * process (`longRunning`) where a test needs what only servers do.
 */
export async function createTestContext(
  env: Record<string, string> = {},
  open: OpenOptions = {},
): Promise<TestContext> {
  const database = await freshDatabase();
  const config = loadConfig(testEnv(database, env));
  const services = await openServices(config, createLogger(config.logLevel ?? 'info'), open);
  const app = await buildApp(services);
  await app.ready();
  const contract = checkResponsesAgainstDocument(app);
  return {
    services,
    config,
    database,
    app,
    async close() {
      await app.close();
      // Every response the suite received must follow the OpenAPI document (product.md §6).
      if (contract.problems.length > 0)
        throw new Error(`responses that do not match the OpenAPI document:\n${contract.problems.join('\n')}`);
      await closeServices(services);
      await database.drop();
    },
  };
}

/**
 * Checks each response that `app.inject` returns against the app's own OpenAPI document, so the
 * whole HTTP suite is also a contract test of the document.
 */
function checkResponsesAgainstDocument(app: FastifyInstance): ContractChecker {
  const checker = new ContractChecker(app.swagger());
  const inject = app.inject.bind(app) as (options: InjectOptions | string) => Promise<LightMyRequestResponse>;
  const checked = async (options: InjectOptions | string) => {
    const response = await inject(options);
    const { method, url } = injected(options);
    checker.check(method, url, response);
    return response;
  };
  (app as { inject: unknown }).inject = (options?: InjectOptions | string) =>
    options === undefined ? inject(options as never) : checked(options);
  return checker;
}

/** Creates a project with a template, returning its API key. */
export async function seedProject(
  services: Services,
  options: {
    name?: string;
    contactEmail?: string | null;
    fromEmail?: string;
    quotaLimit?: number | null;
    template?: { name: string; subject: string; text: string; html?: string | null };
  } = {},
): Promise<{ projectId: number; apiKey: string; name: string }> {
  const name = options.name ?? `project-${Math.random().toString(36).slice(2, 10)}`;
  const { project, apiKey } = await services.projects.create({
    name,
    contactEmail: options.contactEmail === undefined ? null : options.contactEmail,
    fromEmail: options.fromEmail ?? 'noreply@herald.example',
    quotaLimit: options.quotaLimit === undefined ? null : options.quotaLimit,
  });
  const template = options.template ?? {
    name: 'user_created',
    subject: 'Welcome {{user_name}}',
    text: 'Hello {{user_name}}, your role is {{role}}.',
  };
  await services.templates.create(project.id, template);
  return { projectId: project.id, apiKey, name };
}
