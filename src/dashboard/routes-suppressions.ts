import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { HeraldError } from '../domain/errors.js';
import type { Project } from '../services/projects.js';
import { SUPPRESSION_PAGE } from '../services/suppressions.js';
import { page, type DashboardDeps } from './context.js';
import { fieldsOf, idParam, text, whole } from './forms.js';

type IdParams = { Params: { id: string } };

const NOTICES: Record<string, string> = {
  added: 'Address added to the suppression list: mail to it now fails without being sent.',
  removed: 'Address removed from the suppression list: mail to it is sent again.',
};

function notice(request: FastifyRequest): string | null {
  const key = (request.query as Record<string, unknown>).notice;
  return typeof key === 'string' ? (NOTICES[key] ?? null) : null;
}

/** A project's suppression list (product.md §5): newest first, with add and remove. */
export async function suppressionRoutes(app: FastifyInstance, deps: DashboardDeps): Promise<void> {
  const { projects, suppressions } = deps.services;

  const listPage = async (
    request: FastifyRequest,
    reply: FastifyReply,
    project: Project,
    state: { email?: string; error?: string } = {},
    status = 200,
  ) => {
    const offset = whole(fieldsOf(request.query).offset, 0) ?? 0;
    const rows = await suppressions.list(project.id, { limit: SUPPRESSION_PAGE + 1, offset });
    return page(
      request,
      reply,
      deps,
      'suppressions',
      {
        title: `Suppressions · ${project.name}`,
        project,
        tab: 'suppressions',
        rows: rows.slice(0, SUPPRESSION_PAGE),
        offset,
        pageSize: SUPPRESSION_PAGE,
        more: rows.length > SUPPRESSION_PAGE,
        email: state.email ?? '',
        error: state.error ?? null,
        notice: notice(request),
      },
      status,
    );
  };

  /** Runs a change; a refused one (not an address, not on the list) is shown on the list page. */
  const change = async (
    request: FastifyRequest<IdParams>,
    reply: FastifyReply,
    run: (project: Project, email: string) => Promise<unknown>,
    done: 'added' | 'removed',
  ) => {
    const project = await projects.get(idParam(request.params.id));
    const email = text(fieldsOf(request.body), 'email');
    try {
      await run(project, email);
    } catch (error) {
      if (!(error instanceof HeraldError) || error.code === 'PROJECT_NOT_FOUND') throw error;
      // A refused address is given back to the add form to correct; a failed removal is not.
      const refill = done === 'added' ? email : '';
      return listPage(request, reply, project, { email: refill, error: error.message }, 400);
    }
    return reply.redirect(`/projects/${project.id}/suppressions?notice=${done}`, 303);
  };

  app.get<IdParams>('/projects/:id/suppressions', async (request, reply) =>
    listPage(request, reply, await projects.get(idParam(request.params.id))),
  );

  app.post<IdParams>('/projects/:id/suppressions', async (request, reply) =>
    change(request, reply, (project, email) => suppressions.add(project.id, email), 'added'),
  );

  app.post<IdParams>('/projects/:id/suppressions/remove', async (request, reply) =>
    change(request, reply, (project, email) => suppressions.remove(project.id, email), 'removed'),
  );
}
