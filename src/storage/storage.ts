import type { Kysely } from 'kysely';
import type { Database, NotificationRow, WebhookDeliveryRow } from './schema.js';

/**
 * What a storage backend provides beyond the shared Kysely queries: its connection, the one query
 * whose SQL differs per backend (claiming due notifications), migrations and lifecycle.
 */
export interface Storage {
  readonly kind: 'sqlite' | 'postgres';
  readonly db: Kysely<Database>;
  /** Marks up to `limit` due queued notifications as `sending` under a lease and returns them. */
  claimDue(claim: ClaimRequest): Promise<NotificationRow[]>;
  /** Marks up to `limit` due deliveries of one webhook endpoint as `sending` under a lease. */
  claimWebhooks(claim: WebhookClaim): Promise<WebhookDeliveryRow[]>;
  /** Extends the leases this worker holds on messages it is still sending. */
  renewLeases(renew: RenewRequest): Promise<void>;
  /** Write transactions worth running at once (group-commit batches in flight). */
  readonly writeConcurrency: number;
  /** Applies pending migrations; safe when several processes migrate the same database at once. */
  migrate(): Promise<void>;
  /**
   * A number that changes whenever another connection may have changed what a process keeps in
   * memory, where the backend can tell cheaply: SQLite's data_version (any commit of another
   * connection), or on PostgreSQL the notices of changes to projects (in server processes, which
   * listen for them). Undefined where it cannot tell, and nothing is kept.
   */
  readonly externalChanges?: () => number;
  /**
   * How long after a change to projects commits until no process that keeps projects in memory
   * can still answer from before it (0 where every lookup checks first). A key rotation waits
   * this long before it reports success, so the old key is refused everywhere once it has.
   */
  readonly projectChangesSettleMs: number;
  /**
   * A number that moves whenever another connection commits anything (SQLite's data_version);
   * undefined where the backend cannot tell cheaply. A worker claims again only when work may
   * have been committed elsewhere, instead of after every message.
   */
  readonly otherCommits?: () => number;
  /** Throws when the database does not answer. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

export interface ClaimRequest {
  readonly now: number;
  readonly owner: string;
  readonly leaseUntil: number;
  readonly limit: number;
  /** Projects whose relay is saturated in this worker: their mail is left for later. */
  readonly excludeProjects?: readonly number[];
}

export interface RenewRequest {
  readonly ids: readonly number[];
  readonly owner: string;
  readonly leaseUntil: number;
}

export interface WebhookClaim {
  readonly endpointId: number;
  readonly now: number;
  readonly owner: string;
  readonly leaseUntil: number;
  readonly limit: number;
}
