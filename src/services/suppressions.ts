import type { Kysely } from 'kysely';
import { errors } from '../domain/errors.js';
import { suppressionKey } from '../domain/suppression.js';
import type { Database, SuppressionRow } from '../storage/schema.js';
import {
  addSuppressions,
  findSuppression,
  listSuppressions,
  removeSuppression,
} from '../storage/suppressions.js';
import type { ProjectService } from './projects.js';

/** A suppression list entry as the CLI prints it (product.md §5). */
export interface SuppressionView {
  readonly email: string;
  readonly reason: SuppressionRow['reason'];
  readonly created_at: string;
  readonly request_id: string | null;
  readonly detail: string | null;
}

export function suppressionView(row: SuppressionRow): SuppressionView {
  return {
    email: row.email,
    reason: row.reason,
    created_at: new Date(row.created_at).toISOString(),
    request_id: row.request_id,
    detail: row.detail,
  };
}

/** Entries shown per page of the list. */
export const SUPPRESSION_PAGE = 100;

/** How many times an add is made while concurrent removes keep taking its entry away. */
const ADD_ROUNDS = 5;

/** A project's suppression list, managed by people (bounces and complaints add to it on their own). */
export class SuppressionService {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly projects: ProjectService,
    private readonly now: () => number = Date.now,
  ) {}

  async list(
    projectRef: string | number,
    page: { readonly limit?: number; readonly offset?: number } = {},
  ): Promise<SuppressionRow[]> {
    const project = await this.projects.resolve(projectRef);
    return listSuppressions(this.db, project.id, {
      limit: Math.min(Math.max(page.limit ?? 10_000, 1), 10_000),
      offset: Math.max(page.offset ?? 0, 0),
    });
  }

  /**
   * Adds an address by hand (`manual`). One already on the list keeps its entry as it is (a bounce
   * or complaint stays the reason, with its time): `created` is false, and `entry` is that entry.
   */
  async add(
    projectRef: string | number,
    email: string,
  ): Promise<{ entry: SuppressionRow; created: boolean }> {
    const project = await this.projects.resolve(projectRef);
    const key = suppressionKey(email);
    if (key === null)
      throw errors.invalidInput(`Not an email address: ${JSON.stringify(email.slice(0, 100))}`);
    // A remove that runs between the insert and the read takes the entry away: the add is made
    // again, as if it had come after the remove. Each round needs another remove to lose it.
    for (let round = 1; ; round++) {
      const added = await addSuppressions(this.db, [
        {
          projectId: project.id,
          email: key,
          reason: 'manual',
          requestId: null,
          detail: null,
          now: this.now(),
        },
      ]);
      const entry = await findSuppression(this.db, project.id, key);
      if (entry !== undefined) return { entry, created: added === 1 };
      if (round === ADD_ROUNDS) throw new Error(`${key} was removed as often as it was added`);
    }
  }

  /** Takes an address off the list (mail to it is sent again); returns the address as it was kept. */
  async remove(projectRef: string | number, email: string): Promise<string> {
    const project = await this.projects.resolve(projectRef);
    const key = suppressionKey(email);
    if (key === null || !(await removeSuppression(this.db, project.id, key)))
      throw errors.suppressionNotFound(email);
    return key;
  }
}
