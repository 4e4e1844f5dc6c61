import type { Insertable, Kysely } from 'kysely';
import type { TemplateSource } from '../domain/message.js';
import { LocalizedTemplate } from '../domain/template/localized.js';
import type {
  Database,
  TemplateLayoutRow,
  TemplateRow,
  TemplateVariantRow,
  TemplateVariantsTable,
  TemplateVersionRow,
  TemplateVersionsTable,
} from './schema.js';
import { findRow } from './rows.js';
import { templateRows } from './templates.js';

/** One version of a template, whole: its row and every variant (the default first). */
export interface StoredVersion {
  readonly version: TemplateVersionRow;
  readonly variants: readonly TemplateVariantRow[];
}

/** What delivering a template reads: the template, its current version, and that version's layout. */
export interface CurrentTemplate extends StoredVersion {
  readonly template: TemplateRow;
  readonly layout: TemplateLayoutRow | null;
}

export async function insertVersion(
  db: Kysely<Database>,
  version: Insertable<TemplateVersionsTable>,
  variants: readonly Omit<Insertable<TemplateVariantsTable>, 'version_id'>[],
): Promise<TemplateVersionRow> {
  const row = await db
    .insertInto('template_versions')
    .values(version)
    .returningAll()
    .executeTakeFirstOrThrow();
  await db
    .insertInto('template_variants')
    .values(variants.map((variant) => ({ ...variant, version_id: row.id })))
    .execute();
  return row;
}

export async function findVersion(
  db: Kysely<Database>,
  templateId: number,
  version: number,
): Promise<StoredVersion | undefined> {
  const row = await findRow(db, 'template_versions', { template_id: templateId, version });
  if (row === undefined) return undefined;
  const variants = await db
    .selectFrom('template_variants')
    .selectAll()
    .where('version_id', '=', row.id)
    .orderBy('locale')
    .execute();
  return { version: row, variants };
}

/** A template's versions, newest first, each with its variants' tags and its layout's name. */
export async function listVersions(
  db: Kysely<Database>,
  templateId: number,
): Promise<(TemplateVersionRow & { layout_name: string | null; locales: string[] })[]> {
  const rows = await db
    .selectFrom('template_versions as v')
    .leftJoin('template_layouts as l', 'l.id', 'v.layout_id')
    .selectAll('v')
    .select('l.name as layout_name')
    .where('v.template_id', '=', templateId)
    .orderBy('v.version', 'desc')
    .execute();
  if (rows.length === 0) return [];
  const variants = await db
    .selectFrom('template_variants')
    .select(['version_id', 'locale'])
    .where(
      'version_id',
      'in',
      rows.map((row) => row.id),
    )
    .orderBy('locale')
    .execute();
  return rows.map((row) => ({
    ...row,
    locales: variants.filter((v) => v.version_id === row.id && v.locale !== '').map((v) => v.locale),
  }));
}

/** The template named so, at its current version, with its layout: what the worker renders. */
export async function findCurrentTemplate(
  db: Kysely<Database>,
  projectId: number,
  name: string,
): Promise<CurrentTemplate | undefined> {
  const template = await templateRows.find(db, projectId, name);
  if (template === undefined) return undefined;
  const stored = await findVersion(db, template.id, template.version);
  if (stored === undefined) return undefined;
  const layout =
    stored.version.layout_id === null
      ? null
      : ((await db
          .selectFrom('template_layouts')
          .selectAll()
          .where('id', '=', stored.version.layout_id)
          .executeTakeFirst()) ?? null);
  return { template, ...stored, layout };
}

/** A stored version as delivery renders it (worker/loader.ts keeps one per version compiled). */
export function localizedTemplate(current: CurrentTemplate): LocalizedTemplate {
  const variants = new Map<string, TemplateSource>(
    current.variants.map((v) => [
      v.locale,
      { subject: v.subject, text: v.text_body, html: v.html_body, engine: current.version.engine },
    ]),
  );
  const { layout } = current;
  return new LocalizedTemplate(
    variants,
    layout && { text: layout.text_body, html: layout.html_body },
    current.version.version,
  );
}
