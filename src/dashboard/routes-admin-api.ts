import type { FastifyInstance } from 'fastify';
import type { AdminToken } from '../services/admin-tokens.js';
import { formPage, notice, page, type DashboardDeps } from './context.js';
import { fieldsOf, refusal, text, whole } from './forms.js';

const PAGE_SIZE = 50;

const NOTICES: Record<string, string> = {
  revoked: 'Token revoked. Calls made with it are refused from now on.',
  unchanged: 'That token was revoked already: nothing changed.',
};

/** The ids of a token list, for the audit log's filter. */
const names = (tokens: readonly AdminToken[]) => new Map(tokens.map((t) => [t.id, t.name]));

/**
 * The management API's side of the dashboard: admin tokens (created and shown once, revoked with a
 * confirmation) and the audit log of every call made with them (product.md §13).
 */
export async function adminApiRoutes(app: FastifyInstance, deps: DashboardDeps): Promise<void> {
  const { adminTokens, auditLog } = deps.services;

  const tokensPage = formPage(
    deps,
    'tokens',
    async (
      state: { name?: string; error?: string; created?: { token: AdminToken; secret: string } },
      request,
    ) => ({
      title: 'Admin tokens',
      tokens: state.created === undefined ? await adminTokens.list() : [],
      name: state.name ?? '',
      created: state.created ?? null,
      error: state.error ?? null,
      notice: notice(request, NOTICES),
    }),
  );

  app.get('/tokens', async (request, reply) => tokensPage(request, reply, {}));

  app.post('/tokens', async (request, reply) => {
    const name = text(fieldsOf(request.body), 'name');
    try {
      // The token is in this response only: never in a URL, a cookie or the database.
      const created = await adminTokens.create(name);
      return tokensPage(request, reply, { created }, 201);
    } catch (error) {
      return tokensPage(request, reply, { name, error: refusal(error) }, 400);
    }
  });

  app.post<{ Params: { id: string } }>('/tokens/:id/revoke', async (request, reply) => {
    if (text(fieldsOf(request.body), 'confirm') !== 'yes') {
      const error = 'Tick the box to confirm: calls made with the token are refused at once.';
      return tokensPage(request, reply, { error }, 400);
    }
    let outcome: 'revoked' | 'unchanged';
    try {
      ({ outcome } = await adminTokens.revoke(request.params.id));
    } catch (error) {
      return tokensPage(request, reply, { error: refusal(error) }, 404);
    }
    return reply.redirect(`/tokens?notice=${outcome}`, 303);
  });

  app.get('/audit-log', async (request, reply) => {
    const q = fieldsOf(request.query);
    const tokenId = whole(q.token);
    const beforeId = whole(q.before);
    const rows = await auditLog.list({ tokenId, beforeId, limit: PAGE_SIZE + 1 });
    const shown = rows.slice(0, PAGE_SIZE);
    const filters = { token: tokenId === undefined ? '' : String(tokenId) };
    return page(request, reply, deps, 'audit-log', {
      title: 'Audit log',
      rows: shown,
      tokens: names(await adminTokens.list()),
      projects: new Map((await deps.services.projects.list()).map((p) => [p.id, p.name])),
      filters,
      filtered: filters.token !== '',
      paged: beforeId !== undefined,
      nextBefore: rows.length > PAGE_SIZE ? shown[shown.length - 1]?.id : null,
    });
  });
}
