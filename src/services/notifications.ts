import { createHash, randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import { errors } from '../domain/errors.js';
import { publicStatus, type PublicStatus } from '../domain/notification-state.js';
import { quotaState, quotaWindow, type QuotaPeriod, type QuotaState } from '../domain/quota.js';
import { maskContent } from '../domain/sensitive.js';
import type { SendRequest } from '../domain/send-request.js';
import { listAttempts } from '../storage/delivery-attempts.js';
import { GroupCommit } from './group-commit.js';
import {
  claimIdempotencyKey,
  completeIdempotencyKey,
  releaseIdempotencyKey,
} from '../storage/idempotency.js';
import {
  countByState,
  findNotification,
  insertNotifications,
  listNotifications,
  newestNotificationId,
  type NotificationFilter,
} from '../storage/notifications.js';
import { quotaUsed, takeQuota } from '../storage/quota.js';
import { addUsage } from '../storage/usage.js';
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

export interface AcceptCommand {
  readonly project: ProjectRow;
  readonly request: SendRequest;
  readonly idempotency?: { readonly key: string; readonly body: unknown } | undefined;
}

export type AcceptOutcome =
  | { readonly kind: 'accepted'; readonly body: SendResponseBody; readonly quota: QuotaState | null }
  | {
      readonly kind: 'replayed';
      readonly body: SendResponseBody;
      readonly quota: QuotaState | null;
    }
  | { readonly kind: 'quota_exceeded'; readonly quota: QuotaState }
  | { readonly kind: 'idempotency_mismatch' }
  | { readonly kind: 'idempotency_in_flight' };

interface PreparedAccept {
  readonly command: AcceptCommand;
  readonly recipient: string;
  /** The placeholder values as stored: serialized before the batch, so a failure stays this request's. */
  readonly data: string;
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
  if (status === 'failed') body.error_message = row.error_message ?? 'Delivery failed';
  return body;
}

export interface NotificationDetail {
  readonly notification: NotificationRow;
  readonly attempts: DeliveryAttemptRow[];
}

export class NotificationService {
  private readonly batcher: GroupCommit<PreparedAccept, AcceptOutcome>;
  /** Idempotency keys of requests being accepted by this process right now. */
  private readonly inFlight = new Set<string>();
  private readonly acceptedListeners: (() => void)[] = [];

  constructor(
    private readonly db: Kysely<Database>,
    options: { readonly commitConcurrency?: number; readonly now?: () => number } = {},
  ) {
    this.now = options.now ?? Date.now;
    this.batcher = new GroupCommit((batch) => this.commitBatch(batch), {
      concurrency: options.commitConcurrency ?? 1,
    });
  }

  private readonly now: () => number;

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
    const recipient = command.request.to?.address
      ? formatRecipient(command.request.to)
      : command.project.contact_email;
    if (!recipient) throw errors.invalidRecipient();

    const idemKey = command.idempotency ? `${command.project.id}\n${command.idempotency.key}` : null;
    if (idemKey !== null) {
      if (this.inFlight.has(idemKey)) throw errors.idempotencyInFlight();
      this.inFlight.add(idemKey);
    }
    try {
      const fingerprint = command.idempotency
        ? createHash('sha256')
            .update(JSON.stringify(canonicalize(command.idempotency.body)))
            .digest('hex')
        : null;
      const data = JSON.stringify(command.request.data);
      return await this.batcher.submit({ command, recipient, data, fingerprint, now: this.now() });
    } catch (error) {
      // The batch transaction failed as a whole; nothing of this request was stored.
      throw errors.queueFailed(error);
    } finally {
      if (idemKey !== null) this.inFlight.delete(idemKey);
    }
  }

  private async commitBatch(batch: readonly PreparedAccept[]): Promise<AcceptOutcome[]> {
    const outcomes = await this.db.transaction().execute(async (tx) => {
      const admissions: Admission[] = [];
      for (const item of batch) admissions.push(await admit(tx, item));
      return insertAdmitted(tx, admissions);
    });
    if (outcomes.some((o) => o.kind === 'accepted'))
      for (const listener of this.acceptedListeners) listener();
    return outcomes;
  }

  /** Waits until every accepted request is committed (graceful stop). */
  flush(): Promise<void> {
    return this.batcher.flush();
  }

  async status(projectId: number, requestId: string): Promise<StatusBody> {
    const row = requestId.length <= 100 ? await findNotification(this.db, requestId, projectId) : undefined;
    if (row === undefined) throw errors.notificationNotFound();
    return statusBody(row);
  }

  /** Any project's notification with its attempts, for operators (CLI and dashboard). */
  async detail(requestId: string, projectId?: number): Promise<NotificationDetail> {
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

/** A request that passed its Idempotency-Key and quota checks and waits for its row. */
interface Admitted {
  readonly kind: 'admitted';
  readonly item: PreparedAccept;
  readonly row: NewNotificationRow;
  readonly quota: QuotaState | null;
}

type Admission = AcceptOutcome | Admitted;

/**
 * One request inside the batch transaction: claim the Idempotency-Key (or replay the response it
 * holds), then take quota. A refusal undoes what this request did before it. Requests of an
 * unlimited project without an Idempotency-Key need no statement here at all.
 */
async function admit(tx: Kysely<Database>, item: PreparedAccept): Promise<Admission> {
  const { project, request, idempotency } = item.command;
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
      return {
        kind: 'replayed',
        body: JSON.parse(claim.existing.response) as SendResponseBody,
        quota,
      };
    }
  }

  let quota: QuotaState | null = null;
  if (project.quota_limit !== null) {
    const used = await takeQuota(tx, project.id, window.start, project.quota_limit);
    if (used === null) {
      if (idempotency) await releaseIdempotencyKey(tx, project.id, idempotency.key);
      return { kind: 'quota_exceeded', quota: quotaState(project.quota_limit, project.quota_limit, window) };
    }
    quota = quotaState(project.quota_limit, used, window);
  }

  const row: NewNotificationRow = {
    request_id: randomUUID(),
    project_id: project.id,
    template: request.template,
    recipient: item.recipient,
    data: item.data,
    type: request.type,
    state: 'queued',
    attempts: 0,
    run_at: item.now,
    created_at: item.now,
    updated_at: item.now,
  };
  return { kind: 'admitted', item, row, quota };
}

/**
 * Inserts every admitted request's row with one multi-row statement (one round trip on
 * PostgreSQL, one statement to build on both), then records the responses of those that carried
 * an Idempotency-Key.
 */
async function insertAdmitted(
  tx: Kysely<Database>,
  admissions: readonly Admission[],
): Promise<AcceptOutcome[]> {
  const admitted = admissions.filter((a): a is Admitted => a.kind === 'admitted');
  const ids = await insertNotifications(
    tx,
    admitted.map((a) => a.row),
  );
  await addUsage(
    tx,
    admitted.map((a) => ({
      projectId: a.row.project_id,
      createdAt: a.row.created_at,
      state: 'queued',
      delta: 1,
    })),
  );
  const outcomes: AcceptOutcome[] = [];
  for (const admission of admissions) {
    if (admission.kind !== 'admitted') {
      outcomes.push(admission);
      continue;
    }
    const requestId = admission.row.request_id;
    const body: SendResponseBody = {
      id: ids.get(requestId)!,
      request_id: requestId,
      status: 'queued',
      message: 'Notification queued for delivery',
    };
    const { project, idempotency } = admission.item.command;
    if (idempotency) await completeIdempotencyKey(tx, project.id, idempotency.key, 202, JSON.stringify(body));
    outcomes.push({ kind: 'accepted', body, quota: admission.quota });
  }
  return outcomes;
}

function formatRecipient(to: { name?: string; address: string }): string {
  if (to.name === undefined) return to.address;
  return `"${to.name.replace(/[\\"]/g, (c) => `\\${c}`)}" <${to.address}>`;
}

/** Object keys sorted, so one body with its keys in another order is the same request. */
function canonicalize(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonicalize);
  if (typeof value === 'object' && value !== null) {
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(value).sort())
      out[key] = canonicalize((value as Record<string, unknown>)[key]);
    return out;
  }
  return value;
}
