import { OpenAPIClientAxios, type OpenAPIV3_1 } from 'openapi-client-axios';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backend } from '../helpers/database.js';
import { ADMIN } from '../helpers/admin.js';
import { sendOk } from '../helpers/http.js';
import { createTestContext, type TestContext } from '../helpers/services.js';

/**
 * product.md §13: the management API is in the same OpenAPI document as the send API, under a
 * security scheme of its own; the document describes every route the server answers under
 * /api/v1; and a client generated from it manages a project over a real socket.
 */

let ctx: TestContext;
let document: OpenAPIV3_1.Document;
let token: string;

beforeAll(async () => {
  ctx = await createTestContext();
  document = (await ctx.app.inject({ url: '/api/v1/openapi.json' })).json<OpenAPIV3_1.Document>();
  token = (await ctx.services.adminTokens.create('generated-client')).secret;
});
afterAll(() => ctx.close());

const METHODS = ['get', 'post', 'put', 'patch', 'delete'] as const;
type Method = (typeof METHODS)[number];

/** Every route in the server's route tree (`printRoutes`), as full paths with their methods. */
function serverRoutes(tree: string): { path: string; methods: string[] }[] {
  const routes: { path: string; methods: string[] }[] = [];
  const stack: string[] = [];
  for (const line of tree.split('\n')) {
    const m = /^((?:│ {3}| {4})*)(?:├── |└── )(.+?)(?: \(([A-Z, ]+)\))?$/.exec(line);
    if (m === null) continue;
    const depth = m[1]!.length / 4;
    stack.length = depth;
    const path = (stack[depth - 1] ?? '') + m[2]!;
    stack[depth] = path;
    if (m[3] !== undefined) routes.push({ path, methods: m[3].split(', ') });
  }
  return routes;
}

/** `/api/v1/admin/projects/:project` → `/api/v1/admin/projects/{project}` (the document's form). */
const asDocumented = (path: string) => path.replace(/:(\w+)/g, '{$1}');

describe(`the document (${backend})`, () => {
  it('names the admin token as a scheme of its own, and every admin operation requires it', () => {
    expect(document.components?.securitySchemes?.adminToken).toMatchObject({
      type: 'http',
      scheme: 'bearer',
    });
    expect(document.components?.securitySchemes?.apiKey).toBeDefined();
    const admin = Object.entries(document.paths ?? {}).filter(([path]) => path.startsWith(ADMIN));
    expect(admin.length).toBeGreaterThan(10);
    for (const [path, item] of admin)
      for (const method of METHODS) {
        const op = item?.[method];
        if (op === undefined) continue;
        expect(op.security, `${method} ${path}`).toEqual([{ adminToken: [] }]);
        expect(op.operationId, `${method} ${path}`).toMatch(/^admin[A-Z]/);
        expect(Object.keys(op.responses), `${method} ${path}`).toEqual(
          expect.arrayContaining(['401', '429', '4XX']),
        );
      }
  });

  it('describes every route the server answers under /api/v1, and the server answers every one it describes', async () => {
    const routes = serverRoutes(ctx.app.printRoutes({ commonPrefix: false }));
    const api = routes.filter((r) => r.path.startsWith('/api/v1'));
    expect(api.length).toBeGreaterThan(15);
    // Aliases the document leaves out on purpose: the document itself, and a trailing slash on a
    // collection (product.md §6).
    const aliases = new Set([
      'GET /api/v1/openapi.json',
      'POST /api/v1/notifications/',
      'POST /api/v1/notifications/batch/',
    ]);
    const { apiKey } = await ctx.services.projects
      .create({ name: 'routes' })
      .then((r) => ({ apiKey: r.apiKey }));
    const undocumented: string[] = [];
    const unanswered: string[] = [];
    for (const { path, methods } of api) {
      const item = document.paths?.[asDocumented(path)];
      for (const method of methods.filter((m) => METHODS.includes(m.toLowerCase() as Method))) {
        const documented = item?.[method.toLowerCase() as Method] !== undefined;
        // Nothing is there to change: every route answers (a 404 in JSON, a 400, a 401), or says 405.
        const url = path.replace(/:\w+/g, 'absent');
        const bearer = path.startsWith(ADMIN) ? token : apiKey;
        const response = await ctx.app.inject({
          method: method as 'GET',
          url,
          headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json' },
          payload: method === 'GET' || method === 'DELETE' ? undefined : '{}',
        });
        const notFoundPage =
          response.statusCode === 404 && /html/.test(String(response.headers['content-type']));
        const answered = response.statusCode !== 405 && !notFoundPage;
        if (documented && !answered) unanswered.push(`${method} ${path} → ${response.statusCode}`);
        if (!documented && answered && !aliases.has(`${method} ${path}`))
          undocumented.push(`${method} ${path} → ${response.statusCode}`);
      }
    }
    expect(undocumented).toEqual([]);
    expect(unanswered).toEqual([]);
    // Every operation of the document is a route of the server.
    const served = new Set(api.flatMap((r) => r.methods.map((m) => `${m} ${asDocumented(r.path)}`)));
    const described = Object.entries(document.paths ?? {}).flatMap(([path, item]) =>
      METHODS.filter((m) => item?.[m] !== undefined).map((m) => `${m.toUpperCase()} ${path}`),
    );
    for (const operation of described) expect(served, operation).toContain(operation);
  });
});

describe(`a client generated from the document (${backend})`, () => {
  it('manages a project over a real socket', async () => {
    const address = await ctx.app.listen({ port: 0, host: '127.0.0.1' });
    const api = new OpenAPIClientAxios({
      definition: document as never,
      axiosConfigDefaults: { baseURL: address, headers: { authorization: `Bearer ${token}` } },
    });
    type Call = (
      params?: unknown,
      data?: unknown,
    ) => Promise<{ status: number; data: Record<string, unknown> }>;
    const client = (await api.init()) as unknown as Record<string, Call>;
    const failed = (call: Promise<unknown>) =>
      call.then(
        () => {
          throw new Error('succeeded');
        },
        (error: { response: { status: number; data: unknown } }) => error.response,
      );

    const created = await client.adminCreateProject!(null, {
      name: 'generated',
      from_email: 'no-reply@gen.example',
    });
    expect(created.status).toBe(201);
    const apiKey = String(created.data.api_key);
    expect(await failed(client.adminCreateProject!(null, { name: 'generated' }))).toMatchObject({
      status: 409,
      data: { error: 'A project named "generated" already exists' },
    });

    const put = await client.adminPutTemplate!(
      { project: 'generated', name: 'welcome' },
      {
        subject: 'Hi {{name}}',
        text: 'Hello {{name}}',
        locales: { fr: { subject: 'Salut {{name}}', text: 'Bonjour' } },
      },
    );
    expect(put).toMatchObject({ status: 201, data: { version: 1, outcome: 'created' } });
    expect(
      (
        await client.adminPutTemplate!(
          { project: 'generated', name: 'welcome' },
          { subject: 'Hi', text: 'Hello' },
        )
      ).data,
    ).toMatchObject({
      version: 2,
    });
    expect(
      (await client.adminListTemplateVersions!({ project: 'generated', name: 'welcome' })).data.versions,
    ).toHaveLength(2);
    expect(
      (await client.adminRollbackTemplate!({ project: 'generated', name: 'welcome' }, { version: 1 })).data,
    ).toMatchObject({
      version: 3,
      locales: { fr: { subject: 'Salut {{name}}' } },
    });
    expect(
      (await client.adminPutLayout!({ project: 'generated', name: 'frame' }, { text: '{{content}}' })).status,
    ).toBe(201);
    expect(
      (await client.adminAddSuppression!({ project: 'generated' }, { email: 'gone@example.org' })).status,
    ).toBe(201);
    expect(
      await client.adminAddSuppression!({ project: 'generated' }, { email: 'Gone@example.org' }),
    ).toMatchObject({ status: 200, data: { email: 'gone@example.org', reason: 'manual' } });
    expect(
      (await client.adminCreateWebhook!({ project: 'generated' }, { url: 'https://hooks.example/h' })).data
        .secret,
    ).toMatch(/^whsec_/);

    const sent = await sendOk(ctx.app, apiKey, { template: 'welcome', to: 'jane@example.org' });
    const page = await client.adminSearchNotifications!({
      project: 'generated',
      status: 'queued',
      recipient: 'jane',
    });
    expect(page.data).toEqual({
      notifications: [expect.objectContaining({ request_id: sent.request_id })],
      next_before: null,
    });

    const deleted = await client.adminDeleteProject!({ project: 'generated', force: 'true' });
    expect(deleted.data).toMatchObject({ deleted: true, name: 'generated' });
    expect(await failed(client.adminGetProject!({ project: 'generated' }))).toMatchObject({ status: 404 });
  });
});
