import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance } from 'fastify';
import type { TSchema } from 'typebox';
import { ErrorCode, HeraldError } from '../domain/errors.js';
import { layoutJson, templateJson, versionJson } from '../services/json-views.js';
import type { Project } from '../services/projects.js';
import type { AdminDeps } from './admin-deps.js';
import {
  ADMIN_ERRORS,
  adminGroup,
  answers,
  SMALL_BODY_LIMIT,
  Layout,
  LayoutList,
  LayoutPutBody,
  NOT_FOUND,
  ProjectParams,
  RollbackBody,
  Template,
  TemplateDeleted,
  TemplateList,
  TemplateParams,
  TemplatePut,
  TemplateRollback,
  TemplatePutBody,
  TemplateVersions,
} from './admin-schemas.js';
import { errorMeaning } from './schemas.js';

/**
 * A whole template may carry its default variant and up to 100 locale variants, each with an HTML
 * body of up to 512 KiB; a deploy of a template is one request, so its body may be large.
 */
export const TEMPLATE_BODY_LIMIT = 8 * 1024 * 1024;
/** A layout: an HTML frame of up to 512 KiB and a text frame of up to 256 KiB, as JSON. */
export const LAYOUT_BODY_LIMIT = 2 * 1024 * 1024;

const INVALID_TEMPLATE = errorMeaning(
  'The content is refused, nothing was saved: `Invalid template: <part>, line L, column C: …` for one that ' +
    'does not parse, or the limit or name that is not met.',
);

const templates = adminGroup('templates');
const layouts = adminGroup('layouts');

/** A kind of thing a project names: its word in paths and lists, its schemas, what getting one answers. */
interface NamedKind {
  readonly plural: string;
  readonly list: TSchema;
  readonly item: TSchema;
  readonly getSummary: string;
}

const TEMPLATES: NamedKind = {
  plural: 'templates',
  list: TemplateList,
  item: Template,
  getSummary: 'A template, with its locale variants and layout',
};
const LAYOUTS: NamedKind = { plural: 'layouts', list: LayoutList, item: Layout, getSummary: 'A layout' };

const projectId = (request: { adminProject: Project | null }) => (request.adminProject as Project).id;

/**
 * `GET /projects/:project/<plural>`, a project's things of one kind as `{ <plural>: […] }`, and
 * `GET …/<plural>/:name`, one of them: operations `adminList<Plural>` and `adminGet<Thing>`, in the
 * kind's group, a 404 naming the project or the thing.
 */
function listAndGet<T>(
  app: FastifyInstance,
  kind: NamedKind,
  service: {
    list(projectId: number): Promise<readonly T[]>;
    get(projectId: number, name: string): Promise<T>;
  },
  json: (item: T) => unknown,
): void {
  const api = app.withTypeProvider<TypeBoxTypeProvider>();
  const group = adminGroup(kind.plural);
  const thing = kind.plural.slice(0, -1);
  const Thing = thing[0]!.toUpperCase() + thing.slice(1);
  api.get(
    `/projects/:project/${kind.plural}`,
    {
      schema: group(`adminList${Thing}s`, `A project's ${kind.plural}`, {
        params: ProjectParams,
        response: answers(kind.list, 'Project'),
      }),
    },
    async (request) => ({ [kind.plural]: (await service.list(projectId(request))).map(json) }),
  );
  api.get(
    `/projects/:project/${kind.plural}/:name`,
    {
      schema: group(`adminGet${Thing}`, kind.getSummary, {
        params: TemplateParams,
        response: answers(kind.item, `Project or ${thing}`),
      }),
    },
    async (request) => json(await service.get(projectId(request), request.params.name)),
  );
}

/** Templates (with locales and versions) and layouts of a project. */
export async function adminTemplateRoutes(app: FastifyInstance, deps: AdminDeps): Promise<void> {
  const api = app.withTypeProvider<TypeBoxTypeProvider>();

  listAndGet(app, TEMPLATES, deps.templates, templateJson);

  api.put(
    '/projects/:project/templates/:name',
    {
      bodyLimit: TEMPLATE_BODY_LIMIT,
      schema: templates('adminPutTemplate', 'Create or replace a template', {
        description:
          'Sets the template to exactly this content: its default variant, its locale variants (any not ' +
          'given are removed) and its layout (none when not given). A change is one new version; the same ' +
          'content again makes none (`outcome: unchanged`), so deploying unchanged files is a no-op.',
        params: TemplateParams,
        body: TemplatePutBody,
        response: {
          ...ADMIN_ERRORS,
          200: TemplatePut,
          201: TemplatePut,
          400: INVALID_TEMPLATE,
          ...NOT_FOUND('Project'),
          409: errorMeaning('The template changed meanwhile, or was created meanwhile; try again.'),
        },
      }),
    },
    async (request, reply) => {
      const { template, outcome } = await deps.templates.put(
        projectId(request),
        request.params.name,
        request.body,
      );
      return reply.code(outcome === 'created' ? 201 : 200).send({ ...templateJson(template), outcome });
    },
  );

  api.delete(
    '/projects/:project/templates/:name',
    {
      schema: templates('adminDeleteTemplate', 'Delete a template and its versions', {
        params: TemplateParams,
        response: answers(TemplateDeleted, 'Project or template'),
      }),
    },
    async (request) => {
      await deps.templates.delete(projectId(request), request.params.name);
      return { deleted: true as const, name: request.params.name };
    },
  );

  api.get(
    '/projects/:project/templates/:name/versions',
    {
      schema: templates('adminListTemplateVersions', "A template's versions, newest first", {
        params: TemplateParams,
        response: answers(TemplateVersions, 'Project or template'),
      }),
    },
    async (request) => ({
      versions: (await deps.templates.versions(projectId(request), request.params.name)).map(versionJson),
    }),
  );

  api.post(
    '/projects/:project/templates/:name/rollback',
    {
      bodyLimit: SMALL_BODY_LIMIT,
      schema: templates(
        'adminRollbackTemplate',
        "A new version with an earlier version's content, unless current",
        {
          description: 'None when that content is the current content already (`outcome: unchanged`).',
          params: TemplateParams,
          body: RollbackBody,
          response: answers(TemplateRollback, 'Project or template'),
        },
      ),
    },
    async (request) => {
      const { template, outcome } = await deps.templates.rollback(
        projectId(request),
        request.params.name,
        request.body.version,
      );
      return { ...templateJson(template), outcome };
    },
  );

  listAndGet(app, LAYOUTS, deps.layouts, layoutJson);

  api.put(
    '/projects/:project/layouts/:name',
    {
      bodyLimit: LAYOUT_BODY_LIMIT,
      schema: layouts('adminPutLayout', 'Create or replace a layout', {
        description: 'Templates in it render with the change from then on.',
        params: TemplateParams,
        body: LayoutPutBody,
        response: {
          ...ADMIN_ERRORS,
          200: Layout,
          201: Layout,
          400: INVALID_TEMPLATE,
          ...NOT_FOUND('Project'),
        },
      }),
    },
    async (request, reply) => {
      const id = projectId(request);
      const { name } = request.params;
      const input = { html: request.body.html ?? null, text: request.body.text ?? null };
      // Another PUT may create the layout between the two: then this one updates what it made.
      for (let round = 0; ; round++) {
        try {
          return layoutJson(await deps.layouts.update(id, name, input));
        } catch (error) {
          if (!(error instanceof HeraldError && error.code === ErrorCode.LayoutNotFound)) throw error;
        }
        try {
          // Created before the status is set: a create that lost the race answers as an update.
          const created = await deps.layouts.create(id, { name, ...input });
          return reply.code(201).send(layoutJson(created));
        } catch (error) {
          if (!(error instanceof HeraldError && error.code === ErrorCode.LayoutExists) || round > 0)
            throw error;
        }
      }
    },
  );

  api.delete(
    '/projects/:project/layouts/:name',
    {
      schema: layouts('adminDeleteLayout', 'Delete a layout no template uses', {
        params: TemplateParams,
        response: {
          200: TemplateDeleted,
          ...NOT_FOUND('Project or layout'),
          409: errorMeaning('Templates use the layout; attach them elsewhere first.'),
          ...ADMIN_ERRORS,
        },
      }),
    },
    async (request) => {
      await deps.layouts.delete(projectId(request), request.params.name);
      return { deleted: true as const, name: request.params.name };
    },
  );
}
