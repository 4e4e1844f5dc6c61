import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { isQuotaPeriod, MAX_QUOTA_LIMIT, parseQuotaLimit, type QuotaPeriod } from '../domain/quota.js';
import { chooseTransport } from '../domain/delivery-plan.js';
import { errors, HeraldError } from '../domain/errors.js';
import type { Project, ProjectInput } from '../services/projects.js';
import type { SmtpSettingsView } from '../services/smtp-settings.js';
import { page, type DashboardDeps } from './context.js';
import { fieldsOf, idParam, optional, text, type Fields } from './forms.js';

/** Which relay a project's messages go to, for the banners on the project and SMTP pages. */
export type TransportState = 'project' | 'global' | 'capture' | 'none';

export function transportState(deps: DashboardDeps, smtp: SmtpSettingsView | null): TransportState {
  return chooseTransport<unknown>(smtp, deps.services.globalSmtp, deps.services.config.production).kind;
}

const NOTICES: Record<string, string> = {
  welcome: 'Welcome to Herald. Create a project to get an API key.',
  saved: 'Project settings saved.',
};

function notice(request: FastifyRequest): string | null {
  const key = (request.query as Record<string, unknown>).notice;
  return typeof key === 'string' ? (NOTICES[key] ?? null) : null;
}

function quotaPeriod(value: string): QuotaPeriod {
  if (isQuotaPeriod(value)) return value;
  throw errors.invalidInput('Quota period must be hour, day or month');
}

/** The project form; an empty quota means unlimited. */
function projectInput(form: Fields): ProjectInput & { name: string } {
  const quota = text(form, 'quota').trim();
  // An empty field means unlimited; the word itself is not offered by the form.
  const limit = quota === '' ? null : parseQuotaLimit(quota);
  if (limit === undefined || (limit === null && quota !== ''))
    throw errors.invalidInput(`Quota must be a whole number up to ${MAX_QUOTA_LIMIT}, or empty for no limit`);
  return {
    name: text(form, 'name'),
    contactEmail: optional(form, 'contact_email'),
    fromEmail: optional(form, 'from_email'),
    fromName: optional(form, 'from_name'),
    quotaLimit: limit,
    quotaPeriod: quotaPeriod(text(form, 'quota_period') || 'month'),
  };
}

/** Form values of an existing project, to fill the edit form. */
function formValues(project: Project): Record<string, string> {
  return {
    name: project.name,
    contact_email: project.contactEmail ?? '',
    from_email: project.fromEmail ?? '',
    from_name: project.fromName ?? '',
    quota: project.quotaLimit === null ? '' : String(project.quotaLimit),
    quota_period: project.quotaPeriod,
  };
}

export async function projectRoutes(app: FastifyInstance, deps: DashboardDeps): Promise<void> {
  const { projects, notifications, smtpSettings } = deps.services;

  app.get('/projects', async (request, reply) => {
    const list = await projects.list();
    const rows = await Promise.all(
      list.map(async (project) => ({ project, usage: await deps.usage.forProject(project) })),
    );
    return page(request, reply, deps, 'projects', { title: 'Projects', rows, notice: notice(request) });
  });

  const newPage = (
    request: FastifyRequest,
    reply: FastifyReply,
    values: Fields,
    error: string | null,
    status = 200,
  ) => page(request, reply, deps, 'project-new', { title: 'New project', values, error }, status);

  app.get('/projects/new', async (request, reply) => {
    const defaults = deps.services.config.defaultQuota;
    return newPage(
      request,
      reply,
      { quota: defaults.limit === null ? '' : String(defaults.limit), quota_period: defaults.period },
      null,
    );
  });

  app.post('/projects', async (request, reply) => {
    const form = fieldsOf(request.body);
    try {
      const { project, apiKey } = await projects.create(projectInput(form));
      // The key is in this response only: never in a URL, a cookie or the database.
      return page(
        request,
        reply,
        deps,
        'project-key',
        { title: project.name, project, apiKey, rotated: false },
        201,
      );
    } catch (error) {
      if (!(error instanceof HeraldError)) throw error;
      return newPage(request, reply, form, error.message, 400);
    }
  });

  const overview = async (
    request: FastifyRequest,
    reply: FastifyReply,
    projectId: number,
    edit: { values?: Fields; error?: string } = {},
    status = 200,
  ) => {
    const project = await projects.get(projectId);
    const [usage, counts, recent, smtp, templates] = await Promise.all([
      deps.usage.forProject(project),
      deps.usage.totals(project.id),
      notifications.list({ projectId: project.id, limit: 5 }),
      smtpSettings.get(project.id),
      deps.services.templates.list(project.id),
    ]);
    return page(
      request,
      reply,
      deps,
      'project',
      {
        title: project.name,
        project,
        tab: 'overview',
        usage,
        counts,
        recent,
        templateCount: templates.length,
        transport: transportState(deps, smtp),
        values: edit.values ?? formValues(project),
        error: edit.error ?? null,
        notice: notice(request),
      },
      status,
    );
  };

  app.get<{ Params: { id: string } }>('/projects/:id', async (request, reply) =>
    overview(request, reply, idParam(request.params.id)),
  );

  app.post<{ Params: { id: string } }>('/projects/:id', async (request, reply) => {
    const id = idParam(request.params.id);
    const form = fieldsOf(request.body);
    try {
      await projects.update(id, projectInput(form));
    } catch (error) {
      if (!(error instanceof HeraldError) || error.code === 'PROJECT_NOT_FOUND') throw error;
      return overview(request, reply, id, { values: form, error: error.message }, 400);
    }
    return reply.redirect(`/projects/${id}?notice=saved`, 303);
  });

  app.post<{ Params: { id: string } }>('/projects/:id/rotate-key', async (request, reply) => {
    const id = idParam(request.params.id);
    if (text(fieldsOf(request.body), 'confirm') !== 'yes') {
      return overview(
        request,
        reply,
        id,
        { error: 'Tick the box to confirm: the current key stops working immediately.' },
        400,
      );
    }
    const { project, apiKey } = await projects.rotateKey(id);
    return page(request, reply, deps, 'project-key', { title: project.name, project, apiKey, rotated: true });
  });
}
