import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeServices, openServices, type Services } from '../../src/compose.js';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/logger.js';
import { backend, freshDatabase, type TestDatabase } from '../helpers/database.js';
import { httpRequest, ProcessGroup } from '../helpers/processes.js';
import { testEnv } from '../helpers/services.js';

/**
 * A key holder's hostile bodies against another project's sends, on a real `herald serve --role
 * api`: while project A posts 5 MiB batches that are expensive to parse (nested 5,000 deep, or a
 * million empty arrays), project B keeps sending small notifications. Every request gets its own
 * answer; the figures (B's p99 under each attack against its p99 alone, as a ratio) are printed
 * for docs/security.md, never asserted: they depend on the machine.
 */

const SENDS = 60;
let database: TestDatabase;
let services: Services;
let env: Record<string, string>;
const group = new ProcessGroup();

beforeAll(async () => {
  database = await freshDatabase();
  env = testEnv(database);
  services = await openServices(loadConfig(env), createLogger('silent'));
});

afterAll(async () => {
  await group.killAll();
  await closeServices(services);
  await database.drop();
});

const p99 = (values: number[]) => [...values].sort((a, b) => a - b)[Math.ceil(values.length * 0.99) - 1]!;

const DEEP_ITEM = `{"template":"welcome","to":"x@example.org","data":${'{"a":'.repeat(5000)}1${'}'.repeat(5000)}}`;
const ATTACKS = {
  'nested 5,000 deep': {
    body: `[${Array.from({ length: 170 }, () => DEEP_ITEM).join(',')}]`,
    error: "Invalid 'data' (nested deeper than 32 levels) (item 0)",
  },
  'a million empty arrays': {
    body: `[${Array.from({ length: 1_500_000 }, () => '[]').join(',')}]`,
    error: 'Body must be a JSON array of 1–500 notifications',
  },
};

describe(`another project's sends while a key holder posts hostile bodies (${backend})`, () => {
  it('are all accepted, and each hostile body is refused on its own', async () => {
    const a = await services.projects.create({ name: 'hostile' });
    const b = await services.projects.create({ name: 'bystander' });
    await services.templates.create(b.project.id, { name: 'welcome', subject: 'Hi', text: 'Hello' });
    const { url } = await group.http('api', 'api', { ...env, HERALD_LOG_LEVEL: 'info' });
    const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });

    /** B's sends one after another; their latencies in ms. */
    const bystander = async (count: number): Promise<number[]> => {
      const latencies: number[] = [];
      for (let i = 0; i < count; i++) {
        const started = performance.now();
        const reply = await httpRequest(`${url}/api/v1/notifications`, {
          headers: { authorization: `Bearer ${b.apiKey}` },
          body: { template: 'welcome', to: `b${i}@example.org` },
          agent,
        });
        latencies.push(performance.now() - started);
        expect(reply.status).toBe(202);
      }
      return latencies;
    };

    await bystander(20);
    const alone = p99(await bystander(SENDS));
    const figures = [`alone: p99 ${alone.toFixed(1)} ms`];
    for (const [name, attack] of Object.entries(ATTACKS)) {
      let running = true;
      const answers: number[] = [];
      const attacker = async () => {
        while (running) {
          const reply = await httpRequest(`${url}/api/v1/notifications/batch`, {
            method: 'POST',
            headers: { authorization: `Bearer ${a.apiKey}`, 'content-type': 'application/json' },
            agent,
            raw: attack.body,
          });
          expect(reply.status).toBe(400);
          expect((JSON.parse(reply.body) as { error: string }).error).toBe(attack.error);
          answers.push(reply.status);
        }
      };
      const attackers = Promise.all(Array.from({ length: 4 }, attacker));
      const underAttack = p99(await bystander(SENDS));
      running = false;
      await attackers;
      expect(answers.length).toBeGreaterThan(0);
      figures.push(
        `${name} (${answers.length} answered): p99 ${underAttack.toFixed(1)} ms (${(underAttack / alone).toFixed(1)}x alone)`,
      );
    }
    agent.destroy();
    console.info(`body isolation (${backend}), project B's send latency: ${figures.join('; ')}`);
  }, 300_000);
});
