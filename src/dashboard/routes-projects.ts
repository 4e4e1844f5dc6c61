import type { FastifyInstance } from 'fastify';
import { checkQuotaPeriod, MAX_QUOTA_LIMIT, parseQuotaLimit } from '../domain/quota.js';
import { chooseTransport } from '../domain/delivery-plan.js';
import { senderFor } from '../domain/sender.js';
import { errors } from '../domain/errors.js';
import type { Project, ProjectInput } from '../services/projects.js';
import type { SmtpSettingsView } from '../services/smtp-settings.js';
import { formPage, notice, page, settingsForm, type DashboardDeps } from './context.js';
import { fieldsOf, idParam, optional, refusal, text, type Fields } from './forms.js';

/** Which relay a project's messages go to, for the banners on the project and SMTP pages. */
export type TransportState = 'project' | 'global' | 'capture' | 'none';

export function transportState(deps: DashboardDeps, smtp: SmtpSettingsView | null): TransportState {
  return chooseTransport<unknown>(smtp, deps.services.globalSmtp, deps.services.config.production).kind;
}

/** Whether the project's mail has no From at all (every send fails), for the same banners. */
export function senderMissing(deps: DashboardDeps, project: Project, smtp: SmtpSettingsView | null): boolean {
  return senderFor({ project, smtp, defaultFrom: deps.services.defaultFrom }) === null;
}

const NOTICES: Record<string, string> = {
  welcome: 'Welcome to Herald. Create a project to get an API key.',
  saved: 'Project settings saved.',
  deleted: 'Project deleted; its API key no longer works.',
};
/** The welcome after setup where projects exist already (made with the CLI before it). */
const WELCOME_WITH_PROJECTS =
  'Welcome to Herald. Your projects are below; create another to get a new API key.';

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
    quotaPeriod: checkQuotaPeriod(text(form, 'quota_period') || 'month'),
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
    const shown = notice(request, NOTICES);
    return page(request, reply, deps, 'projects', {
      title: 'Projects',
      rows,
      notice: shown === NOTICES.welcome && rows.length > 0 ? WELCOME_WITH_PROJECTS : shown,
    });
  });

  const newPage = formPage(deps, 'project-new', (state: { values: Fields; error?: string }) => ({
    title: 'New project',
    values: state.values,
    error: state.error ?? null,
  }));

  app.get('/projects/new', async (request, reply) => {
    const defaults = deps.services.config.defaultQuota;
    return newPage(request, reply, {
      values: { quota: defaults.limit === null ? '' : String(defaults.limit), quota_period: defaults.period },
    });
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
        { title: project.name, project, apiKey, rotated: false, templateName: null },
        201,
      );
    } catch (error) {
      return newPage(request, reply, { values: form, error: refusal(error) }, 400);
    }
  });

  const overview = formPage(
    deps,
    'project',
    async (state: { id: number; values?: Fields; error?: string; deleteRefused?: boolean }, request) => {
      const project = await projects.get(state.id);
      const [usage, counts, recent, smtp, templates] = await Promise.all([
        deps.usage.forProject(project),
        deps.usage.totals(project.id),
        notifications.list({ projectId: project.id, limit: 5 }),
        smtpSettings.get(project.id),
        deps.services.templates.list(project.id),
      ]);
      return {
        title: project.name,
        project,
        tab: 'overview',
        usage,
        counts,
        recent,
        templateCount: templates.length,
        transport: transportState(deps, smtp),
        noSender: senderMissing(deps, project, smtp),
        values: state.values ?? formValues(project),
        error: state.error ?? null,
        deleteRefused: state.deleteRefused === true,
        notice: notice(request, NOTICES),
      };
    },
  );

  app.get<{ Params: { id: string } }>('/projects/:id', async (request, reply) =>
    overview(request, reply, { id: idParam(request.params.id) }),
  );

  settingsForm(app, '/projects/:id', (id, form) => projects.update(id, projectInput(form)), overview);

  app.post<{ Params: { id: string } }>('/projects/:id/delete', async (request, reply) => {
    const id = idParam(request.params.id);
    const form = fieldsOf(request.body);
    const project = await projects.get(id);
    if (text(form, 'confirm_name') !== project.name) {
      const error = `Type the project's name, ${project.name}, to confirm: nothing was deleted.`;
      return overview(request, reply, { id, error, deleteRefused: true }, 400);
    }
    try {
      await projects.delete(id, { force: text(form, 'force') === 'yes' });
    } catch (error) {
      // Mail of it is queued or being sent: said as the CLI and the admin API say it.
      return overview(
        request,
        reply,
        { id, error: refusal(error, 'PROJECT_NOT_FOUND'), deleteRefused: true },
        409,
      );
    }
    return reply.redirect('/projects?notice=deleted', 303);
  });

  app.post<{ Params: { id: string } }>('/projects/:id/rotate-key', async (request, reply) => {
    const id = idParam(request.params.id);
    if (text(fieldsOf(request.body), 'confirm') !== 'yes') {
      const error = 'Tick the box to confirm: the current key stops working immediately.';
      return overview(request, reply, { id, error }, 400);
    }
    const { project, apiKey } = await projects.rotateKey(id);
    // The example names a template the project has, when it has one.
    const [first] = await deps.services.templates.list(project.id);
    return page(request, reply, deps, 'project-key', {
      title: project.name,
      project,
      apiKey,
      rotated: true,
      templateName: first?.name ?? null,
    });
  });
}
