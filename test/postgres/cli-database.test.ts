import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPostgresDatabase } from '../helpers/database.js';
import { runHerald } from '../helpers/processes.js';
import { TEST_SECRET } from '../helpers/services.js';

/**
 * The CLI pointed at a PostgreSQL database Herald never set up (a wrong HERALD_DATABASE_URL, or
 * before the first `herald migrate`): a command that reads or changes what is there is refused
 * and creates no tables; one that makes the first of something sets the database up.
 */
let database: { url: string; drop(): Promise<void> };
beforeAll(async () => {
  database = await createPostgresDatabase();
});
afterAll(() => database.drop());

async function tables(): Promise<string[]> {
  const client = new pg.Client({ connectionString: database.url });
  await client.connect();
  try {
    const result = await client.query<{ name: string }>(
      "SELECT table_name AS name FROM information_schema.tables WHERE table_schema = 'public'",
    );
    return result.rows.map((row) => row.name);
  } finally {
    await client.end();
  }
}

describe('the CLI on an empty PostgreSQL database', () => {
  it('refuses to read it, names it without its password, and sets it up only for a first project', async () => {
    const env = { HERALD_SECRET_KEY: TEST_SECRET, HERALD_DATABASE_URL: database.url };
    const name = new URL(database.url).pathname;
    for (const args of [
      ['project', 'list'],
      ['template', 'list', '--project', 'shop'],
    ]) {
      const refused = await runHerald(args, env);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain(`${name} has no Herald tables yet: run herald migrate`);
    }
    expect(await tables()).toEqual([]);

    const created = await runHerald(['project', 'create', '--name', 'shop', '--json'], env);
    expect(created.code, created.stderr).toBe(0);
    expect(await tables()).toContain('projects');
    const list = await runHerald(['project', 'list', '--json'], env);
    expect(list.code, list.stderr).toBe(0);
    expect(JSON.parse(list.stdout)).toMatchObject({ projects: [{ name: 'shop' }] });
  });
});
