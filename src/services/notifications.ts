import type { Kysely } from 'kysely';
import { errors } from '../domain/errors.js';
import { canceled } from '../domain/lifecycle.js';
import { notificationView, type NotificationView } from '../domain/notification.js';
import { quotaState, quotaWindow, type QuotaPeriod, type QuotaState } from '../domain/quota.js';
import { maskContent, type Rerender } from '../domain/sensitive.js';
import { listAttempts } from '../storage/delivery-attempts.js';
import {
  countByState,
  findNotification,
  listNotifications,
  newestNotificationId,
  type NotificationFilter,
} from '../storage/notifications.js';
import { quotaUsed } from '../storage/quota.js';
import type {
  Database,
  DeliveryAttemptRow,
  NotificationRow,
  NotificationState,
  ProjectRow,
} from '../storage/schema.js';
import { applyTransition } from '../storage/transitions.js';

/** The status body of `GET /notifications/{request_id}`: a notification's view (domain/notification.ts). */
export type StatusBody = NotificationView;

/** What people see of a message's content (dashboard, CLI). */
export interface ContentView {
  /** The request data as indented JSON. */
  readonly data: string;
  readonly subject: string | null;
  readonly text: string | null;
  readonly html: string | null;
  /** Values hidden because their placeholder name marks them as secret. */
  readonly masked: number;
  /** When the content was erased by the retention rule; null while it is kept. */
  readonly erasedAt: number | null;
}

/** One page of the delivery log, newest first. */
export interface LogPage {
  readonly rows: NotificationRow[];
  /** Where the next (older) page starts: its `before`; null at the end. */
  readonly nextBefore: number | null;
  /** When a search found less than a page in the ids it looked through: the oldest id it looked at. */
  readonly searchedTo: number | null;
}

/**
 * How many notifications (by id) one page of a filtered search looks through. A filter that few
 * rows match (a recipient, a failed state) would otherwise scan the whole history for one page;
 * this keeps every page near-constant in cost at any size, and the page offers to search on.
 */
export const SEARCH_WINDOW = 100_000;

export interface NotificationDetail {
  readonly notification: NotificationRow;
  readonly attempts: DeliveryAttemptRow[];
}

/**
 * Notifications once accepted, as callers and operators see them: the status, cancel, a message's
 * detail and content, searches and counts. Accepting is `AcceptService`'s (accept.ts).
 */
export class NotificationService {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly now: () => number = Date.now,
  ) {}

  async status(projectId: number, requestId: string): Promise<StatusBody> {
    return notificationView(await this.find(requestId, projectId));
  }

  /**
   * Cancels a queued notification (product.md §6): `failed` with `Canceled`, returned as its
   * status body. A message already being sent or finished cannot be canceled: the worker's claim
   * and the cancel each change the row only while it is queued, so exactly one of them wins.
   */
  async cancel(projectId: number, requestId: string): Promise<StatusBody> {
    for (;;) {
      const row = await this.find(requestId, projectId);
      const now = this.now();
      const transition = canceled(row, now);
      if (transition === null) throw errors.notCancelable();
      const after = await this.db.transaction().execute((tx) => applyTransition(tx, row, transition, now));
      // Changed meanwhile (claimed, and perhaps queued again): decide again on what it is now.
      if (after !== undefined) return notificationView(after);
    }
  }

  /** Any project's notification with its attempts, for operators (CLI and dashboard). */
  async detail(requestId: string, projectId?: number): Promise<NotificationDetail> {
    const notification = await this.find(requestId, projectId);
    return { notification, attempts: await listAttempts(this.db, notification.id) };
  }

  /**
   * A message's request data (as indented JSON) and rendered content, for people: values of
   * sensitive placeholders masked unless `reveal` (product.md §8), exactly where the template put
   * them when `rerender` (its template, diagnose() of templates.ts) renders the message again.
   */
  content(row: NotificationRow, reveal: boolean, rerender?: Rerender): ContentView {
    if (row.content_erased_at !== null) {
      const note = `(erased on ${new Date(row.content_erased_at).toISOString()}: content retention)`;
      return {
        data: note,
        subject: null,
        text: null,
        html: null,
        masked: 0,
        erasedAt: row.content_erased_at,
      };
    }
    const rendered = { subject: row.subject, text: row.text_body, html: row.html_body, erasedAt: null };
    try {
      const data = JSON.parse(row.data) as unknown;
      const shown = reveal
        ? { data, ...rendered, masked: 0 }
        : { ...maskContent({ data, ...rendered }, rerender), erasedAt: null };
      return { ...shown, data: JSON.stringify(shown.data, null, 2) };
    } catch {
      // Data stored before nesting was bounded can be too deep to walk; nothing of it is shown
      // unless asked for, since its secrets cannot be found.
      const note = '(nested too deeply to display)';
      return reveal
        ? { data: row.data, ...rendered, masked: 0 }
        : { data: note, subject: note, text: note, html: null, masked: 0, erasedAt: null };
    }
  }

  newestId(): Promise<number> {
    return newestNotificationId(this.db);
  }

  list(filter: NotificationFilter): Promise<NotificationRow[]> {
    return listNotifications(this.db, filter);
  }

  /**
   * A page of the delivery log (the dashboard's, and the admin API's), newest first, keyset-paged
   * by `beforeId`: every notification, or with filters (project, state, template, recipient,
   * `metadata.KEY=VALUE`, time) those that match. A search looks through SEARCH_WINDOW ids per
   * page; a page that is not full then goes on from where its window ended.
   */
  async search(filter: Omit<NotificationFilter, 'limit' | 'fromId'>, pageSize: number): Promise<LogPage> {
    const { beforeId, ...conditions } = filter;
    const searching = Object.values(conditions).some(
      (value) => value !== undefined && !(Array.isArray(value) && value.length === 0),
    );
    const windowEnd = searching ? (beforeId ?? (await this.newestId()) + 1) : beforeId;
    const fromId = searching && windowEnd !== undefined ? Math.max(0, windowEnd - SEARCH_WINDOW) : undefined;
    const rows = await this.list({ ...filter, beforeId: windowEnd, fromId, limit: pageSize + 1 });
    const more = rows.length > pageSize;
    const shown = rows.slice(0, pageSize);
    const searchedTo = !more && fromId !== undefined && fromId > 1 ? fromId : null;
    return { rows: shown, nextBefore: more ? shown[shown.length - 1]!.id : searchedTo, searchedTo };
  }

  counts(projectId?: number): Promise<Record<NotificationState, number>> {
    return countByState(this.db, projectId);
  }

  async quota(project: ProjectRow): Promise<QuotaState | null> {
    if (project.quota_limit === null) return null;
    const window = quotaWindow(project.quota_period as QuotaPeriod, this.now());
    return quotaState(project.quota_limit, await quotaUsed(this.db, project.id, window.start), window);
  }

  private async find(requestId: string, projectId?: number): Promise<NotificationRow> {
    const row = couldBeIssued(requestId) ? await findNotification(this.db, requestId, projectId) : undefined;
    if (row === undefined) throw errors.notificationNotFound();
    return row;
  }
}

/**
 * Whether an id could be one Herald issued: others are not looked up at all, so a NUL character
 * (which PostgreSQL text cannot hold) or a 16 KiB id is a 404 on every backend.
 */
function couldBeIssued(requestId: string): boolean {
  return requestId.length <= 100 && !requestId.includes('\0');
}
