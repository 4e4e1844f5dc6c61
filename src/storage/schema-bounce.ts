import type { Selectable } from 'kysely';
import type { SuppressionReason } from '../domain/suppression.js';

/** What comes back from recipients' servers: suppressions and the reports read, part of `Database` in schema.ts. */

export interface SuppressionsTable {
  project_id: number;
  /** Lowercased. */
  email: string;
  reason: SuppressionReason;
  created_at: number;
  request_id: string | null;
  detail: string | null;
}

export type SuppressionRow = Selectable<SuppressionsTable>;

/**
 * Reports read from the bounce listener or mailbox (bounces/receive.ts): claimed before they are
 * parsed, `done` once applied (in the transaction of the change) or found to change nothing.
 */
export interface InboundReportsTable {
  /** SHA-256 of the bytes (and, from the listener, its envelope recipients), hex. */
  fingerprint: string;
  state: 'claimed' | 'done';
  /** The process that claimed it. */
  owner: string;
  /**
   * Claimed: a claim older than this may be taken over (its reader died before it finished). Done:
   * until then the reader that read it holds it, to move it out of the mailbox.
   */
  claimed_until: number;
  /** What it came to (bounced, soft_bounce, complained, ignored, unrecognized), once done. */
  outcome: string | null;
  created_at: number;
}
