import type { Kysely } from 'kysely';
import { addressSearchText } from '../domain/address.js';
import { errors, Messages } from '../domain/errors.js';
import { canceled } from '../domain/lifecycle.js';
import { notificationView, type NotificationView } from '../domain/notification.js';
import { quotaState, quotaWindow, type QuotaPeriod, type QuotaState } from '../domain/quota.js';
import { maskContent, type Rerender } from '../domain/sensitive.js';
import { cancelStanding, requestCancel, sameClaim, withdrawCancel } from '../storage/cancel-requests.js';
import { listAttempts } from '../storage/delivery-attempts.js';
import {
  countByState,
  findNotification,
  findNotificationById,
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
import type { Signal } from './signal.js';

/**
 * How long a cancel of a claimed message waits for its worker's answer (a live worker answers
 * within milliseconds of its wake), and how often it looks: soon at first, then less often, so
 * cancels waiting on a stopped worker cost the store little.
 */
const CANCEL_WAIT_MS = 5_000;
const CANCEL_LOOK_MS = 5;
const CANCEL_LOOK_MAX_MS = 100;

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

/**
 * How many notifications (by id) one page of a filtered search looks through. A filter that few
 * rows match (a recipient, a failed state) would otherwise scan the whole history for one page;
 * this keeps every page near-constant in cost at any size, and the page says where to go on.
 */
export const SEARCH_WINDOW = 100_000;

/** A search of the delivery log (dashboard, admin API): filters, and a keyset page. */
export interface NotificationSearch extends Omit<
  NotificationFilter,
  'beforeId' | 'fromId' | 'limit' | 'metadata'
> {
  /**
   * Metadata values the notifications carry, every one (`metadata.KEY=VALUE`, product.md §12),
   * looked up in the metadata's search rows (storage/notification-metadata.ts).
   */
  readonly metadata?: Readonly<Record<string, string>>;
  /** Notifications with an id below this one (the `nextBefore` of the page before). */
  readonly before?: number;
  readonly limit: number;
}

export interface SearchPage {
  /** Newest first, at most `limit`; fewer (even none) when the page's window ran out. */
  readonly rows: NotificationRow[];
  /** Where the next page starts; null when there is nothing older to look through. */
  readonly nextBefore: number | null;
  /** When the window ran out before the page filled: the oldest id it looked at. */
  readonly searchedTo: number | null;
}

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
    private readonly signals: {
      /** Fired once a cancel's event queued webhook deliveries (signal.ts). */
      readonly webhooksQueued: Signal;
      /** Wakes the mail workers here and elsewhere, as an accept does: a cancel waits for one. */
      readonly wakeWorkers: () => void;
    },
    private readonly now: () => number = Date.now,
    /** How long a cancel waits for the worker holding the message to answer. */
    private readonly cancelWaitMs = CANCEL_WAIT_MS,
  ) {}

  async status(projectId: number, requestId: string): Promise<StatusBody> {
    return notificationView(await this.find(requestId, projectId));
  }

  /**
   * Cancels a queued notification (product.md §6): `failed` with `Canceled`, returned as its
   * status body. One waiting for its time or for a worker is canceled here: the worker's claim and
   * the cancel each change the row only while it is queued, so exactly one of them wins. One a
   * worker has claimed is canceled by that worker while its SMTP transaction has not begun
   * (`askWorker`). One being sent or finished cannot be canceled. `project` is the caller's
   * project, or `any` for an operator's cancel, which finds the message in any project.
   */
  async cancel(requestId: string, project: number | 'any'): Promise<StatusBody> {
    for (;;) {
      const row = await this.find(requestId, project === 'any' ? undefined : project);
      const now = this.now();
      const transition = canceled(row, now);
      if (transition === null) {
        if (row.state !== 'sending') throw errors.notCancelable();
        const answer = await this.askWorker(row);
        if (answer === 'refused') throw errors.notCancelable();
        if (answer === 'unanswered')
          throw errors.notCancelable(
            `The worker that claimed it did not answer within ${this.cancelWaitMs / 1000} s, so it goes on ` +
              'as claimed; a cancel may still succeed if it returns to the queue',
          );
        if (answer === 'changed') continue;
        return notificationView(answer);
      }
      const written = await this.db.transaction().execute((tx) => applyTransition(tx, row, transition, now));
      // Changed meanwhile (claimed, and perhaps queued again): decide again on what it is now.
      if (written === undefined) continue;
      if (written.webhookDeliveries > 0) this.signals.webhooksQueued.fire();
      return notificationView(written.row);
    }
  }

  /**
   * Asks the worker that claimed `row` to cancel it (storage/cancel-requests.ts) and waits for its
   * answer: the row canceled; `refused`, its SMTP transaction begun; `unanswered`, no answer in
   * time (the request is then taken back, so no worker cancels it later); or `changed`, the row no
   * longer under that claim (given back to the queue, finished): the caller decides again.
   */
  private async askWorker(
    row: NotificationRow,
  ): Promise<NotificationRow | 'refused' | 'unanswered' | 'changed'> {
    if (!(await requestCancel(this.db, row))) return 'changed';
    this.signals.wakeWorkers();
    const deadline = this.now() + this.cancelWaitMs;
    const answered = async () => {
      const whole = await findNotificationById(this.db, row.id);
      return whole?.state === 'failed' && whole.error_message === Messages.canceled ? whole : 'changed';
    };
    for (let look = CANCEL_LOOK_MS; ; look = Math.min(look * 2, CANCEL_LOOK_MAX_MS)) {
      await new Promise((resolve) => setTimeout(resolve, look));
      const now = await cancelStanding(this.db, row.id);
      if (now === undefined) return 'changed';
      // Given back, finished, canceled, or claimed again (perhaps by another worker): decide again.
      if (!sameClaim(row, now)) return answered();
      if (now.cancel_request === null) return 'refused';
      // Not withdrawn: the worker's cancel (or another change) got there first.
      if (this.now() >= deadline) return (await withdrawCancel(this.db, row)) ? 'unanswered' : answered();
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
   * One page of the delivery log, newest first. A filtered search looks through at most
   * SEARCH_WINDOW ids per page, so a page that is not full may still have a `nextBefore`: the
   * search goes on from there.
   */
  async search(search: NotificationSearch): Promise<SearchPage> {
    const { metadata: values, before, limit, recipient, ...conditions } = search;
    const metadata = Object.entries(values ?? {}).map(([key, value]) => ({ key, value }));
    const filter = {
      ...conditions,
      ...(recipient !== undefined && { recipient: addressSearchText(recipient) }),
      ...(metadata.length > 0 && { metadata }),
    };
    const filtered = Object.values(filter).some((value) => value !== undefined);
    // A window that starts past the newest id (a `before` from another database, or typed by
    // hand) starts at the newest, so that it looks at rows.
    const windowEnd = filtered ? Math.min(before ?? Infinity, (await this.newestId()) + 1) : before;
    const fromId = filtered && windowEnd !== undefined ? Math.max(0, windowEnd - SEARCH_WINDOW) : undefined;
    const rows = await listNotifications(this.db, {
      ...filter,
      beforeId: windowEnd,
      fromId,
      limit: limit + 1,
    });
    const shown = rows.slice(0, limit);
    const searchedTo = rows.length <= limit && fromId !== undefined && fromId > 1 ? fromId : null;
    return {
      rows: shown,
      nextBefore: rows.length > limit ? shown[shown.length - 1]!.id : searchedTo,
      searchedTo,
    };
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
    const row = couldBeIssued(requestId)
      ? await findNotification(this.db, issuedForm(requestId), projectId)
      : undefined;
    if (row === undefined) throw errors.notificationNotFound();
    return row;
  }
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * A request id as Herald issued it: UUIDs are read in either case (RFC 9562 §4) and issued in
 * lower case, so one copied from a tool that shows them upper-cased is found.
 */
function issuedForm(requestId: string): string {
  return UUID.test(requestId) ? requestId.toLowerCase() : requestId;
}

/**
 * Whether an id could be one Herald issued: others are not looked up at all, so a NUL character
 * (which PostgreSQL text cannot hold) or a 16 KiB id is a 404 on every backend.
 */
function couldBeIssued(requestId: string): boolean {
  return requestId.length <= 100 && !requestId.includes('\0');
}
