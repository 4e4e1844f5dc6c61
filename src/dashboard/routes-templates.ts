import type { FastifyInstance } from 'fastify';
import { parseGivenMailbox } from '../domain/address.js';
import type { Project } from '../services/projects.js';
import { TEMPLATE_LIMITS, type Template } from '../services/templates.js';
import {
  BODIES_FORM_LIMIT,
  formPage,
  fragment,
  isHtmx,
  notice,
  page,
  projectOf,
  type DashboardDeps,
  type IdParams,
  type NameParams,
} from './context.js';
import {
  fieldsOf,
  idParam,
  multiline,
  parseSampleData,
  refusal,
  sampleDataFor,
  text,
  type Fields,
} from './forms.js';
import { previewTemplate } from '../services/template-preview.js';
import { canonicalLocale } from '../domain/template/locale.js';

const NOTICES: Record<string, string> = {
  created: 'Template created.',
  saved: 'Template saved.',
  deleted: 'Template deleted.',
};

export interface EditorValues {
  readonly name: string;
  readonly subject: string;
  readonly text: string;
  readonly html: string;
  readonly data: string;
  /** The layout's name; '' for none. */
  readonly layout: string;
  /** The variant edited: '' for the default, else its BCP 47 tag. */
  readonly locale: string;
}

interface Preview {
  readonly error: string | null;
  readonly subject: string;
  readonly text: string;
  readonly html: string | null;
  readonly placeholders: string[];
  /** Placeholders the sample data leaves blank. */
  readonly blank: string[];
}

function valuesOf(form: Fields): EditorValues {
  return {
    name: text(form, 'name'),
    subject: text(form, 'subject'),
    text: multiline(form, 'text'),
    html: multiline(form, 'html'),
    data: multiline(form, 'data'),
    layout: text(form, 'layout'),
    locale: text(form, 'locale').trim(),
  };
}

/** The editor's values for one variant of a saved template; a variant not there yet starts from the default. */
function templateValues(template: Template, locale: string): EditorValues {
  const variant = locale === '' ? template : (template.locales[locale] ?? template);
  return {
    name: template.name,
    subject: variant.subject,
    text: variant.text,
    html: variant.html ?? '',
    data: template.sampleData ?? sampleDataFor(template.placeholders),
    layout: template.layout ?? '',
    locale,
  };
}

export async function templateRoutes(app: FastifyInstance, deps: DashboardDeps): Promise<void> {
  const { projects, templates, layouts, accept } = deps.services;

  /** Renders unsaved template text with the sample data in its layout, exactly as delivery would. */
  const preview = async (project: Project, values: EditorValues): Promise<Preview> => {
    const parsed = parseSampleData(values.data);
    let layout = null;
    try {
      layout = await templates.layoutSource(project.id, values.layout);
    } catch (error) {
      return { subject: '', text: '', html: null, placeholders: [], blank: [], error: refusal(error) };
    }
    // A part as it is stored is held to no rule it was saved before, as a save of it is not.
    const saved = await templates.storedVariant(project.id, values.name, values.locale);
    const rendered = previewTemplate(
      { subject: values.subject, text: values.text, html: values.html },
      'data' in parsed ? parsed.data : {},
      layout,
      saved,
    );
    return { ...rendered, error: 'error' in parsed ? parsed.error : rendered.error };
  };

  const editor = formPage(
    deps,
    'template-edit',
    async (
      state: {
        project: Project;
        mode: 'new' | 'edit';
        values: EditorValues;
        error?: string | null;
        testError?: string | null;
        /** The test email's recipient as typed; the project's contact address until then. */
        testTo?: string;
        updatedAt?: number | null;
        template?: Template | null;
        /** Adding a locale variant: the editor asks for its tag. */
        newLocale?: boolean;
      },
      request,
    ) => ({
      title: state.mode === 'new' ? 'New template' : `Template ${state.values.name}`,
      project: state.project,
      tab: 'templates',
      mode: state.mode,
      values: state.values,
      preview: await preview(state.project, state.values),
      layouts: await layouts.list(state.project.id),
      template: state.template ?? null,
      newLocale: state.newLocale ?? false,
      limits: TEMPLATE_LIMITS,
      error: state.error ?? null,
      testError: state.testError ?? null,
      testTo: state.testTo ?? state.project.contactEmail ?? '',
      updatedAt: state.updatedAt ?? null,
      notice: notice(request, NOTICES),
    }),
  );

  app.get<IdParams>('/projects/:id/templates', async (request, reply) => {
    const project = await projectOf(deps, request.params);
    return page(request, reply, deps, 'templates', {
      title: `Templates · ${project.name}`,
      project,
      tab: 'templates',
      templates: await templates.list(project.id),
      notice: notice(request, NOTICES),
    });
  });

  app.get<IdParams>('/projects/:id/templates/new', async (request, reply) => {
    const project = await projectOf(deps, request.params);
    // "Create this template" on a message that failed with Template not found fills the name in.
    const { name } = fieldsOf(request.query);
    const values = {
      name: name !== undefined && name.length <= TEMPLATE_LIMITS.name ? name : '',
      subject: 'Welcome, {{user_name}}',
      text: 'Hello {{user_name}},\n\nYour account is ready.\n',
      html: '',
      data: '{\n  "user_name": "Jane"\n}',
      layout: '',
      locale: '',
    };
    return editor(request, reply, { project, mode: 'new', values });
  });

  app.post<IdParams>('/projects/:id/templates', BODIES_FORM_LIMIT, async (request, reply) => {
    const project = await projectOf(deps, request.params);
    const values = valuesOf(fieldsOf(request.body));
    try {
      const created = await templates.create(project.id, {
        ...values,
        locale: '',
        layout: values.layout || null,
        sampleData: values.data,
      });
      return reply.redirect(
        `/projects/${project.id}/templates/edit/${encodeURIComponent(created.name)}?notice=created`,
        303,
      );
    } catch (error) {
      return editor(request, reply, { project, mode: 'new', values, error: refusal(error) }, 400);
    }
  });

  // Live preview: htmx posts the editor form here as the user types and swaps in the fragment;
  // without JavaScript the Preview button posts here and gets the whole editor back.
  app.post<IdParams>('/projects/:id/templates/preview', BODIES_FORM_LIMIT, async (request, reply) => {
    const project = await projectOf(deps, request.params);
    const form = fieldsOf(request.body);
    const values = valuesOf(form);
    if (isHtmx(request))
      return fragment(request, reply, 'partials/preview', { preview: await preview(project, values) });
    return editor(request, reply, { project, mode: form.mode === 'edit' ? 'edit' : 'new', values });
  });

  app.get<NameParams>('/projects/:id/templates/edit/:name', async (request, reply) => {
    const project = await projectOf(deps, request.params);
    const template = await templates.get(project.id, request.params.name);
    const asked = fieldsOf(request.query).locale ?? '';
    const newLocale = asked === 'new';
    // A tag in any case opens its variant (`FR` is `fr`); anything else the default, so a save
    // never writes into a variant the page did not show.
    const locale = newLocale || asked === '' ? '' : (canonicalLocale(asked) ?? '');
    return editor(request, reply, {
      project,
      mode: 'edit',
      values: templateValues(template, locale),
      updatedAt: template.updatedAt,
      template,
      newLocale,
    });
  });

  app.post<NameParams>('/projects/:id/templates/edit/:name', BODIES_FORM_LIMIT, async (request, reply) => {
    const project = await projectOf(deps, request.params);
    const values = { ...valuesOf(fieldsOf(request.body)), name: request.params.name };
    let saved: Template;
    try {
      // The editor fills the box with a generated sample when none is saved: posted back as it
      // was, it is no sample data of the user's, and saving it would count as a change.
      const current = await templates.get(project.id, request.params.name);
      const generated = current.sampleData === null && values.data === sampleDataFor(current.placeholders);
      saved = await templates.update(project.id, request.params.name, {
        ...values,
        sampleData: generated ? undefined : values.data,
      });
    } catch (error) {
      const template = await templates.get(project.id, request.params.name);
      return editor(
        request,
        reply,
        { project, mode: 'edit', values, error: refusal(error, 'TEMPLATE_NOT_FOUND'), template },
        400,
      );
    }
    const variant = Object.keys(saved.locales).find(
      (tag) => tag.toLowerCase() === values.locale.toLowerCase(),
    );
    const query = variant === undefined ? '' : `&locale=${encodeURIComponent(variant)}`;
    return reply.redirect(
      `/projects/${project.id}/templates/edit/${encodeURIComponent(request.params.name)}?notice=saved${query}`,
      303,
    );
  });

  app.post<NameParams>('/projects/:id/templates/delete/:name', async (request, reply) => {
    const project = await projectOf(deps, request.params);
    const locale = text(fieldsOf(request.body), 'locale');
    if (locale !== '') {
      await templates.deleteVariant(project.id, request.params.name, locale);
      return reply.redirect(
        `/projects/${project.id}/templates/edit/${encodeURIComponent(request.params.name)}?notice=saved`,
        303,
      );
    }
    await templates.delete(project.id, request.params.name);
    return reply.redirect(`/projects/${project.id}/templates?notice=deleted`, 303);
  });

  // A test send goes through the real pipeline: accepted like an API request (it uses quota),
  // delivered by the worker with the saved template, and shown in the delivery log.
  app.post<NameParams>('/projects/:id/templates/test/:name', BODIES_FORM_LIMIT, async (request, reply) => {
    const row = await projects.resolve(idParam(request.params.id));
    const project = await projects.get(row.id);
    const template = await templates.get(row.id, request.params.name);
    const form = fieldsOf(request.body);
    // The editor comes back with the saved variant the test was sent from and the sample data
    // and recipient as typed: the test form carries only those.
    const testTo = text(form, 'to').trim();
    // The page's variant, checked as the API checks a send's locale.
    const asked = text(form, 'locale').trim();
    const locale = asked === '' ? '' : canonicalLocale(asked);
    const values = {
      ...templateValues(template, locale ?? ''),
      data: multiline(form, 'data'),
    };
    const fail = (message: string) =>
      editor(
        request,
        reply,
        {
          project,
          mode: 'edit',
          values,
          testError: message,
          testTo,
          updatedAt: template.updatedAt,
          template,
        },
        400,
      );

    if (locale === null)
      return fail('That is not a locale: the test email goes in a variant the template has.');
    if (testTo === '') return fail('Enter the address to send the test email to.');
    const to = parseGivenMailbox(testTo);
    if (to === null) return fail('The recipient is not an email address: enter one such as you@example.org.');
    const data = parseSampleData(values.data);
    if ('error' in data) return fail(data.error);
    const outcome = await accept.accept({
      project: row,
      sends: {
        template: template.name,
        to,
        data: data.data,
        type: 'email',
        sendAt: null,
        locale: values.locale === '' ? null : values.locale,
      },
    });
    if (outcome.kind === 'quota_exceeded') return fail('The project has used up its quota for this period.');
    if (outcome.kind !== 'accepted') return fail('The test email could not be queued.');
    return reply.redirect(`/messages/${encodeURIComponent(outcome.body.request_id)}?notice=test`, 303);
  });
}
