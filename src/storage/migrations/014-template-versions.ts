import { timestamps, type Ddl } from './columns.js';

/** Migration 014_template_versions: released, so never edited (a change is a new migration). */
export const templateVersions: Ddl = (t) => [
  // Layouts (product.md §11): a project's shared frames, which template versions point at.
  `CREATE TABLE template_layouts (
      id ${t.id},
      project_id ${t.bigint} NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
      name TEXT NOT NULL,
      html_body TEXT,
      text_body TEXT,
      ${timestamps(t)},
      UNIQUE (project_id, name)
    )`,
  // Every create or update of a template is a version, a whole snapshot: its layout, its engine
  // and all its variants. A layout still named by an old version can be deleted; the old version
  // then has none.
  `CREATE TABLE template_versions (
      id ${t.id},
      template_id ${t.bigint} NOT NULL REFERENCES templates(id) ON DELETE CASCADE,
      version INTEGER NOT NULL,
      engine TEXT NOT NULL,
      layout_id ${t.bigint} REFERENCES template_layouts(id) ON DELETE SET NULL,
      note TEXT,
      created_at ${t.bigint} NOT NULL,
      UNIQUE (template_id, version)
    )`,
  `CREATE INDEX template_versions_layout ON template_versions (layout_id)`,
  // A version's variants: the default (locale '') and one per locale tag.
  `CREATE TABLE template_variants (
      version_id ${t.bigint} NOT NULL REFERENCES template_versions(id) ON DELETE CASCADE,
      locale TEXT NOT NULL,
      subject TEXT NOT NULL,
      text_body TEXT NOT NULL,
      html_body TEXT,
      PRIMARY KEY (version_id, locale)
    )`,
  // The version a template is at. Its subject and bodies stay those of that version's default
  // variant, so readers of the template alone need no join.
  `ALTER TABLE templates ADD COLUMN version INTEGER NOT NULL DEFAULT 1`,
  // Every template saved before becomes version 1 of its default variant, in the placeholder
  // engine it was written for, so it renders the same bytes as before.
  `INSERT INTO template_versions (template_id, version, engine, layout_id, note, created_at)
      SELECT id, 1, 'placeholders', NULL, NULL, updated_at FROM templates`,
  `INSERT INTO template_variants (version_id, locale, subject, text_body, html_body)
      SELECT v.id, '', t.subject, t.text_body, t.html_body
      FROM templates t JOIN template_versions v ON v.template_id = t.id`,
  // The locale a send asked for, and the variant and version that rendered it.
  `ALTER TABLE notifications ADD COLUMN locale TEXT`,
  `ALTER TABLE notifications ADD COLUMN template_locale TEXT`,
  `ALTER TABLE notifications ADD COLUMN template_version INTEGER`,
];
