import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ErrorCode, HeraldError, Messages } from '../domain/errors.js';
import { metadataFilters, metadataFilterText, type MetadataFilter } from '../domain/metadata.js';
import { notificationView } from '../domain/notification.js';
import type { NotificationSearch } from '../services/notifications.js';
import { NOTIFICATION_STATES } from '../domain/notification-state.js';
import { notice, page, type DashboardDeps } from './context.js';
import { fieldsOf, utcTime, whole } from './forms.js';
import { diagnoseTemplate } from '../services/template-preview.js';

const PAGE_SIZE = 50;
/** The status codes the API answers with (spec §7 and product.md §3), offered in the filter. */
const API_STATUS_CODES = [200, 202, 400, 401, 402, 404, 405, 409, 413, 415, 422, 429, 500, 503];

/** Notices of a message's page while it waits for delivery, and once it is canceled. */
const PENDING_NOTICES: Record<string, string> = {
  test: 'Test email queued. This page updates by itself when the worker has delivered it.',
};
const CANCELED_NOTICES: Record<string, string> = {
  canceled: 'Canceled: it will not be sent. Its sender sees it as failed, with the error Canceled.',
};

/**
 * The statuses the delivery log filters by: the states, and `canceled`, the failed messages whose
 * badge says canceled (format.ts).
 */
const LOG_STATUSES = [...NOTIFICATION_STATES, 'canceled'] as const;
type LogStatus = (typeof LOG_STATUSES)[number];

function isLogStatus(value: string | undefined): value is LogStatus {
  return (LOG_STATUSES as readonly (string | undefined)[]).includes(value);
}

/** The search's conditions for a status of the filter. */
function statusSearch(status: LogStatus | undefined): Pick<NotificationSearch, 'state' | 'errorMessage'> {
  if (status === 'canceled') return { state: 'failed', errorMessage: Messages.canceled };
  return { state: status };
}

/**
 * The metadata conditions of the log's query: the form's `metadata` field (`KEY=VALUE`) and any
 * `metadata.KEY=VALUE` parameters (the admin API's spelling, for links). A condition no message
 * could match is reported, not searched for.
 */
function metadataOf(
  query: unknown,
  typed: string | undefined,
): { filters: MetadataFilter[]; error: string | null } {
  try {
    const fromText = metadataFilterText(typed ?? '');
    const params = metadataFilters((query ?? {}) as Record<string, unknown>);
    return { filters: fromText === null ? params : [fromText, ...params], error: null };
  } catch (error) {
    if (!(error instanceof HeraldError)) throw error;
    return { filters: [], error: error.message };
  }
}

/** A value of the URL quoted in a notice, cut short. */
function quoted(value: string): string {
  const characters = Array.from(value);
  return `'${characters.length > 40 ? `${characters.slice(0, 40).join('')}…` : value}'`;
}

/** True when the URL gives the filter a value (an empty form field is no filter). */
function given(value: string | undefined): value is string {
  return value !== undefined && value.trim() !== '';
}

/**
 * The project filter of a log page, by id or by name, and what is wrong with it: a name no project
 * has is left out, an id no project has is searched (old rows keep their id) and said.
 */
function projectFilter(
  value: string | undefined,
  names: ReadonlyMap<number, string>,
): { projectId: number | undefined; problem: string | null } {
  if (!given(value)) return { projectId: undefined, problem: null };
  if (!/^\d+$/.test(value)) {
    const named = [...names].find(([, name]) => name === value)?.[0];
    return named === undefined
      ? { projectId: undefined, problem: `No project is named ${quoted(value)}: showing every project.` }
      : { projectId: named, problem: null };
  }
  const projectId = whole(value);
  if (projectId === undefined)
    return { projectId, problem: `No project has the id ${quoted(value)}: showing every project.` };
  if (!names.has(projectId)) return { projectId, problem: `No project has the id ${quoted(value)}.` };
  return { projectId, problem: null };
}

/** The filters of a log page, as the page's form names them. */
const FILTER_LABELS: Readonly<Record<string, string>> = {
  project: 'Project',
  status: 'Status',
  template: 'Template',
  recipient: 'Recipient',
  metadata: 'Metadata',
  from: 'From',
  to: 'Until',
};

/** A filter given more than once in the URL: the page applies the first value (`fieldsOf`), and says so. */
function repeatedFilters(query: unknown, names: readonly string[]): string[] {
  const raw = (query ?? {}) as Record<string, unknown>;
  return names
    .filter((name) => Array.isArray(raw[name]) && raw[name].length > 1)
    .map((name) => `${FILTER_LABELS[name] ?? name} is given more than once: only the first value is used.`);
}

/** Delivery logs (every notification, newest first, keyset-paginated) and API logs. */
export async function logRoutes(app: FastifyInstance, deps: DashboardDeps): Promise<void> {
  const { projects, notifications, apiLogs, templates } = deps.services;

  const projectNames = async () => new Map((await projects.list()).map((p) => [p.id, p.name]));

  app.get('/messages', async (request, reply) => {
    const q = fieldsOf(request.query);
    const names = await projectNames();
    const metadata = metadataOf(request.query, q.metadata);
    const project = projectFilter(q.project, names);
    // A filter the page cannot apply is named, so a stale or mistyped link never passes for a
    // filtered list.
    const problems = [
      ...repeatedFilters(request.query, Object.keys(FILTER_LABELS)),
      project.problem,
      given(q.status) && !isLogStatus(q.status)
        ? `Status ${quoted(q.status)} is not one of ${LOG_STATUSES.join(', ')}: showing every status.`
        : null,
      given(q.from) && utcTime(q.from) === undefined
        ? `From ${quoted(q.from)} is not a UTC time like 2026-11-30T09:00: left out.`
        : null,
      given(q.to) && utcTime(q.to) === undefined
        ? `Until ${quoted(q.to)} is not a UTC time like 2026-11-30T09:00: left out.`
        : null,
      metadata.error,
    ].filter((problem) => problem !== null);
    const status = isLogStatus(q.status) ? q.status : undefined;
    const filter: NotificationSearch = {
      projectId: project.projectId,
      ...statusSearch(status),
      template: q.template?.trim() || undefined,
      recipient: q.recipient?.trim() || undefined,
      metadata: Object.fromEntries(metadata.filters.map(({ key, value }) => [key, value])),
      from: utcTime(q.from),
      to: utcTime(q.to),
      before: whole(q.before),
      limit: PAGE_SIZE,
    };
    const filters = {
      project: filter.projectId === undefined ? '' : String(filter.projectId),
      status: status ?? '',
      template: filter.template ?? '',
      recipient: filter.recipient ?? '',
      from: filter.from === undefined ? '' : (q.from ?? ''),
      to: filter.to === undefined ? '' : (q.to ?? ''),
      // Every condition as `metadata.KEY=VALUE`, so the next page searches the same.
      ...Object.fromEntries(metadata.filters.map(({ key, value }) => [`metadata.${key}`, value])),
    };
    // A search looks through one window of ids per page; "Older" goes on from its end.
    const found = await notifications.search(filter);
    return page(request, reply, deps, 'messages', {
      title: 'Delivery logs',
      rows: found.rows,
      names,
      states: LOG_STATUSES,
      filters,
      // The form shows the first condition as typed; the others travel in the page links.
      metadataText: metadata.filters[0]
        ? `${metadata.filters[0].key}=${metadata.filters[0].value}`
        : (q.metadata ?? ''),
      problems,
      filtered: Object.values(filters).some((v) => v !== '') || problems.length > 0,
      paged: filter.before !== undefined,
      nextBefore: found.nextBefore,
      searchedTo: found.searchedTo,
    });
  });

  /** A message's page; `error` when a cancel of it was refused (with that status). */
  const messagePage = async (
    request: FastifyRequest,
    reply: FastifyReply,
    requestId: string,
    error: string | null = null,
    status = 200,
  ) => {
    const { notification, attempts } = await notifications.detail(requestId);
    const project = await projects.get(notification.project_id);
    const revealed = (request.query as Record<string, unknown>).reveal === '1';
    const pending = notification.state === 'queued' || notification.state === 'sending';
    const erased = notification.content_erased_at !== null;
    const template = await diagnoseTemplate(templates, {
      ...notification,
      data: erased ? null : notification.data,
    });
    const content = notifications.content(
      notification,
      revealed,
      template.found ? template.rerender : undefined,
    );
    // Reply-To, metadata and the files' list, as the status body shows them.
    const { reply_to: replyTo, metadata, attachments: files } = notificationView(notification);
    return page(
      request,
      reply,
      deps,
      'message',
      {
        title: `Message ${notification.request_id}`,
        n: notification,
        replyTo: replyTo ?? null,
        metadata: metadata ?? null,
        files: files ?? [],
        attempts,
        project,
        content,
        template,
        revealed,
        pending,
        // "Queued" is only true while it is; once delivered, the page's status says the rest.
        notice: pending
          ? notice(request, PENDING_NOTICES)
          : notification.state === 'failed' && notification.error_message === Messages.canceled
            ? notice(request, CANCELED_NOTICES)
            : null,
        error,
      },
      status,
    );
  };

  app.get<{ Params: { requestId: string } }>('/messages/:requestId', (request, reply) =>
    messagePage(request, reply, request.params.requestId),
  );

  // What `DELETE /api/v1/notifications/{request_id}` does, for an operator (product.md §6).
  app.post<{ Params: { requestId: string } }>('/messages/:requestId/cancel', async (request, reply) => {
    const { requestId } = request.params;
    try {
      await notifications.cancel(requestId, 'any');
      // The API's cancels are in the API log; an operator's are said here, with who made them.
      request.log.info(
        { requestId, admin: request.dashSession?.admin.email },
        'message canceled from the dashboard',
      );
    } catch (error) {
      if (!(error instanceof HeraldError) || error.code !== ErrorCode.NotCancelable) throw error;
      const why = error.hint ?? 'it is being sent, or it was sent or failed already';
      return messagePage(request, reply, requestId, `${error.message}: ${why}.`, 409);
    }
    return reply.redirect(`/messages/${encodeURIComponent(requestId)}?notice=canceled`, 303);
  });

  app.get('/api-logs', async (request, reply) => {
    const q = fieldsOf(request.query);
    const names = await projectNames();
    const { projectId, problem } = projectFilter(q.project, names);
    const statusCode = whole(q.status, 100, 599);
    const problems = [
      ...repeatedFilters(request.query, ['project', 'status']),
      problem,
      given(q.status) && statusCode === undefined
        ? `Status code ${quoted(q.status)} is not an HTTP status code (100–599): showing every code.`
        : null,
    ].filter((text) => text !== null);
    const beforeId = whole(q.before);
    const rows = await apiLogs.list({ projectId, statusCode, beforeId, limit: PAGE_SIZE + 1 });
    const shown = rows.slice(0, PAGE_SIZE);
    const filters = {
      project: projectId === undefined ? '' : String(projectId),
      status: statusCode === undefined ? '' : String(statusCode),
    };
    return page(request, reply, deps, 'api-logs', {
      title: 'API logs',
      rows: shown,
      names,
      // A code the API never answers with can still be asked for in the URL; the menu shows it.
      codes:
        statusCode === undefined || API_STATUS_CODES.includes(statusCode)
          ? API_STATUS_CODES
          : [...API_STATUS_CODES, statusCode].sort((a, b) => a - b),
      filters,
      problems,
      filtered: filters.project !== '' || filters.status !== '' || problems.length > 0,
      paged: beforeId !== undefined,
      nextBefore: rows.length > PAGE_SIZE ? shown[shown.length - 1]?.id : null,
    });
  });
}
