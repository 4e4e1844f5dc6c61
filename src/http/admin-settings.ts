import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance } from 'fastify';
import { errors } from '../domain/errors.js';
import { endpointJson, relayStatusJson, smtpJson } from '../services/json-views.js';
import type { Project } from '../services/projects.js';
import { suppressionView } from '../services/suppressions.js';
import type { AdminDeps } from './admin-deps.js';
import {
  adminGroup,
  answers,
  createdAnswers,
  SMALL_BODY_LIMIT,
  PageQuery,
  ProjectParams,
  Smtp,
  SmtpCleared,
  SmtpPutBody,
  SmtpShow,
  SuppressionAddBody,
  Suppression,
  SuppressionList,
  SuppressionParams,
  SuppressionRemoved,
  WebhookCreateBody,
  WebhookCreated,
  WebhookDeleted,
  WebhookList,
  WebhookParams,
} from './admin-schemas.js';

/** `limit` and `offset` of a page: whole numbers in range, or the error naming the parameter. */
export function pageNumber(
  raw: string | undefined,
  name: string,
  min: number,
  max: number,
  fallback: number,
): number {
  if (raw === undefined) return fallback;
  // Up to 16 digits: every safe integer (a larger one fails the range, with its message).
  const n = /^\d{1,16}$/.test(raw) ? Number(raw) : NaN;
  if (!(n >= min && n <= max))
    throw errors.invalidField(`Invalid '${name}' (a whole number from ${min} to ${max})`);
  return n;
}

const MAX_SUPPRESSION_PAGE = 1000;

/** A project's SMTP relay, suppression list and webhook endpoints. */
export async function adminSettingsRoutes(app: FastifyInstance, deps: AdminDeps): Promise<void> {
  const api = app.withTypeProvider<TypeBoxTypeProvider>();
  const project = (request: { adminProject: Project | null }) => (request.adminProject as Project).id;
  const smtp = adminGroup('smtp');
  const suppressions = adminGroup('suppressions');
  const webhooks = adminGroup('webhooks');

  api.get(
    '/projects/:project/smtp',
    {
      schema: smtp('adminGetSmtp', "A project's SMTP settings and whether its relays are up", {
        params: ProjectParams,
        response: answers(SmtpShow, 'Project'),
      }),
    },
    async (request) => {
      const view = await deps.smtpSettings.get(project(request));
      const relays = (await deps.smtpSettings.relays(project(request))).map(relayStatusJson);
      return view === null ? { configured: false, relays } : { configured: true, ...smtpJson(view), relays };
    },
  );

  api.put(
    '/projects/:project/smtp',
    {
      bodyLimit: SMALL_BODY_LIMIT,
      schema: smtp('adminPutSmtp', "Set a project's SMTP relay", {
        description:
          'The password goes in the URL and is stored encrypted; it is never shown. A fallback relay takes ' +
          'the next attempt after a transient failure of the primary, and every attempt while it is down.',
        params: ProjectParams,
        body: SmtpPutBody,
        response: answers(Smtp, 'Project'),
      }),
    },
    async (request) => {
      const { url, fallback_url, from_email, from_name } = request.body;
      return smtpJson(
        await deps.smtpSettings.setFromUrl(project(request), url, {
          fallbackUrl: fallback_url ?? null,
          fromEmail: from_email ?? null,
          fromName: from_name ?? null,
        }),
      );
    },
  );

  api.delete(
    '/projects/:project/smtp',
    {
      schema: smtp('adminDeleteSmtp', "Remove a project's SMTP relay (Herald's default applies again)", {
        params: ProjectParams,
        response: answers(SmtpCleared, 'Project'),
      }),
    },
    async (request) => ({ cleared: await deps.smtpSettings.clear(project(request)) }),
  );

  api.get(
    '/projects/:project/suppressions',
    {
      schema: suppressions('adminListSuppressions', "A project's suppressed addresses, newest first", {
        params: ProjectParams,
        querystring: PageQuery,
        response: answers(SuppressionList, 'Project'),
      }),
    },
    async (request) => {
      const limit = pageNumber(request.query.limit, 'limit', 1, MAX_SUPPRESSION_PAGE, 100);
      const offset = pageNumber(request.query.offset, 'offset', 0, 1_000_000_000, 0);
      const rows = await deps.suppressions.list(project(request), { limit: limit + 1, offset });
      return {
        suppressions: rows.slice(0, limit).map(suppressionView),
        next_offset: rows.length > limit ? offset + limit : null,
      };
    },
  );

  api.post(
    '/projects/:project/suppressions',
    {
      bodyLimit: SMALL_BODY_LIMIT,
      schema: suppressions('adminAddSuppression', 'Stop mailing an address (reason: manual)', {
        description:
          'A new address answers `201` with its entry. One already on the list, in any spelling, keeps ' +
          'its entry (its reason, time and detail) and answers `200` with it as it stands.',
        params: ProjectParams,
        body: SuppressionAddBody,
        response: { 200: Suppression, ...createdAnswers(Suppression, 'Project') },
      }),
    },
    async (request, reply) => {
      const { entry, created } = await deps.suppressions.add(project(request), request.body.email);
      return reply.code(created ? 201 : 200).send(suppressionView(entry));
    },
  );

  api.delete(
    '/projects/:project/suppressions/:email',
    {
      schema: suppressions('adminRemoveSuppression', 'Mail an address again', {
        params: SuppressionParams,
        response: answers(SuppressionRemoved, 'Project or address'),
      }),
    },
    async (request) => ({
      removed: true as const,
      email: await deps.suppressions.remove(project(request), request.params.email),
    }),
  );

  api.get(
    '/projects/:project/webhooks',
    {
      schema: webhooks('adminListWebhooks', "A project's webhook endpoints", {
        params: ProjectParams,
        response: answers(WebhookList, 'Project'),
      }),
    },
    async (request) => ({ webhooks: (await deps.webhooks.list(project(request))).map(endpointJson) }),
  );

  api.post(
    '/projects/:project/webhooks',
    {
      bodyLimit: SMALL_BODY_LIMIT,
      schema: webhooks('adminCreateWebhook', 'Add a webhook endpoint', {
        description: 'Its whsec_ signing secret is in this answer only.',
        params: ProjectParams,
        body: WebhookCreateBody,
        response: createdAnswers(WebhookCreated, 'Project'),
      }),
    },
    async (request, reply) => {
      const { endpoint, secret } = await deps.webhooks.create(project(request), {
        url: request.body.url,
        ...(request.body.events !== undefined && { events: request.body.events }),
      });
      return reply.code(201).send({ ...endpointJson(endpoint), secret });
    },
  );

  api.delete(
    '/projects/:project/webhooks/:id',
    {
      schema: webhooks('adminDeleteWebhook', 'Remove a webhook endpoint and its delivery history', {
        params: WebhookParams,
        response: answers(WebhookDeleted, 'Project or endpoint'),
      }),
    },
    async (request) => {
      const endpoint = await deps.webhooks.get(project(request), request.params.id);
      await deps.webhooks.delete(project(request), endpoint.id);
      return { deleted: true as const, id: endpoint.id };
    },
  );
}
