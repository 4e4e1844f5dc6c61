import type { Kysely } from 'kysely';
import { attachmentInfo } from '../domain/attachments.js';
import type { SendRequest } from '../domain/send-request.js';
import { linkFiles } from '../storage/notification-files.js';
import { insertMetadata, type MetadataEntry } from '../storage/notification-metadata.js';
import type { Database, NewNotificationRow } from '../storage/schema.js';

/**
 * What a send stores beside its row (product.md §12): its Reply-To, metadata and list of files
 * as columns of the row, its metadata again as search rows, and its files' bytes, written before
 * the accept (file-queue.ts) and linked to the row in the accept's transaction (`storeParts`).
 */

/** A send's metadata, one entry per key, and the ids of its files' bytes, already written. */
export interface Parts {
  readonly metadata: readonly { readonly key: string; readonly value: string }[];
  readonly files: readonly number[];
}

/** A send's Reply-To, metadata and list of files as its row keeps them (null: none). */
export function messageColumns(request: SendRequest) {
  return {
    reply_to: request.replyTo ? formatMailbox(request.replyTo) : null,
    metadata: request.metadata ? JSON.stringify(request.metadata) : null,
    attachments: request.attachments ? JSON.stringify(attachmentInfo(request.attachments)) : null,
  };
}

export function partsOf(request: SendRequest, files: readonly number[]): Parts {
  return {
    metadata: Object.entries(request.metadata ?? {}).map(([key, value]) => ({ key, value })),
    files: request.attachments ? files : [],
  };
}

/** The metadata index rows and file links of the admitted requests, once their rows have ids. */
export async function storeParts(
  tx: Kysely<Database>,
  admitted: readonly {
    readonly rows: readonly Pick<NewNotificationRow, 'request_id' | 'project_id'>[];
    readonly parts: readonly Parts[];
  }[],
  ids: ReadonlyMap<string, number>,
): Promise<void> {
  const metadata: MetadataEntry[] = [];
  for (const pending of admitted)
    pending.rows.forEach((row, i) => {
      const id = ids.get(row.request_id)!;
      for (const { key, value } of pending.parts[i]!.metadata)
        metadata.push({ notification_id: id, project_id: row.project_id, key, value });
    });
  await insertMetadata(tx, metadata);
  await linkFiles(
    tx,
    admitted.flatMap((pending) =>
      pending.rows.flatMap((row, i) =>
        pending.parts[i]!.files.map((contentId, position) => ({
          notification_id: ids.get(row.request_id)!,
          position,
          content_id: contentId,
        })),
      ),
    ),
  );
}

/** A mailbox as a header writes it: the address, or a quoted display name and the address. */
export function formatMailbox(to: { name?: string; address: string }): string {
  if (to.name === undefined) return to.address;
  return `"${to.name.replace(/[\\"]/g, (c) => `\\${c}`)}" <${to.address}>`;
}
