import type { Kysely } from 'kysely';
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

  constructor(
    private readonly db: Kysely<Database>,
    /**
     * Moves whenever a project may have been deleted (by this process or another); undefined
     * where that cannot be told, and every look asks the store again.
     */
    private readonly changes: (() => string) | undefined,
  ) {}

  /** Whether mail of `projectId` must not be begun. */
  has(projectId: number): boolean {
    return this.deleted.has(projectId);
  }

  /** Looks at `held`, the projects with mail held and not begun; true when some were deleted. */
  async look(held: ReadonlySet<number>): Promise<boolean> {
    // Read before the query: a change while it runs moves it again, and the next look asks.
    const stamp = this.changes?.();
    if (stamp === undefined || stamp !== this.stamp) this.existing = new Set();
    const unknown = [...held].filter((id) => !this.existing.has(id) && !this.deleted.has(id));
    if (unknown.length > 0) {
      const found = await existingProjects(this.db, unknown);
      for (const id of unknown) (found.has(id) ? this.existing : this.deleted).add(id);
    }
    this.stamp = stamp;
    return [...held].some((id) => this.deleted.has(id));
  }
}
