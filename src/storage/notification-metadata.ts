import type { ExpressionBuilder, Kysely } from 'kysely';
import type { MetadataFilter } from '../domain/metadata.js';
import type { Database } from './schema.js';
import { insertInChunks } from './rows.js';

/** One key of one notification's metadata, as the search index keeps it. */
export interface MetadataEntry {
  readonly notification_id: number;
  readonly project_id: number;
  readonly key: string;
  readonly value: string;
}

/** Writes the index rows of accepted notifications' metadata, in the accept's transaction. */
export async function insertMetadata(db: Kysely<Database>, entries: readonly MetadataEntry[]): Promise<void> {
  await insertInChunks(db, 'notification_metadata', entries);
}

/**
 * A condition on `notifications` for a search: the message's metadata holds every one of these
 * values (`metadata.KEY=VALUE`), looked up in the index rather than in the messages' JSON.
 */
export function hasMetadata(filters: readonly MetadataFilter[], projectId: number | undefined) {
  return (eb: ExpressionBuilder<Database, 'notifications'>) =>
    eb.and(
      filters.map(({ key, value }) => {
        let matching = eb
          .selectFrom('notification_metadata')
          .select('notification_metadata.notification_id')
          .where('notification_metadata.key', '=', key)
          .where('notification_metadata.value', '=', value);
        if (projectId !== undefined)
          matching = matching.where('notification_metadata.project_id', '=', projectId);
        return eb('notifications.id', 'in', matching);
      }),
    );
}
