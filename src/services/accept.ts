import type { Kysely } from 'kysely';
import { bodyFingerprint } from '../domain/canonical-json.js';
import { errors } from '../domain/errors.js';
import { accepted, type AcceptedRow, type UsageMove } from '../domain/lifecycle.js';
import { quotaState, quotaWindow, type QuotaPeriod, type QuotaState } from '../domain/quota.js';
import { newRequestId } from '../domain/request-id.js';
import type { SendRequest } from '../domain/send-request.js';
import { GroupCommit } from '../storage/group-commit.js';
import {
  claimIdempotencyKey,
  completeIdempotencyKey,
  releaseIdempotencyKey,
} from '../storage/idempotency.js';
import { isLockTimeout, refusesWrites } from '../storage/lock-timeout.js';
import { discardFiles } from '../storage/notification-files.js';
import { insertNotifications } from '../storage/notifications.js';
import { quotaUsed, takeQuota } from '../storage/quota.js';
import type { Database, ProjectRow } from '../storage/schema.js';
import type { Storage } from '../storage/storage.js';
import { writeSetting } from '../storage/settings.js';
import { addUsage, usageDeltaRows } from '../storage/usage.js';
import { FileQueue } from './file-queue.js';
import { formatMailbox, messageColumns, partsOf, storeParts, type Parts } from './message-parts.js';
import { Signal } from './signal.js';

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

export interface AcceptCommand<Sends extends SendRequest | readonly SendRequest[] = SendRequest> {
  readonly project: ProjectRow;
  /**
   * One checked send, or a batch of 1–MAX_BATCH_SIZE checked sends, each with a recipient (see
   * `recipientOf`): a batch is accepted in one transaction, every send or none (product.md §6).
   */
  readonly sends: Sends;
  /** The body's fingerprint is computed from `body` unless given (a body checked off the event loop). */
  readonly idempotency?:
    { readonly key: string; readonly body: unknown; readonly fingerprint?: string } | undefined;
}

/** What an accept came to; `Body` is a send's or a batch's response body. */
export type AcceptOutcome<Body = SendResponseBody> =
  | { readonly kind: 'accepted'; readonly body: Body; readonly quota: QuotaState | null }
  | { readonly kind: 'replayed'; readonly body: Body; readonly quota: QuotaState | null }
  | { readonly kind: 'quota_exceeded'; readonly quota: QuotaState }
  | { readonly kind: 'idempotency_mismatch' }
  | { readonly kind: 'idempotency_in_flight' };

/** One API request (a single send or a batch) waiting for the group commit. */
interface Pending {
  readonly project: ProjectRow;
  readonly idempotency: AcceptCommand['idempotency'];
  /** The rows of its sends, with their usage: decided before the commit (domain/lifecycle.ts). */
  readonly rows: readonly AcceptedRow[];
  readonly usage: readonly UsageMove[];
  /** What each row (same index) stores beside it: its metadata's index rows and its files. */
  readonly parts: readonly Parts[];
  /** Builds the response body from the sends' bodies: the single body, or the batch body. */
  readonly respond: (bodies: SendResponseBody[]) => unknown;
  readonly fingerprint: string | null;
  readonly now: number;
}

/** A request that passed its Idempotency-Key and quota checks and waits for its rows. */
interface Admitted {
  readonly kind: 'admitted';
  readonly pending: Pending;
  readonly quota: QuotaState | null;
}

type Admission = AcceptOutcome<unknown> | Admitted;

/** The settings row readiness writes to, while sends are refused, to learn when writes work again. */
const WRITE_CHECK_SETTING = 'readiness_write_check';

/**
 * Accepts sends (spec §4.1, product.md §6): a request is answered only once its rows are committed,
 * durably. Requests that arrive while a transaction is being written go into the next one (a
 * group commit), each with its Idempotency-Key and quota increment; one request's refusal never
 * fails another's.
 */
export class AcceptService {
  private readonly group: GroupCommit<Pending, AcceptOutcome<unknown>>;
  /** Where sends' files are written before they are accepted (file-queue.ts). */
  private readonly files: FileQueue;
  /** Idempotency keys of requests being accepted by this process right now. */
  private readonly inFlight = new Set<string>();
  private readonly accepted = new Signal();
  private readonly db: Kysely<Database>;
  private readonly now: () => number;
  /**
   * Whether the last accept the store refused for want of room or write access (`refusesWrites`)
   * came after the last it committed.
   */
  private refused = false;
  /** Counts those refusals: a check write that began before the last of them does not clear it. */
  private refusals = 0;
  /** The write `takesWrites` is trying, shared by every readiness check meanwhile. */
  private probing: Promise<boolean> | null = null;

  constructor(
    private readonly storage: Pick<Storage, 'db' | 'writeConcurrency' | 'insertAccepted' | 'writeFileChunks'>,
    now: () => number = Date.now,
  ) {
    this.db = storage.db;
    this.now = now;
    this.group = new GroupCommit((batch) => this.commit(batch), {
      concurrency: storage.writeConcurrency,
      storeFailure: isLockTimeout,
    });
    this.files = new FileQueue((chunks, now) => storage.writeFileChunks(chunks, now), {
      concurrency: Math.min(2, storage.writeConcurrency),
    });
  }

  /** Called after each committed group that accepted something (the in-process worker wakes up). */
  onAccepted(listener: () => void): void {
    this.accepted.on(listener);
  }

  /**
   * Whether sends can be accepted now, for readiness (`/readyz`): after an accept the store could
   * not commit (a full disk), a small write is tried, so that the answer changes once the store
   * takes writes again, whether or not sends come meanwhile.
   */
  takesWrites(): Promise<boolean> {
    if (!this.refused) return Promise.resolve(true);
    const refusals = this.refusals;
    this.probing ??= writeSetting(this.db, WRITE_CHECK_SETTING, new Date(this.now()).toISOString())
      .then(
        () => {
          if (this.refusals === refusals) this.refused = false;
          return !this.refused;
        },
        () => false,
      )
      .finally(() => (this.probing = null));
    return this.probing;
  }

  /** Wakes the listeners of `onAccepted` as an accept would: mail workers should look now. */
  wakeWorkers(): void {
    this.accepted.fire();
  }

  /**
   * Accepts one send or a batch; resolves once its rows are committed, durably. Throws `Missing or
   * invalid 'to'` when neither `to` nor a contact email exists, `idempotencyInFlight` while the
   * same key is still being accepted here, and `queueFailed` when the store cannot commit.
   */
  accept(command: AcceptCommand<SendRequest>): Promise<AcceptOutcome<SendResponseBody>>;
  accept(command: AcceptCommand<readonly SendRequest[]>): Promise<AcceptOutcome<BatchResponseBody>>;
  async accept({
    project,
    sends,
    idempotency,
  }: AcceptCommand<SendRequest | readonly SendRequest[]>): Promise<AcceptOutcome<unknown>> {
    const batch = isBatch(sends);
    const now = this.now();
    const rows = (batch ? sends : [sends]).map((request) => {
      const recipient = recipientOf(project, request);
      if (recipient === null) throw errors.noRecipient();
      return accepted(
        {
          requestId: newRequestId(),
          projectId: project.id,
          template: request.template,
          recipient,
          // Serialized here, so a value that cannot be stays this request's failure.
          data: request.dataJson ?? JSON.stringify(request.data),
          type: request.type,
          sendAt: request.sendAt,
          locale: request.locale ?? null,
          message: messageColumns(request),
        },
        now,
      );
    });
    // Only a single send carries files (a batch refuses them).
    const files = batch ? [] : (sends.attachments?.map((file) => file.content) ?? []);
    const idemKey = idempotency ? `${project.id}\n${idempotency.key}` : null;
    if (idemKey !== null) {
      if (this.inFlight.has(idemKey)) throw errors.idempotencyInFlight();
      this.inFlight.add(idemKey);
    }
    let written: number[] = [];
    try {
      if (files.length > 0) {
        // A send the quota refuses anyway does not write its files first.
        const spent = await this.spentQuota(project, now);
        if (spent !== null) return spent;
        written = await this.files.submit(String(project.id), files, now);
      }
      const outcome = await this.group.submit({
        project,
        idempotency,
        rows: rows.map((send) => send.row),
        usage: rows.map((send) => send.usage),
        parts: (batch ? sends : [sends]).map((request) => partsOf(request, written)),
        respond: batch ? (bodies) => ({ notifications: bodies }) : (bodies) => bodies[0],
        fingerprint: idempotency ? (idempotency.fingerprint ?? bodyFingerprint(idempotency.body)) : null,
        now,
      });
      if (outcome.kind !== 'accepted' && written.length > 0) await discardFiles(this.db, written);
      this.refused = false;
      return outcome;
    } catch (error) {
      // Nothing of this request was stored but perhaps its files' bytes, which no accept links.
      if (written.length > 0) await discardFiles(this.db, written).catch(() => undefined);
      if (refusesWrites(error)) {
        this.refused = true;
        this.refusals++;
      }
      throw errors.queueFailed(error);
    } finally {
      if (idemKey !== null) this.inFlight.delete(idemKey);
    }
  }

  /** The refusal of a project whose quota is used up in this window; null while some is left. */
  private async spentQuota(project: ProjectRow, now: number): Promise<AcceptOutcome<unknown> | null> {
    if (project.quota_limit === null) return null;
    const window = quotaWindow(project.quota_period as QuotaPeriod, now);
    const quota = quotaState(project.quota_limit, await quotaUsed(this.db, project.id, window.start), window);
    return quota.remaining > 0 ? null : { kind: 'quota_exceeded', quota };
  }

  /** Waits until every accepted request is committed (graceful stop). */
  async flush(): Promise<void> {
    await this.files.flush();
    await this.group.flush();
  }

  /**
   * Commits a group: per request its Idempotency-Key and quota (`admit`), then the rows of every
   * admitted request with multi-row statements (one round trip on PostgreSQL per few hundred
   * rows), their usage, and the responses of those that carried an Idempotency-Key.
   */
  private async commit(group: readonly Pending[]): Promise<AcceptOutcome<unknown>[]> {
    const outcomes =
      (await this.commitInOneStatement(group)) ??
      (await this.db.transaction().execute(async (tx) => {
        const admissions: Admission[] = [];
        for (const pending of group) admissions.push(await admit(tx, pending));
        const admitted = admissions.filter((a): a is Admitted => a.kind === 'admitted');
        const ids = await insertNotifications(
          tx,
          admitted.flatMap((a) => a.pending.rows),
        );
        await storeParts(
          tx,
          admitted.map((a) => a.pending),
          ids,
        );
        await addUsage(
          tx,
          admitted.flatMap((a) => a.pending.usage),
        );
        const outcomes: AcceptOutcome<unknown>[] = [];
        for (const admission of admissions) {
          if (admission.kind !== 'admitted') {
            outcomes.push(admission);
            continue;
          }
          const outcome = respondAccepted(admission, ids);
          const { project, idempotency } = admission.pending;
          if (idempotency)
            await completeIdempotencyKey(tx, project.id, idempotency.key, 202, JSON.stringify(outcome.body));
          outcomes.push(outcome);
        }
        return outcomes;
      }));
    if (outcomes.some((o) => o.kind === 'accepted')) this.accepted.fire();
    return outcomes;
  }

  /**
   * A group whose requests need no statement of their own (no Idempotency-Key, no quota) goes in
   * one statement where the store has one. Undefined when the group or the store does not allow it.
   */
  private async commitInOneStatement(
    group: readonly Pending[],
  ): Promise<AcceptOutcome<unknown>[] | undefined> {
    if (this.storage.insertAccepted === undefined) return undefined;
    if (
      group.some(
        (pending) =>
          pending.idempotency !== undefined ||
          pending.project.quota_limit !== null ||
          pending.parts.some((part) => part.files.length > 0),
      )
    )
      return undefined;
    const ids = await this.storage.insertAccepted(
      group.flatMap((pending) => pending.rows),
      usageDeltaRows(group.flatMap((pending) => pending.usage)),
      group.flatMap((pending) =>
        pending.rows.flatMap((row, i) =>
          pending.parts[i]!.metadata.map((m) => ({ request_id: row.request_id, ...m })),
        ),
      ),
    );
    return ids && group.map((pending) => respondAccepted({ kind: 'admitted', pending, quota: null }, ids));
  }
}

/**
 * One request inside the group's transaction: claim the Idempotency-Key (or replay the response it
 * holds), then take quota for all of its sends at once. A refusal undoes what this request did
 * before it. Requests of an unlimited project without an Idempotency-Key need no statement here.
 */
async function admit(tx: Kysely<Database>, pending: Pending): Promise<Admission> {
  const { project, idempotency } = pending;
  const window = quotaWindow(project.quota_period as QuotaPeriod, pending.now);

  if (idempotency && pending.fingerprint !== null) {
    const claim = await claimIdempotencyKey(tx, {
      projectId: project.id,
      key: idempotency.key,
      fingerprint: pending.fingerprint,
      now: pending.now,
      expiresAt: pending.now + IDEMPOTENCY_TTL_MS,
    });
    if (!claim.claimed) {
      if (claim.existing.fingerprint !== pending.fingerprint) return { kind: 'idempotency_mismatch' };
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
    const used = await takeQuota(tx, project.id, window.start, project.quota_limit, pending.rows.length);
    if (used === null) {
      if (idempotency) await releaseIdempotencyKey(tx, project.id, idempotency.key);
      const left = await quotaUsed(tx, project.id, window.start);
      return { kind: 'quota_exceeded', quota: quotaState(project.quota_limit, left, window) };
    }
    quota = quotaState(project.quota_limit, used, window);
  }

  return { kind: 'admitted', pending, quota };
}

/** The `202` of an admitted request whose rows were inserted with these ids. */
function respondAccepted(
  admission: Admitted,
  ids: ReadonlyMap<string, number>,
): Extract<AcceptOutcome<unknown>, { kind: 'accepted' }> {
  const bodies = admission.pending.rows.map((row): SendResponseBody => ({
    id: ids.get(row.request_id)!,
    request_id: row.request_id,
    status: 'queued',
    message: 'Notification queued for delivery',
  }));
  return { kind: 'accepted', body: admission.pending.respond(bodies), quota: admission.quota };
}

/** Who a send goes to: its `to`, else the project's contact email; null when neither exists. */
export function recipientOf(project: ProjectRow, request: SendRequest): string | null {
  if (request.to?.address) return formatMailbox(request.to);
  return project.contact_email || null;
}

function isBatch(sends: SendRequest | readonly SendRequest[]): sends is readonly SendRequest[] {
  return Array.isArray(sends);
}
