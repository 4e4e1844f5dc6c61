import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { NOTIFICATION_EVENTS } from '../domain/events.js';
import type { Project } from '../services/projects.js';
import { MAX_ENDPOINTS_PER_PROJECT, type WebhookEndpoint } from '../services/webhooks.js';
import { formPage, notice, projectOf, type DashboardDeps, type IdParams } from './context.js';
import { fieldsOf, idParam, refusal, text, whole } from './forms.js';

type EndpointParams = { Params: { id: string; endpointId: string } };
type DeliveryParams = { Params: { id: string; endpointId: string; deliveryId: string } };

/** Deliveries per page: each carries its attempts (up to HERALD_WEBHOOK_MAX_ATTEMPTS of them). */
const DELIVERY_PAGE = 25;

const NOTICES: Record<string, string> = {
  enabled: 'Endpoint enabled. New events go to it again, and deliveries that were waiting go out.',
  disabled: 'Endpoint disabled. It gets no new events; its pending deliveries wait until it is enabled.',
  deleted: 'Endpoint deleted, with its delivery history.',
  test: 'Test event queued. This page updates by itself when it has been delivered.',
  'test-waiting':
    'A test event is already waiting for this endpoint, ahead of its other deliveries; no second one was queued. This page updates by itself when it has been delivered.',
  replayed: 'Replay queued: the same event, with the same webhook-id, goes out again.',
};

/** The values of a repeated form field (checkboxes): `fieldsOf` keeps only the first. */
function checked(body: unknown, name: string): string[] {
  if (typeof body !== 'object' || body === null) return [];
  const value = (body as Record<string, unknown>)[name];
  return (Array.isArray(value) ? value : [value]).filter((v): v is string => typeof v === 'string');
}

interface CreateValues {
  readonly url: string;
  readonly events: readonly string[];
}

/**
 * A project's webhook endpoints (product.md §5): list, create (the secret shown once), enable,
 * disable, delete, a test event, and each endpoint's deliveries with every attempt and a replay.
 * Every endpoint is looked up within the project of the URL, so another project's id is a 404.
 */
export async function webhookRoutes(app: FastifyInstance, deps: DashboardDeps): Promise<void> {
  const { webhooks } = deps.services;

  const listPage = formPage(
    deps,
    'webhooks',
    async (
      state: {
        project: Project;
        values?: CreateValues;
        error?: string;
        created?: { endpoint: WebhookEndpoint; secret: string };
      },
      request,
    ) => ({
      title: `Webhooks · ${state.project.name}`,
      project: state.project,
      tab: 'webhooks',
      endpoints: state.created === undefined ? await webhooks.list(state.project.id) : [],
      events: NOTIFICATION_EVENTS,
      maxEndpoints: MAX_ENDPOINTS_PER_PROJECT,
      values: state.values ?? { url: '', events: [] },
      created: state.created ?? null,
      error: state.error ?? null,
      notice: notice(request, NOTICES),
    }),
  );

  const endpointPage = formPage(
    deps,
    'webhook-deliveries',
    async (state: { project: Project; endpointId: number; error?: string }, request) => {
      const { project } = state;
      const endpoint = await webhooks.get(project.id, state.endpointId);
      const before = whole(fieldsOf(request.query).before);
      const rows = await webhooks.deliveries(project.id, endpoint.id, {
        limit: DELIVERY_PAGE + 1,
        ...(before !== undefined && { before }),
      });
      const shown = rows.slice(0, DELIVERY_PAGE);
      const paged = before !== undefined;
      // The newest page follows deliveries that are still under way, like a queued message's page.
      const waiting = !paged && shown.some((d) => d.state === 'pending' || d.state === 'sending');
      // "Queued" is only said while it is true; once delivered, the attempts say the rest.
      const said = notice(request, NOTICES);
      const stale =
        !waiting && (said === NOTICES.test || said === NOTICES['test-waiting'] || said === NOTICES.replayed);
      return {
        title: `Webhook deliveries · ${project.name}`,
        project,
        tab: 'webhooks',
        endpoint,
        deliveries: shown,
        paged,
        nextBefore: rows.length > DELIVERY_PAGE ? shown[shown.length - 1]?.id : null,
        waiting,
        error: state.error ?? null,
        notice: stale ? null : said,
      };
    },
  );

  /** The project of the URL, then the endpoint within it: a 404 page when either is not there. */
  const scoped = async (params: { id: string; endpointId: string }) => {
    const project = await projectOf(deps, params);
    const endpoint = await webhooks.get(project.id, idParam(params.endpointId));
    return { project, endpoint };
  };

  const base = (project: Project) => `/projects/${project.id}/webhooks`;

  app.get<IdParams>('/projects/:id/webhooks', async (request, reply) =>
    listPage(request, reply, { project: await projectOf(deps, request.params) }),
  );

  app.post<IdParams>('/projects/:id/webhooks', async (request, reply) => {
    const project = await projectOf(deps, request.params);
    const values = { url: text(fieldsOf(request.body), 'url'), events: checked(request.body, 'events') };
    let created: { endpoint: WebhookEndpoint; secret: string };
    try {
      // No box ticked: no filter, every event (an empty list would be refused as naming none).
      created = await webhooks.create(project.id, {
        url: values.url,
        ...(values.events.length > 0 && { events: values.events }),
      });
    } catch (error) {
      return listPage(request, reply, { project, values, error: refusal(error, 'PROJECT_NOT_FOUND') }, 400);
    }
    // The secret is in this response only: never in a URL, a cookie or a page shown later.
    return listPage(request, reply, { project, created }, 201);
  });

  app.get<EndpointParams>('/projects/:id/webhooks/:endpointId', async (request, reply) => {
    const project = await projectOf(deps, request.params);
    return endpointPage(request, reply, { project, endpointId: idParam(request.params.endpointId) });
  });

  for (const [action, enabled] of [
    ['enable', true],
    ['disable', false],
  ] as const) {
    app.post<EndpointParams>(`/projects/:id/webhooks/:endpointId/${action}`, async (request, reply) => {
      const { project, endpoint } = await scoped(request.params);
      await webhooks.setEnabled(project.id, endpoint.id, enabled);
      // Back where the button was: the endpoint's own page, or the list.
      const back = text(fieldsOf(request.body), 'back') === 'endpoint' ? `/${endpoint.id}` : '';
      return reply.redirect(`${base(project)}${back}?notice=${enabled ? 'enabled' : 'disabled'}`, 303);
    });
  }

  app.post<EndpointParams>('/projects/:id/webhooks/:endpointId/delete', async (request, reply) => {
    const { project, endpoint } = await scoped(request.params);
    await webhooks.delete(project.id, endpoint.id);
    return reply.redirect(`${base(project)}?notice=deleted`, 303);
  });

  /** A disabled endpoint is not called: a test or replay would wait, pending, until it is enabled. */
  const refuseDisabled = (
    request: FastifyRequest,
    reply: FastifyReply,
    project: Project,
    endpoint: WebhookEndpoint,
  ) =>
    endpointPage(
      request,
      reply,
      {
        project,
        endpointId: endpoint.id,
        error: 'This endpoint is disabled. Enable it first: a disabled endpoint is not called.',
      },
      400,
    );

  app.post<EndpointParams>('/projects/:id/webhooks/:endpointId/test', async (request, reply) => {
    const { project, endpoint } = await scoped(request.params);
    if (!endpoint.enabled) return refuseDisabled(request, reply, project, endpoint);
    const queued = await webhooks.sendTest(project.id, endpoint.id);
    return reply.redirect(`${base(project)}/${endpoint.id}?notice=${queued ? 'test' : 'test-waiting'}`, 303);
  });

  app.post<DeliveryParams>(
    '/projects/:id/webhooks/:endpointId/deliveries/:deliveryId/replay',
    async (request, reply) => {
      const { project, endpoint } = await scoped(request.params);
      if (!endpoint.enabled) return refuseDisabled(request, reply, project, endpoint);
      await webhooks.replay(project.id, endpoint.id, idParam(request.params.deliveryId));
      return reply.redirect(`${base(project)}/${endpoint.id}?notice=replayed`, 303);
    },
  );
}
