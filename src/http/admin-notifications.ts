import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { errors, Messages } from '../domain/errors.js';
import { notificationView } from '../domain/notification.js';
import { parseDateTime } from '../domain/send-request.js';
import type { NotificationSearch } from '../services/notifications.js';
import type { Project } from '../services/projects.js';
import type { AdminDeps } from './admin-deps.js';
import { ADMIN_SECURITY, answers, ProjectParams } from './admin-schemas.js';
import { pageNumber } from './admin-settings.js';
import { StatusResponse } from './schemas.js';

/**
 * What each `status` searches for: a public state and the stored ones it stands for (`sending` is
 * `queued` to everyone outside), or `canceled`, the failed ones whose error is `Canceled`, as the
 * delivery log filters.
 */
const STATUS_SEARCH = new Map<string, Pick<NotificationSearch, 'states' | 'errorMessage'>>([
  ['queued', { states: ['queued', 'sending'] }],
  ['sent', { states: ['sent'] }],
  ['failed', { states: ['failed'] }],
  ['canceled', { states: ['failed'], errorMessage: Messages.canceled }],
]);
const MAX_PAGE = 100;
/** product.md §12: a notification carries at most 20 metadata values, keys of 1–40 such characters. */
const METADATA_KEY = /^metadata\.([A-Za-z0-9_.-]{1,40})$/;
const MAX_METADATA_FILTERS = 20;
const MAX_METADATA_VALUE = 500;
const MAX_TEXT_FILTER = 320;

const SearchQuery = Type.Object(
  {
    status: Type.Optional(
      Type.String({ description: 'queued, sent, failed, or canceled (the failed that were canceled).' }),
    ),
    recipient: Type.Optional(Type.String({ description: 'Part of the recipient address.' })),
    template: Type.Optional(Type.String({ description: "The template's name, exactly." })),
    from_date: Type.Optional(Type.String({ description: 'Accepted at or after this RFC 3339 time.' })),
    to_date: Type.Optional(Type.String({ description: 'Accepted before this RFC 3339 time.' })),
    before: Type.Optional(Type.String({ description: 'The `next_before` of the page before.' })),
    limit: Type.Optional(Type.String({ description: `Notifications per page, 1–${MAX_PAGE} (50).` })),
  },
  {
    additionalProperties: false,
    patternProperties: { '^metadata\\.': Type.String() },
  },
);

const SearchPage = Type.Object({
  notifications: Type.Array(StatusResponse, { description: 'Newest first.' }),
  next_before: Type.Union([Type.Integer(), Type.Null()], {
    description:
      'Pass it as `before` for the next page; null when there is nothing older. A page looks through a ' +
      'bounded stretch of the history, so it can hold fewer than `limit` (even none) before the end.',
  }),
});

function text(value: string | undefined, name: string): string | undefined {
  if (value === undefined || value.trim() === '') return undefined;
  if (value.length > MAX_TEXT_FILTER)
    throw errors.invalidField(`Invalid '${name}' (at most ${MAX_TEXT_FILTER} characters)`);
  return value.trim();
}

function time(value: string | undefined, name: string): number | undefined {
  if (value === undefined) return undefined;
  const at = value.length <= 64 ? parseDateTime(value) : null;
  if (at === null)
    throw errors.invalidField(`Invalid '${name}' (an RFC 3339 time, e.g. 2026-12-01T09:00:00Z)`);
  return at;
}

/** `metadata.KEY=VALUE` parameters, as the service's metadata filter. */
function metadataFilter(query: Record<string, unknown>): Record<string, string> | undefined {
  // Without a prototype: `metadata.__proto__=x` is a key like any other (none carries it), not a
  // write to the object's prototype that would leave the filter empty and match everything.
  const filter = Object.create(null) as Record<string, string>;
  let count = 0;
  for (const [name, value] of Object.entries(query)) {
    if (!name.startsWith('metadata.')) continue;
    const key = METADATA_KEY.exec(name)?.[1];
    if (
      key === undefined ||
      typeof value !== 'string' ||
      value.length > MAX_METADATA_VALUE ||
      ++count > MAX_METADATA_FILTERS
    )
      throw errors.invalidField("Invalid 'metadata' filter");
    filter[key] = value;
  }
  return count === 0 ? undefined : filter;
}

/** The delivery log of a project, searched and paged as the dashboard's is (product.md §13). */
export async function adminNotificationRoutes(app: FastifyInstance, deps: AdminDeps): Promise<void> {
  const api = app.withTypeProvider<TypeBoxTypeProvider>();
  api.get(
    '/projects/:project/notifications',
    {
      schema: {
        operationId: 'adminSearchNotifications',
        summary: "Search a project's notifications, newest first",
        description:
          'Filters combine: `status`, `recipient`, `template`, `from_date`, `to_date`, and ' +
          '`metadata.KEY=VALUE` (any number, each a value the notification carries). Follow `next_before` ' +
          'until it is null to see everything that matches.',
        tags: ['admin: notifications'],
        security: ADMIN_SECURITY,
        params: ProjectParams,
        querystring: SearchQuery,
        response: answers(SearchPage, 'Project'),
      },
    },
    async (request) => {
      const q = request.query;
      const status = q.status === undefined ? {} : STATUS_SEARCH.get(q.status);
      if (status === undefined)
        throw errors.invalidField("Invalid 'status' (queued, sent, failed or canceled)");
      const page = await deps.notifications.search({
        projectId: (request.adminProject as Project).id,
        ...status,
        recipient: text(q.recipient, 'recipient'),
        template: text(q.template, 'template'),
        from: time(q.from_date, 'from_date'),
        to: time(q.to_date, 'to_date'),
        metadata: metadataFilter(q),
        before:
          q.before === undefined ? undefined : pageNumber(q.before, 'before', 1, Number.MAX_SAFE_INTEGER, 1),
        limit: pageNumber(q.limit, 'limit', 1, MAX_PAGE, 50),
      });
      return { notifications: page.rows.map(notificationView), next_before: page.nextBefore };
    },
  );
}
