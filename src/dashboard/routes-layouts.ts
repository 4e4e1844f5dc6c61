import type { FastifyInstance } from 'fastify';
import type { Project } from '../services/projects.js';
import {
  BODIES_FORM_LIMIT,
  formPage,
  notice,
  projectOf,
  type DashboardDeps,
  type IdParams,
  type NameParams,
} from './context.js';
import { fieldsOf, multiline, refusal, text } from './forms.js';

const NOTICES: Record<string, string> = {
  created: 'Layout created.',
  saved: 'Layout saved: templates in it render with the change.',
  deleted: 'Layout deleted.',
};

interface LayoutValues {
  readonly name: string;
  readonly html: string;
  readonly text: string;
}

const EXAMPLE: LayoutValues = {
  name: '',
  html: '<div style="font-family:sans-serif">\n  {{{content}}}\n  <p style="color:#666">{{company}}</p>\n</div>',
  text: '{{content}}\n\n-- {{company}}',
};

/** A project's layouts: the list, one form to create or change one, and deleting one no template uses. */
export async function layoutRoutes(app: FastifyInstance, deps: DashboardDeps): Promise<void> {
  const { layouts } = deps.services;

  const show = formPage(
    deps,
    'layouts',
    async (
      state: { project: Project; values: LayoutValues; editing: string | null; error?: string | null },
      request,
    ) => ({
      title: `Layouts · ${state.project.name}`,
      project: state.project,
      tab: 'templates',
      layouts: await layouts.list(state.project.id),
      values: state.values,
      editing: state.editing,
      error: state.error ?? null,
      notice: notice(request, NOTICES),
    }),
  );

  const valuesOf = (body: unknown): LayoutValues => {
    const form = fieldsOf(body);
    return { name: text(form, 'name'), html: multiline(form, 'html'), text: multiline(form, 'text') };
  };

  app.get<IdParams>('/projects/:id/layouts', async (request, reply) => {
    const project = await projectOf(deps, request.params);
    return show(request, reply, { project, values: EXAMPLE, editing: null });
  });

  app.post<IdParams>('/projects/:id/layouts', BODIES_FORM_LIMIT, async (request, reply) => {
    const project = await projectOf(deps, request.params);
    const values = valuesOf(request.body);
    try {
      await layouts.create(project.id, values);
    } catch (error) {
      return show(request, reply, { project, values, editing: null, error: refusal(error) }, 400);
    }
    return reply.redirect(`/projects/${project.id}/layouts?notice=created`, 303);
  });

  app.get<NameParams>('/projects/:id/layouts/edit/:name', async (request, reply) => {
    const project = await projectOf(deps, request.params);
    const layout = await layouts.get(project.id, request.params.name);
    const values = { name: layout.name, html: layout.html ?? '', text: layout.text ?? '' };
    return show(request, reply, { project, values, editing: layout.name });
  });

  app.post<NameParams>('/projects/:id/layouts/edit/:name', BODIES_FORM_LIMIT, async (request, reply) => {
    const project = await projectOf(deps, request.params);
    const values = { ...valuesOf(request.body), name: request.params.name };
    try {
      await layouts.update(project.id, request.params.name, { html: values.html, text: values.text });
    } catch (error) {
      return show(request, reply, { project, values, editing: values.name, error: refusal(error) }, 400);
    }
    return reply.redirect(`/projects/${project.id}/layouts?notice=saved`, 303);
  });

  app.post<NameParams>('/projects/:id/layouts/delete/:name', async (request, reply) => {
    const project = await projectOf(deps, request.params);
    try {
      await layouts.delete(project.id, request.params.name);
    } catch (error) {
      const layout = await layouts.get(project.id, request.params.name);
      const values = { name: layout.name, html: layout.html ?? '', text: layout.text ?? '' };
      return show(request, reply, { project, values, editing: layout.name, error: refusal(error) }, 400);
    }
    return reply.redirect(`/projects/${project.id}/layouts?notice=deleted`, 303);
  });
}
