import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance } from 'fastify';
import type { Static } from 'typebox';
import { iso, projectJson } from '../services/json-views.js';
import type { Project, ProjectInput } from '../services/projects.js';
import type { AdminDeps } from './admin-deps.js';
import {
  ADMIN_ERRORS,
  adminGroup,
  answers,
  SMALL_BODY_LIMIT,
  DeleteProjectQuery,
  KeyRotated,
  NOT_FOUND,
  ProjectCreateBody,
  ProjectCreated,
  ProjectDeleted,
  ProjectDetail,
  ProjectList,
  ProjectParams,
  ProjectUpdateBody,
  Project as ProjectBody,
} from './admin-schemas.js';
import { errorMeaning } from './schemas.js';

/** A project's fields as the API takes them, into the service's input (quota: a number or "unlimited"). */
function projectInput(body: Static<typeof ProjectUpdateBody>): ProjectInput {
  const quotaLimit = body.quota === 'unlimited' ? null : body.quota;
  return {
    ...(body.name !== undefined && { name: body.name }),
    ...(body.contact_email !== undefined && { contactEmail: body.contact_email }),
    ...(body.from_email !== undefined && { fromEmail: body.from_email }),
    ...(body.from_name !== undefined && { fromName: body.from_name }),
    ...(quotaLimit !== undefined && { quotaLimit }),
    ...(body.quota_period !== undefined && { quotaPeriod: body.quota_period as ProjectInput['quotaPeriod'] }),
  };
}

const schema = adminGroup('projects');

/** Projects: list, create, read, change, delete, and a new API key. */
export async function adminProjectRoutes(app: FastifyInstance, deps: AdminDeps): Promise<void> {
  const api = app.withTypeProvider<TypeBoxTypeProvider>();
  const { projects, notifications } = deps;
  const project = (request: { adminProject: Project | null }) => request.adminProject as Project;

  api.get(
    '/projects',
    {
      schema: schema('adminListProjects', 'List projects', {
        response: { 200: ProjectList, ...ADMIN_ERRORS },
      }),
    },
    async () => ({ projects: (await projects.list()).map(projectJson) }),
  );

  api.post(
    '/projects',
    {
      bodyLimit: SMALL_BODY_LIMIT,
      schema: schema('adminCreateProject', 'Create a project and its API key', {
        description: 'The API key is in this answer only; only a hash of it is kept.',
        body: ProjectCreateBody,
        response: {
          201: ProjectCreated,
          409: errorMeaning('A project with this name exists.'),
          ...ADMIN_ERRORS,
        },
      }),
    },
    async (request, reply) => {
      const created = await projects.create({ ...projectInput(request.body), name: request.body.name });
      request.adminProject = created.project;
      return reply.code(201).send({ ...projectJson(created.project), api_key: created.apiKey });
    },
  );

  api.get(
    '/projects/:project',
    {
      schema: schema('adminGetProject', 'A project and its quota now', {
        params: ProjectParams,
        response: answers(ProjectDetail, 'Project'),
      }),
    },
    async (request) => {
      const row = await projects.resolve(project(request).id);
      const quota = await notifications.quota(row);
      return {
        ...projectJson(project(request)),
        quota_used: quota?.used ?? null,
        quota_reset: quota === null ? null : iso(quota.reset * 1000),
      };
    },
  );

  api.patch(
    '/projects/:project',
    {
      bodyLimit: SMALL_BODY_LIMIT,
      schema: schema('adminUpdateProject', 'Change a project', {
        params: ProjectParams,
        body: ProjectUpdateBody,
        response: {
          200: ProjectBody,
          ...NOT_FOUND('Project'),
          409: errorMeaning('Another project has this name.'),
          ...ADMIN_ERRORS,
        },
      }),
    },
    async (request) => projectJson(await projects.update(project(request).id, projectInput(request.body))),
  );

  api.delete(
    '/projects/:project',
    {
      schema: schema('adminDeleteProject', 'Delete a project and everything of it', {
        description:
          'Deletes the project, its API key (refused at once), templates, layouts, SMTP settings, webhook ' +
          'endpoints, suppression list and its notifications with their history. API and audit log entries ' +
          'stay. Refused (409) while mail of the project is queued or being sent, unless `force=true`: then ' +
          'queued mail is never sent.',
        params: ProjectParams,
        querystring: DeleteProjectQuery,
        response: {
          200: ProjectDeleted,
          ...NOT_FOUND('Project'),
          409: errorMeaning('Mail of the project is queued or being sent (see `force`).'),
          ...ADMIN_ERRORS,
        },
      }),
    },
    async (request) => {
      const deleted = await projects.delete(project(request).id, { force: request.query.force === 'true' });
      return { deleted: true as const, id: deleted.id, name: deleted.name };
    },
  );

  api.post(
    '/projects/:project/rotate-key',
    {
      schema: schema('adminRotateProjectKey', "Replace a project's API key", {
        description: 'The old key is refused once this answers; the new one is in this answer only.',
        params: ProjectParams,
        response: answers(KeyRotated, 'Project'),
      }),
    },
    async (request) => {
      const { project: rotated, apiKey } = await projects.rotateKey(project(request).id);
      return { id: rotated.id, name: rotated.name, key_prefix: rotated.keyPrefix, api_key: apiKey };
    },
  );
}
