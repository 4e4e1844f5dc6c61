import type { Kysely } from 'kysely';
import { attachmentInfo } from '../domain/attachments.js';
import type { SendRequest } from '../domain/send-request.js';
import { GroupCommit } from '../storage/group-commit.js';
import { linkFiles } from '../storage/notification-files.js';
import { insertMetadata, type MetadataEntry } from '../storage/notification-metadata.js';
import type { Database, NewNotificationRow, ProjectRow } from '../storage/schema.js';
import type { Storage } from '../storage/storage.js';

/**
 * What a send stores beside its row (product.md §12): its Reply-To, metadata and list of files
 * as columns of the row, its metadata again as search rows, and its files' bytes, written before
 * the accept (`fileWriterQueue`) and linked to the row in the accept's transaction (`storeParts`).
 */

/** A send's metadata, one entry per key, and the ids of its files' bytes, already written. */
export interface Parts {
  readonly metadata: readonly { readonly key: string; readonly value: string }[];
  readonly files: readonly number[];
}

/** A send's files, to be written before it is accepted. */
export interface FilesJob {
  readonly project: ProjectRow;
  readonly files: readonly Uint8Array[];
  readonly now: number;
}

/**
 * Where sends' files are written before they are accepted (Storage.stageFile): a send's files
 * one after another, one send at a time (two on PostgreSQL), projects in turn. A project's flood
 * of 10 MiB sends thus holds another project's files back by one send's, and never stands in the
 * group commit, which every project's small sends share and which only links the files (product.md
 * §12: one project's large sends never hold another's small send back). Resolves to the ids.
 */
export type FileWriterQueue = GroupCommit<FilesJob, number[]>;

export function fileWriterQueue(storage: Pick<Storage, 'stageFile' | 'writeConcurrency'>): FileWriterQueue {
  return new GroupCommit(
    async ([job]) => {
      const ids: number[] = [];
      for (const content of job!.files) ids.push(await storage.stageFile(content, job!.now));
      return [ids];
    },
    {
      maxBatch: 1,
      concurrency: Math.min(2, storage.writeConcurrency),
      keyOf: (job) => String(job.project.id),
    },
  );
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
