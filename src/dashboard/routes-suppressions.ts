import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Project } from '../services/projects.js';
import { SUPPRESSION_PAGE } from '../services/suppressions.js';
import { formPage, notice, projectOf, type DashboardDeps, type IdParams } from './context.js';
import { fieldsOf, refusal, text, whole } from './forms.js';

/** What a change did: the notice the list page shows after it. */
type Done = 'added' | 'kept' | 'removed';

const NOTICES: Record<Done, string> = {
  added: 'Address added to the suppression list: mail to it now fails without being sent.',
  kept: 'Address already on the suppression list: its entry is kept as it was.',
  removed: 'Address removed from the suppression list: mail to it is sent again.',
};

/** A project's suppression list (product.md §5): newest first, with add and remove. */
export async function suppressionRoutes(app: FastifyInstance, deps: DashboardDeps): Promise<void> {
  const { suppressions } = deps.services;

  const listPage = formPage(
    deps,
    'suppressions',
    async (state: { project: Project; email?: string; error?: string }, request) => {
      const offset = whole(fieldsOf(request.query).offset, 0) ?? 0;
      const rows = await suppressions.list(state.project.id, { limit: SUPPRESSION_PAGE + 1, offset });
      return {
        title: `Suppressions · ${state.project.name}`,
        project: state.project,
        tab: 'suppressions',
        rows: rows.slice(0, SUPPRESSION_PAGE),
        offset,
        pageSize: SUPPRESSION_PAGE,
        more: rows.length > SUPPRESSION_PAGE,
        email: state.email ?? '',
        error: state.error ?? null,
        notice: notice(request, NOTICES),
      };
    },
  );

  /**
   * Runs a change, which names its notice; a refused one (not an address, not on the list) is shown
   * on the list page.
   */
  const change = async (
    request: FastifyRequest<IdParams>,
    reply: FastifyReply,
    run: (project: Project, email: string) => Promise<Done>,
    refillRefused: boolean,
  ) => {
    const project = await projectOf(deps, request.params);
    const email = text(fieldsOf(request.body), 'email');
    let done: Done;
    try {
      done = await run(project, email);
    } catch (error) {
      const message = refusal(error, 'PROJECT_NOT_FOUND');
      // A refused address is given back to the add form to correct; a failed removal is not.
      const refill = refillRefused ? email : '';
      return listPage(request, reply, { project, email: refill, error: message }, 400);
    }
    return reply.redirect(`/projects/${project.id}/suppressions?notice=${done}`, 303);
  };

  app.get<IdParams>('/projects/:id/suppressions', async (request, reply) =>
    listPage(request, reply, { project: await projectOf(deps, request.params) }),
  );

  app.post<IdParams>('/projects/:id/suppressions', async (request, reply) =>
    change(
      request,
      reply,
      async (project, email) => ((await suppressions.add(project.id, email)).created ? 'added' : 'kept'),
      true,
    ),
  );

  app.post<IdParams>('/projects/:id/suppressions/remove', async (request, reply) =>
    change(
      request,
      reply,
      async (project, email) => {
        await suppressions.remove(project.id, email);
        return 'removed';
      },
      false,
    ),
  );
}
