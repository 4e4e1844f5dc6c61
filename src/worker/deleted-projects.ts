import type { Kysely } from 'kysely';
import { existingProjects } from '../storage/projects.js';
import type { Database } from '../storage/schema.js';

/**
 * Which of the projects a worker holds mail for were deleted since it claimed it (a delete with
 * `force`, product docs: queued mail is never sent). A look asks the store only when projects may
 * have changed: where the backend can tell (`Storage.externalChanges`), when that has moved.
 *
 * A project id the store gave again after its project was deleted (SQLite may reuse the highest
 * id) is taken for the deleted one until the next look: its mail is only given back to the queue,
 * never lost.
 */
export class DeletedProjects {
  private deleted = new Set<number>();
  private changesSeen: string | undefined;

  constructor(
    private readonly db: Kysely<Database>,
    /**
     * Moves whenever a project may have been deleted (by this process or another); undefined
     * where that cannot be told, and every look asks the store.
     */
    private readonly changes: (() => string) | undefined,
  ) {}

  /** Whether mail of `projectId` must not be begun. */
  has(projectId: number): boolean {
    return this.deleted.has(projectId);
  }

  /** Looks again at `held`, the projects with mail held and not begun; true when some were deleted. */
  async look(held: ReadonlySet<number>): Promise<boolean> {
    if (held.size === 0) {
      this.deleted = new Set();
      return false;
    }
    const changes = this.changes?.();
    if (changes !== undefined && changes === this.changesSeen) return this.deleted.size > 0;
    // Read before the look: a change while it runs moves it again, and the next look asks.
    this.changesSeen = changes;
    const existing = await existingProjects(this.db, [...held]);
    this.deleted = new Set([...held].filter((id) => !existing.has(id)));
    return this.deleted.size > 0;
  }
}
