import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import { Trouble } from '../logger.js';
import { existingProjects } from '../storage/projects.js';
import type { Database } from '../storage/schema.js';

/**
 * Which of the projects a worker holds mail for were deleted since it claimed it (a delete with
 * `force`: queued mail is never sent). A look asks the store only of projects it has not looked at
 * since projects last may have changed, where the backend can tell (`changes`); a project found
 * deleted stays so (ids are never given again).
 */
export class DeletedProjects {
  private readonly deleted = new Set<number>();
  /** Projects found to exist while `changes` read `stamp`. */
  private existing = new Set<number>();
  private stamp: string | undefined;
  private readonly trouble: Trouble;

  constructor(
    private readonly db: Kysely<Database>,
    /**
     * Moves whenever a project may have been deleted (by this process or another); undefined
     * where that cannot be told, and every look asks the store again.
     */
    private readonly changes: (() => string) | undefined,
    logger: Logger,
  ) {
    this.trouble = new Trouble(logger, 'looking for deleted projects', 'error');
  }

  /** Whether mail of `projectId` must not be begun. */
  has(projectId: number): boolean {
    return this.deleted.has(projectId);
  }

  /**
   * Looks at `held`, the projects with mail held and not begun; true when some were deleted. A
   * look the store fails is logged and answers with what is known: the next look asks again.
   */
  async look(held: ReadonlySet<number>): Promise<boolean> {
    // Read before the query: a change while it runs moves it again, and the next look asks.
    const stamp = this.changes?.();
    if (stamp === undefined || stamp !== this.stamp) this.existing = new Set();
    const unknown = [...held].filter((id) => !this.existing.has(id) && !this.deleted.has(id));
    if (unknown.length > 0) {
      try {
        const found = await existingProjects(this.db, unknown);
        for (const id of unknown) (found.has(id) ? this.existing : this.deleted).add(id);
      } catch (err) {
        this.trouble.failed(err, 'looking again at the next wake');
        return [...held].some((id) => this.deleted.has(id));
      }
      this.trouble.succeeded();
    }
    this.stamp = stamp;
    return [...held].some((id) => this.deleted.has(id));
  }
}
