import { createHash } from 'node:crypto';
import type { Kysely } from 'kysely';
import { canonicalJson } from '../domain/canonical-json.js';
import { errors } from '../domain/errors.js';
import { publicStatus, type PublicStatus } from '../domain/notification-state.js';
import { quotaState, quotaWindow, type QuotaPeriod, type QuotaState } from '../domain/quota.js';
import { newRequestId } from '../domain/request-id.js';
import { maskContent } from '../domain/sensitive.js';
import type { SendRequest } from '../domain/send-request.js';
import { listAttempts } from '../storage/delivery-attempts.js';
import { GroupCommit } from './group-commit.js';
import {
  claimIdempotencyKey,
  completeIdempotencyKey,
  releaseIdempotencyKey,
} from '../storage/idempotency.js';
import { recordEvents } from '../storage/webhook-events.js';
import {
  cancelQueued,
  countByState,
  findNotification,
  insertNotifications,
  insertQueuedInOneStatement,
  listNotifications,
  newestNotificationId,
  type NotificationFilter,
} from '../storage/notifications.js';
import { quotaUsed, takeQuota } from '../storage/quota.js';
import { isLockTimeout } from '../storage/lock-timeout.js';
import { addUsage, usageDeltaRows, type UsageChange } from '../storage/usage.js';
import type {
  Database,
  DeliveryAttemptRow,
  NewNotificationRow,
  NotificationRow,
  NotificationState,
  ProjectRow,
} from '../storage/schema.js';

/** Idempotency keys are kept this long per project (product decision, after the IETF draft). */
export const IDEMPOTENCY_TTL_MS = 24 * 3_600_000;
export const MAX_IDEMPOTENCY_KEY_LENGTH = 255;

export interface SendResponseBody {
  readonly id: number;
  readonly request_id: string;
  readonly status: 'queued';
  readonly message: string;
}

/** The body of a `202` to a batch (product.md §6): one entry per send, in input order. */
export interface BatchResponseBody {
  readonly notifications: readonly SendResponseBody[];
}

export interface AcceptCommand {
  readonly project: ProjectRow;
  readonly request: SendRequest;
  readonly idempotency?: { readonly key: string; readonly body: unknown } | undefined;
}

export interface BatchCommand {
  readonly project: ProjectRow;
  /** 1–MAX_BATCH_SIZE checked sends, each with a recipient (see `recipientOf`). */
  readonly requests: readonly SendRequest[];
  readonly idempotency?: { readonly key: string; readonly body: unknown } | undefined;
}

/** What an accept came to; `Body` is a send's or a batch's response body. */
export type AcceptOutcome<Body = SendResponseBody> =
  | { readonly kind: 'accepted'; readonly body: Body; readonly quota: QuotaState | null }
  | { readonly kind: 'replayed'; readonly body: Body; readonly quota: QuotaState | null }
  | { readonly kind: 'quota_exceeded'; readonly quota: QuotaState }
  | { readonly kind: 'idempotency_mismatch' }
  | { readonly kind: 'idempotency_in_flight' };

/** One send of a request, ready to be stored. */
interface PreparedSend {
  readonly request: SendRequest;
  readonly recipient: string;
  /** The placeholder values as stored: serialized before the batch, so a failure stays this request's. */
  readonly data: string;
}

/** One API request (a single send or a batch) waiting for the group commit. */
interface PreparedAccept {
  readonly project: ProjectRow;
  readonly idempotency: AcceptCommand['idempotency'];
  readonly sends: readonly PreparedSend[];
  /** Builds the response body from the sends' bodies: the single body, or the batch body. */
  readonly respond: (bodies: SendResponseBody[]) => unknown;
  readonly fingerprint: string | null;
  readonly now: number;
}

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

/** The status body of GET /notifications/{request_id} (spec §4.2, product.md §3). */
export interface StatusBody {
  id: number;
  request_id: string;
  status: PublicStatus;
  template: string;
  to: string;
  type: string;
  attempts: number;
  created_at: string;
  updated_at: string;
  sent_at?: string;
  transport?: string;
  error_message?: string;
  send_at?: string;
  last_error?: string;
  next_attempt_at?: string;
  bounced_at?: string;
}

export function statusBody(row: NotificationRow): StatusBody {
  const status = publicStatus(row.state);
  const body: StatusBody = {
    id: row.id,
    request_id: row.request_id,
    status,
    template: row.template,
    to: row.recipient,
    type: row.type,
    attempts: row.attempts,
    created_at: new Date(row.created_at).toISOString(),
    updated_at: new Date(row.updated_at).toISOString(),
  };
  if (status === 'sent') {
    if (row.sent_at !== null) body.sent_at = new Date(row.sent_at).toISOString();
    if (row.transport !== null) body.transport = row.transport;
  }
  if (status === 'failed') {
    body.error_message = row.error_message ?? 'Delivery failed';
    if (row.bounced_at !== null) {
      // It was sent before the report came back: both times stay visible.
      if (row.sent_at !== null) body.sent_at = new Date(row.sent_at).toISOString();
      body.bounced_at = new Date(row.bounced_at).toISOString();
    }
  }
  if (status === 'queued') {
    // Only while it waits for its time: a send_at already past when accepted meant "now".
    if (row.send_at !== null && row.attempts === 0 && row.send_at > row.created_at)
      body.send_at = new Date(row.send_at).toISOString();
    // Back in the queue after a failed attempt: why, and when the next attempt is due.
    if (row.state === 'queued' && row.attempts > 0 && row.error_message !== null) {
      body.last_error = row.error_message;
      body.next_attempt_at = new Date(row.run_at).toISOString();
    }
  }
  return body;
}

export interface NotificationDetail {
  readonly notification: NotificationRow;
  readonly attempts: DeliveryAttemptRow[];
}

export class NotificationService {
  private readonly batcher: GroupCommit<PreparedAccept, AcceptOutcome<unknown>>;
  /** Idempotency keys of requests being accepted by this process right now. */
  private readonly inFlight = new Set<string>();
  private readonly acceptedListeners: (() => void)[] = [];

  constructor(
    private readonly db: Kysely<Database>,
    options: {
      readonly commitConcurrency?: number;
      /**
       * The store can insert into two tables with one statement (PostgreSQL's data-modifying
       * WITH): a group without Idempotency-Keys or quotas is then committed in one round trip.
       */
      readonly oneStatementInserts?: boolean;
      readonly now?: () => number;
    } = {},
  ) {
    this.now = options.now ?? Date.now;
    this.oneStatementInserts = options.oneStatementInserts ?? false;
    this.batcher = new GroupCommit((batch) => this.commitBatch(batch), {
      concurrency: options.commitConcurrency ?? 1,
      storeFailure: isLockTimeout,
    });
  }

  private readonly now: () => number;
  private readonly oneStatementInserts: boolean;

  /** Called after each committed batch that accepted something (the in-process worker wakes up). */
  onAccepted(listener: () => void): void {
    this.acceptedListeners.push(listener);
  }

  /**
   * Accepts a validated send request: the notification row is committed (durably) before this
   * resolves. Throws `Missing or invalid 'to'` when neither `to` nor a contact email exists,
   * `idempotencyInFlight` while the same key is still being accepted here, and `queueFailed` when
   * the store cannot commit.
   */
  async accept(command: AcceptCommand): Promise<AcceptOutcome> {
    const recipient = recipientOf(command.project, command.request);
    if (recipient === null) throw errors.invalidRecipient();
    const sends = [prepareSend(command.request, recipient)];
    return this.submit(command.project, command.idempotency, sends, (bodies) => bodies[0]!) as Promise<
      AcceptOutcome<SendResponseBody>
    >;
  }

  /**
   * Accepts a batch in one transaction: every send is queued, or none (product.md §6). The caller
   * has checked each send, including that it has a recipient.
   */
  async acceptBatch(command: BatchCommand): Promise<AcceptOutcome<BatchResponseBody>> {
    const sends = command.requests.map((request) => {
      const recipient = recipientOf(command.project, request);
      if (recipient === null) throw errors.invalidRecipient();
      return prepareSend(request, recipient);
    });
    return this.submit(command.project, command.idempotency, sends, (bodies) => ({
      notifications: bodies,
    })) as Promise<AcceptOutcome<BatchResponseBody>>;
  }

  private async submit(
    project: ProjectRow,
    idempotency: AcceptCommand['idempotency'],
    sends: readonly PreparedSend[],
    respond: PreparedAccept['respond'],
  ): Promise<AcceptOutcome<unknown>> {
    const idemKey = idempotency ? `${project.id}\n${idempotency.key}` : null;
    if (idemKey !== null) {
      if (this.inFlight.has(idemKey)) throw errors.idempotencyInFlight();
      this.inFlight.add(idemKey);
    }
    try {
      const fingerprint = idempotency
        ? createHash('sha256').update(canonicalJson(idempotency.body)).digest('hex')
        : null;
      return await this.batcher.submit({
        project,
        idempotency,
        sends,
        respond,
        fingerprint,
        now: this.now(),
      });
    } catch (error) {
      // The batch transaction failed as a whole; nothing of this request was stored.
      throw errors.queueFailed(error);
    } finally {
      if (idemKey !== null) this.inFlight.delete(idemKey);
    }
  }

  /**
   * Cancels a queued notification (product.md §6): `failed` with `Canceled`, returned as its
   * status body. A message already being sent or finished cannot be canceled.
   */
  async cancel(projectId: number, requestId: string): Promise<StatusBody> {
    if (!couldBeIssued(requestId)) throw errors.notificationNotFound();
    const now = this.now();
    const canceled = await this.db.transaction().execute(async (tx) => {
      const row = await cancelQueued(tx, requestId, projectId, now);
      if (row === undefined) return undefined;
      await addUsage(tx, [
        { projectId, createdAt: row.created_at, state: 'queued', delta: -1 },
        { projectId, createdAt: row.created_at, state: 'failed', delta: 1 },
      ]);
      await recordEvents(tx, [
        {
          projectId,
          notificationId: row.id,
          type: 'notification.failed',
          data: { ...statusBody(row) },
          at: now,
        },
      ]);
      return row;
    });
    if (canceled !== undefined) return statusBody(canceled);
    const row = await findNotification(this.db, requestId, projectId);
    if (row === undefined) throw errors.notificationNotFound();
    throw errors.notCancelable();
  }

  private async commitBatch(batch: readonly PreparedAccept[]): Promise<AcceptOutcome<unknown>[]> {
    const outcomes =
      (await this.commitInOneStatement(batch)) ??
      (await this.db.transaction().execute(async (tx) => {
        const admissions: Admission[] = [];
        for (const item of batch) admissions.push(await admit(tx, item));
        return insertAdmitted(tx, admissions);
      }));
    if (outcomes.some((o) => o.kind === 'accepted'))
      for (const listener of this.acceptedListeners) listener();
    return outcomes;
  }

  /**
   * Commits a group whose requests need no statement of their own (no Idempotency-Key, no quota)
   * with a single statement, which is atomic without a transaction. Undefined when the group or
   * the store does not allow it.
   */
  private async commitInOneStatement(
    batch: readonly PreparedAccept[],
  ): Promise<AcceptOutcome<unknown>[] | undefined> {
    if (!this.oneStatementInserts) return undefined;
    if (batch.some((item) => item.idempotency !== undefined || item.project.quota_limit !== null))
      return undefined;
    const admissions = batch.map((item): Admitted => ({
      kind: 'admitted',
      item,
      rows: rowsOf(item),
      quota: null,
    }));
    const rows = admissions.flatMap((a) => a.rows);
    const ids = await insertQueuedInOneStatement(this.db, rows, usageDeltaRows(rows.map(queuedUsage)));
    return ids && admissions.map((admission) => accepted(admission, ids));
  }

  /** Waits until every accepted request is committed (graceful stop). */
  flush(): Promise<void> {
    return this.batcher.flush();
  }

  async status(projectId: number, requestId: string): Promise<StatusBody> {
    const row = couldBeIssued(requestId) ? await findNotification(this.db, requestId, projectId) : undefined;
    if (row === undefined) throw errors.notificationNotFound();
    return statusBody(row);
  }

  /** Any project's notification with its attempts, for operators (CLI and dashboard). */
  async detail(requestId: string, projectId?: number): Promise<NotificationDetail> {
    if (!couldBeIssued(requestId)) throw errors.notificationNotFound();
    const notification = await findNotification(this.db, requestId, projectId);
    if (notification === undefined) throw errors.notificationNotFound();
    return { notification, attempts: await listAttempts(this.db, notification.id) };
  }

  /**
   * A message's request data (as indented JSON) and rendered content, for people: values of
   * sensitive placeholders masked unless `reveal` (product.md §8).
   */
  content(row: NotificationRow, reveal: boolean): ContentView {
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
        : { ...maskContent({ data, ...rendered }), erasedAt: null };
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

  counts(projectId?: number): Promise<Record<NotificationState, number>> {
    return countByState(this.db, projectId);
  }

  async quota(project: ProjectRow): Promise<QuotaState | null> {
    if (project.quota_limit === null) return null;
    const window = quotaWindow(project.quota_period as QuotaPeriod, this.now());
    return quotaState(project.quota_limit, await quotaUsed(this.db, project.id, window.start), window);
  }
}

/** A request that passed its Idempotency-Key and quota checks and waits for its rows. */
interface Admitted {
  readonly kind: 'admitted';
  readonly item: PreparedAccept;
  readonly rows: readonly NewNotificationRow[];
  readonly quota: QuotaState | null;
}

type Admission = AcceptOutcome<unknown> | Admitted;

/**
 * One request inside the group's transaction: claim the Idempotency-Key (or replay the response it
 * holds), then take quota for all of its sends at once. A refusal undoes what this request did
 * before it. Requests of an unlimited project without an Idempotency-Key need no statement here.
 */
async function admit(tx: Kysely<Database>, item: PreparedAccept): Promise<Admission> {
  const { project, idempotency } = item;
  const window = quotaWindow(project.quota_period as QuotaPeriod, item.now);

  if (idempotency && item.fingerprint !== null) {
    const claim = await claimIdempotencyKey(tx, {
      projectId: project.id,
      key: idempotency.key,
      fingerprint: item.fingerprint,
      now: item.now,
      expiresAt: item.now + IDEMPOTENCY_TTL_MS,
    });
    if (!claim.claimed) {
      if (claim.existing.fingerprint !== item.fingerprint) return { kind: 'idempotency_mismatch' };
      if (claim.existing.response === null) return { kind: 'idempotency_in_flight' };
      const quota =
        project.quota_limit === null
          ? null
          : quotaState(project.quota_limit, await quotaUsed(tx, project.id, window.start), window);
      return { kind: 'replayed', body: JSON.parse(claim.existing.response) as unknown, quota };
    }
  }

  let quota: QuotaState | null = null;
  if (project.quota_limit !== null) {
    const used = await takeQuota(tx, project.id, window.start, project.quota_limit, item.sends.length);
    if (used === null) {
      if (idempotency) await releaseIdempotencyKey(tx, project.id, idempotency.key);
      const left = await quotaUsed(tx, project.id, window.start);
      return { kind: 'quota_exceeded', quota: quotaState(project.quota_limit, left, window) };
    }
    quota = quotaState(project.quota_limit, used, window);
  }

  return { kind: 'admitted', item, rows: rowsOf(item), quota };
}

/** The queued rows of a request's sends. */
function rowsOf(item: PreparedAccept): NewNotificationRow[] {
  return item.sends.map((send): NewNotificationRow => ({
    request_id: newRequestId(),
    project_id: item.project.id,
    template: send.request.template,
    recipient: send.recipient,
    data: send.data,
    type: send.request.type,
    state: 'queued',
    attempts: 0,
    // A time already past means now (product.md §6).
    run_at: Math.max(item.now, send.request.sendAt ?? item.now),
    send_at: send.request.sendAt,
    created_at: item.now,
    updated_at: item.now,
  }));
}

/** Each accepted message counts once as queued, in the hour it was accepted. */
function queuedUsage(row: NewNotificationRow): UsageChange {
  return { projectId: row.project_id, createdAt: row.created_at, state: 'queued', delta: 1 };
}

/**
 * Inserts every admitted request's rows with multi-row statements (one round trip on PostgreSQL
 * per few hundred rows), then records the responses of those that carried an Idempotency-Key.
 */
async function insertAdmitted(
  tx: Kysely<Database>,
  admissions: readonly Admission[],
): Promise<AcceptOutcome<unknown>[]> {
  const admitted = admissions.filter((a): a is Admitted => a.kind === 'admitted');
  const rows = admitted.flatMap((a) => a.rows);
  const ids = await insertNotifications(tx, rows);
  await addUsage(tx, rows.map(queuedUsage));
  const outcomes: AcceptOutcome<unknown>[] = [];
  for (const admission of admissions) {
    if (admission.kind !== 'admitted') {
      outcomes.push(admission);
      continue;
    }
    const outcome = accepted(admission, ids);
    const { project, idempotency } = admission.item;
    if (idempotency)
      await completeIdempotencyKey(tx, project.id, idempotency.key, 202, JSON.stringify(outcome.body));
    outcomes.push(outcome);
  }
  return outcomes;
}

/** The `202` of an admitted request whose rows were inserted with these ids. */
function accepted(
  admission: Admitted,
  ids: ReadonlyMap<string, number>,
): Extract<AcceptOutcome<unknown>, { kind: 'accepted' }> {
  const bodies = admission.rows.map((row): SendResponseBody => ({
    id: ids.get(row.request_id)!,
    request_id: row.request_id,
    status: 'queued',
    message: 'Notification queued for delivery',
  }));
  return { kind: 'accepted', body: admission.item.respond(bodies), quota: admission.quota };
}

/**
 * Whether an id could be one Herald issued: others are not looked up at all, so a NUL character
 * (which PostgreSQL text cannot hold) or a 16 KiB id is a 404 on every backend.
 */
function couldBeIssued(requestId: string): boolean {
  return requestId.length <= 100 && !requestId.includes('\0');
}

/** Who a send goes to: its `to`, else the project's contact email; null when neither exists. */
export function recipientOf(project: ProjectRow, request: SendRequest): string | null {
  if (request.to?.address) return formatRecipient(request.to);
  return project.contact_email || null;
}

function prepareSend(request: SendRequest, recipient: string): PreparedSend {
  return { request, recipient, data: JSON.stringify(request.data) };
}

function formatRecipient(to: { name?: string; address: string }): string {
  if (to.name === undefined) return to.address;
  return `"${to.name.replace(/[\\"]/g, (c) => `\\${c}`)}" <${to.address}>`;
}
