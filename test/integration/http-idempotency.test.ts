import { PassThrough } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SEND_PATH, bearer, countNotifications, expectError, send } from '../helpers/http.js';
import { createTestContext, seedProject, type TestContext } from '../helpers/services.js';
import { waitUntil } from '../helpers/wait.js';

/** product.md §3: the Idempotency-Key header (after the IETF draft), kept per project. */

const BODY = { template: 'user_created', to: 'jane@example.org', data: { user_name: 'Jane', role: 'admin' } };

let ctx: TestContext;

beforeAll(async () => {
  ctx = await createTestContext();
});
afterAll(() => ctx.close());

function withKey(key: string): Record<string, string> {
  return { 'idempotency-key': key };
}

describe('same key, same body', () => {
  it('replays the first response, marks it replayed, and stores nothing new', async () => {
    const { apiKey, projectId } = await seedProject(ctx.services);
    const first = await send(ctx.app, apiKey, BODY, withKey('order-1'));
    expect(first.statusCode).toBe(202);
    expect(first.headers['idempotent-replayed']).toBeUndefined();

    for (let i = 0; i < 3; i++) {
      const again = await send(ctx.app, apiKey, BODY, withKey('order-1'));
      expect(again.statusCode).toBe(202);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.body).toBe(first.body);
      expect(again.json()).toEqual(first.json());
    }
    expect(await countNotifications(ctx.services, projectId)).toBe(1);
  });

  it('uses no quota, and replays even when the quota is used up', async () => {
    const { apiKey, projectId } = await seedProject(ctx.services, { quotaLimit: 2 });
    const first = await send(ctx.app, apiKey, BODY, withKey('q-1'));
    expect(first.headers['x-quota-remaining']).toBe('1');
    const replay = await send(ctx.app, apiKey, BODY, withKey('q-1'));
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.headers['x-quota-remaining']).toBe('1');

    const second = await send(ctx.app, apiKey, BODY);
    expect(second.statusCode).toBe(202);
    expect(second.headers['x-quota-remaining']).toBe('0');
    expectError(await send(ctx.app, apiKey, BODY), 402, 'Request quota exceeded');

    const lateReplay = await send(ctx.app, apiKey, BODY, withKey('q-1'));
    expect(lateReplay.statusCode).toBe(202);
    expect(lateReplay.headers['idempotent-replayed']).toBe('true');
    expect(lateReplay.body).toBe(first.body);
    expect(await countNotifications(ctx.services, projectId)).toBe(2);
  });

  it('treats the same JSON with its keys in another order as the same body', async () => {
    const { apiKey, projectId } = await seedProject(ctx.services);
    const a =
      '{"template":"user_created","to":"jane@example.org","data":{"user_name":"Jane","role":"admin"}}';
    const b =
      '{"data":{"role":"admin","user_name":"Jane"},"to":"jane@example.org","template":"user_created"}';
    const c =
      '{\n  "to": "jane@example.org",\n  "data": { "user_name": "Jane", "role": "admin" },\n  "template": "user_created"\n}';
    const first = await send(ctx.app, apiKey, a, withKey('order-2'));
    expect(first.statusCode).toBe(202);
    for (const raw of [b, c]) {
      const again = await send(ctx.app, apiKey, raw, withKey('order-2'));
      expect(again.statusCode, again.body).toBe(202);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.body).toBe(first.body);
    }
    expect(await countNotifications(ctx.services, projectId)).toBe(1);
  });
});

describe('same key, another body', () => {
  it('gets 422 and stores nothing', async () => {
    const { apiKey, projectId } = await seedProject(ctx.services);
    expect((await send(ctx.app, apiKey, BODY, withKey('order-3'))).statusCode).toBe(202);
    const changed = [
      { ...BODY, to: 'joe@example.org' },
      { ...BODY, data: { user_name: 'Jane', role: 'viewer' } },
      { template: BODY.template, to: BODY.to, variables: BODY.data },
      { ...BODY, type: 'email' },
    ];
    for (const body of changed) {
      const response = await send(ctx.app, apiKey, body, withKey('order-3'));
      expectError(response, 422);
      expect(response.headers['idempotent-replayed']).toBeUndefined();
    }
    expect(await countNotifications(ctx.services, projectId)).toBe(1);
  });
});

describe('keys are per project', () => {
  it('the same key in two projects gives two notifications', async () => {
    const a = await seedProject(ctx.services);
    const b = await seedProject(ctx.services);
    const first = await send(ctx.app, a.apiKey, BODY, withKey('shared-key'));
    const second = await send(ctx.app, b.apiKey, BODY, withKey('shared-key'));
    expect(first.statusCode).toBe(202);
    expect(second.statusCode).toBe(202);
    expect(second.headers['idempotent-replayed']).toBeUndefined();
    expect(second.json<{ request_id: string }>().request_id).not.toBe(
      first.json<{ request_id: string }>().request_id,
    );
    expect(await countNotifications(ctx.services, a.projectId)).toBe(1);
    expect(await countNotifications(ctx.services, b.projectId)).toBe(1);
  });

  it('a different key in the same project is a new notification', async () => {
    const { apiKey, projectId } = await seedProject(ctx.services);
    await send(ctx.app, apiKey, BODY, withKey('k-1'));
    const other = await send(ctx.app, apiKey, BODY, withKey('k-2'));
    expect(other.statusCode).toBe(202);
    expect(other.headers['idempotent-replayed']).toBeUndefined();
    expect(await countNotifications(ctx.services, projectId)).toBe(2);
  });
});

describe('the header itself', () => {
  it('is refused with 400 when invalid, and nothing is stored', async () => {
    const { apiKey, projectId } = await seedProject(ctx.services);
    // An empty header is a key given and invalid, not a request without one.
    for (const key of ['', 'k'.repeat(300), 'k'.repeat(256), 'has space', 'tab\there', 'ünïcödé']) {
      expectError(await send(ctx.app, apiKey, BODY, withKey(key)), 400, /Idempotency-Key/);
    }
    expect(await countNotifications(ctx.services, projectId)).toBe(0);
  });

  it('accepts a key of 255 characters', async () => {
    const { apiKey } = await seedProject(ctx.services);
    expect((await send(ctx.app, apiKey, BODY, withKey('k'.repeat(255)))).statusCode).toBe(202);
  });

  it('a request refused for its body does not take the key', async () => {
    const { apiKey, projectId } = await seedProject(ctx.services);
    expectError(await send(ctx.app, apiKey, { ...BODY, to: 'bad' }, withKey('fix-me')), 400);
    const fixed = await send(ctx.app, apiKey, BODY, withKey('fix-me'));
    expect(fixed.statusCode).toBe(202);
    expect(fixed.headers['idempotent-replayed']).toBeUndefined();
    expect(await countNotifications(ctx.services, projectId)).toBe(1);
  });

  it('a request refused for quota does not take the key', async () => {
    const { apiKey, projectId } = await seedProject(ctx.services, { quotaLimit: 0 });
    expectError(await send(ctx.app, apiKey, BODY, withKey('later')), 402, 'Request quota exceeded');
    await ctx.services.projects.update(projectId, { quotaLimit: 1 });
    const later = await send(ctx.app, apiKey, BODY, withKey('later'));
    expect(later.statusCode).toBe(202);
    expect(later.headers['idempotent-replayed']).toBeUndefined();
  });
});

/**
 * A send with `key` whose body has begun to arrive (`start`) and waits for the rest: written to
 * `upload`, the response then comes. The server reads a body only after its hooks have run, so
 * once `start` has been read the key is held.
 */
async function uploading(apiKey: string, key: string, start: string) {
  const upload = new PassThrough();
  const response = ctx.app.inject({
    method: 'POST',
    url: SEND_PATH,
    headers: { 'content-type': 'application/json', ...bearer(apiKey), ...withKey(key) },
    payload: upload,
  });
  upload.write(start);
  await waitUntil(() => (upload.readableLength === 0 ? true : undefined), {
    what: 'the first part of the body to be read',
  });
  return { upload, response };
}

describe('concurrent requests with the same key', () => {
  it('create exactly one notification; the others get the replay or 409', async () => {
    const { apiKey, projectId } = await seedProject(ctx.services);
    const responses = await Promise.all(
      Array.from({ length: 20 }, () => send(ctx.app, apiKey, BODY, withKey('burst'))),
    );
    const fresh = responses.filter(
      (r) => r.statusCode === 202 && r.headers['idempotent-replayed'] !== 'true',
    );
    const replays = responses.filter(
      (r) => r.statusCode === 202 && r.headers['idempotent-replayed'] === 'true',
    );
    const conflicts = responses.filter((r) => r.statusCode === 409);
    expect(fresh).toHaveLength(1);
    expect(fresh.length + replays.length + conflicts.length).toBe(responses.length);
    for (const replay of replays) expect(replay.body).toBe(fresh[0]!.body);
    for (const conflict of conflicts) expectError(conflict, 409);
    expect(await countNotifications(ctx.services, projectId)).toBe(1);

    // Once the first has finished, the key replays.
    const after = await send(ctx.app, apiKey, BODY, withKey('burst'));
    expect(after.headers['idempotent-replayed']).toBe('true');
    expect(after.body).toBe(fresh[0]!.body);
  });

  it("answers 409 to a retry while the first request's body is still arriving, and the first goes on", async () => {
    const { apiKey, projectId } = await seedProject(ctx.services);
    const json = JSON.stringify(BODY);
    const { upload, response: first } = await uploading(apiKey, 'slow', json.slice(0, 10));
    const retry = await send(ctx.app, apiKey, BODY, withKey('slow'));
    expectError(retry, 409, 'A request with this Idempotency-Key is still being processed');
    // Another key of the same project, and the same key in another project, are not held.
    expect((await send(ctx.app, apiKey, BODY, withKey('other'))).statusCode).toBe(202);
    const elsewhere = await seedProject(ctx.services);
    expect((await send(ctx.app, elsewhere.apiKey, BODY, withKey('slow'))).statusCode).toBe(202);

    upload.end(json.slice(10));
    const accepted = await first;
    expect(accepted.statusCode).toBe(202);
    expect(accepted.headers['idempotent-replayed']).toBeUndefined();
    const replay = await send(ctx.app, apiKey, BODY, withKey('slow'));
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.body).toBe(accepted.body);
    expect(await countNotifications(ctx.services, projectId)).toBe(2);
  });

  it('lets the key go with each response on a connection kept alive', async () => {
    const { apiKey } = await seedProject(ctx.services);
    // Listening until the suite's app is closed, which closes the idle connection too.
    const address = await ctx.app.listen({ port: 0, host: '127.0.0.1' });
    const answers: [number, string | null, string | null][] = [];
    for (let i = 0; i < 3; i++) {
      const response = await fetch(`${address}${SEND_PATH}`, {
        method: 'POST',
        body: JSON.stringify(BODY),
        headers: { 'content-type': 'application/json', ...bearer(apiKey), ...withKey('kept') },
      });
      await response.text();
      answers.push([
        response.status,
        response.headers.get('idempotent-replayed'),
        response.headers.get('connection'),
      ]);
    }
    expect(answers).toEqual([
      [202, null, 'keep-alive'],
      [202, 'true', 'keep-alive'],
      [202, 'true', 'keep-alive'],
    ]);
  });

  it('lets the key go when the first request is cut off while its body arrives', async () => {
    const { apiKey, projectId } = await seedProject(ctx.services);
    const { upload, response: cut } = await uploading(apiKey, 'cut', '{"template":');
    upload.destroy(new Error('connection lost'));
    await cut.catch(() => undefined);
    const retry = await waitUntil(
      async () => {
        const response = await send(ctx.app, apiKey, BODY, withKey('cut'));
        return response.statusCode === 409 ? undefined : response;
      },
      { what: 'the key to be let go' },
    );
    expect(retry.statusCode).toBe(202);
    expect(retry.headers['idempotent-replayed']).toBeUndefined();
    expect(await countNotifications(ctx.services, projectId)).toBe(1);
  });
});
