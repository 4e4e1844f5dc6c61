import type { Kysely } from 'kysely';
import { errors } from '../domain/errors.js';
import { hasContentPlaceholder } from '../domain/template/layout-content.js';
import type { Database, TemplateLayoutRow } from '../storage/schema.js';
import { deleteLayout, layoutRows, layoutUsers } from '../storage/template-layouts.js';
import { isUniqueViolation } from '../storage/unique-violation.js';
import type { ProjectService } from './projects.js';
import { checkName, checkSizes, checkSavedPart, invalidTemplate } from './template-checks.js';

/** How many of the templates that use a layout its refused deletion names. */
const NAMED_USERS = 5;

export interface Layout {
  readonly id: number;
  readonly name: string;
  readonly html: string | null;
  readonly text: string | null;
  readonly createdAt: number;
  readonly updatedAt: number;
}

export interface LayoutInput {
  readonly html?: string | null;
  readonly text?: string | null;
}

function toLayout(row: TemplateLayoutRow): Layout {
  return {
    id: row.id,
    name: row.name,
    html: row.html_body,
    text: row.text_body,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

/** A layout's part changed is held to every rule of a save, and named as the layout's. */
const LAYOUT_PART = { label: ' (layout)', rules: true } as const;

const blankToNull = (value: string | null | undefined) => (value === '' ? null : value);

/**
 * A layout must parse and hold its content placeholder: `{{{content}}}` in its HTML (the body is
 * HTML already), `{{content}}` in its text. One of the two is enough; a template's part goes into
 * the layout's part of the same kind. A part `unchanged` from the stored one is not checked again.
 */
function checkLayout(
  html: string | null,
  text: string | null,
  unchanged: { readonly html: boolean; readonly text: boolean } = { html: false, text: false },
): void {
  if (html === null && text === null) throw errors.invalidInput('A layout needs an HTML or a text frame');
  checkSizes({ html, text });
  if (html !== null && !unchanged.html) {
    checkSavedPart(html, 'html', 'handlebars', LAYOUT_PART);
    if (!hasContentPlaceholder(html, 'html'))
      throw invalidTemplate(
        "a layout's HTML must have {{{content}}} where the template's HTML body goes, outside {{#each}}, {{#with}} and sections",
      );
  }
  if (text !== null && !unchanged.text) {
    checkSavedPart(text, 'text', 'handlebars', LAYOUT_PART);
    if (!hasContentPlaceholder(text, 'text'))
      throw invalidTemplate(
        "a layout's text must have {{content}} where the template's text body goes, outside {{#each}}, {{#with}} and sections",
      );
  }
}

/** A project's layouts: shared frames templates go into (product.md §11). */
export class LayoutService {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly projects: ProjectService,
    private readonly now: () => number = Date.now,
  ) {}

  async create(projectRef: string | number, input: { name: string } & LayoutInput): Promise<Layout> {
    const project = await this.projects.resolve(projectRef);
    const html = blankToNull(input.html) ?? null;
    const text = blankToNull(input.text) ?? null;
    checkLayout(html, text);
    const now = this.now();
    try {
      const row = await layoutRows.insert(this.db, {
        project_id: project.id,
        name: checkName(input.name, 'Layout'),
        html_body: html,
        text_body: text,
        created_at: now,
        updated_at: now,
      });
      return toLayout(row);
    } catch (error) {
      if (isUniqueViolation(error)) throw errors.layoutExists(input.name);
      throw error;
    }
  }

  /** Changes a layout; every template in it renders with the change from then on. */
  async update(projectRef: string | number, name: string, input: LayoutInput): Promise<Layout> {
    const project = await this.projects.resolve(projectRef);
    const before = await layoutRows.find(this.db, project.id, name);
    if (before === undefined) throw errors.layoutNotFound(name);
    const html = input.html === undefined ? before.html_body : (blankToNull(input.html) ?? null);
    const text = input.text === undefined ? before.text_body : (blankToNull(input.text) ?? null);
    // Saved again as it is (a form saved without a change, a repeated PUT): nothing to write.
    if (html === before.html_body && text === before.text_body) return toLayout(before);
    // A part left as it is stays as it was accepted: a rule added since does not lock it.
    checkLayout(html, text, { html: html === before.html_body, text: text === before.text_body });
    const row = await layoutRows.update(this.db, project.id, name, {
      html_body: html,
      text_body: text,
      updated_at: this.now(),
    });
    if (row === undefined) throw errors.layoutNotFound(name);
    return toLayout(row);
  }

  async get(projectRef: string | number, name: string): Promise<Layout> {
    const project = await this.projects.resolve(projectRef);
    const row = await layoutRows.find(this.db, project.id, name);
    if (row === undefined) throw errors.layoutNotFound(name);
    return toLayout(row);
  }

  async list(projectRef: string | number): Promise<Layout[]> {
    const project = await this.projects.resolve(projectRef);
    return (await layoutRows.list(this.db, project.id)).map(toLayout);
  }

  /** Refused while a template's current version uses it, naming how many do and which. */
  async delete(projectRef: string | number, name: string): Promise<void> {
    const project = await this.projects.resolve(projectRef);
    const row = await layoutRows.find(this.db, project.id, name);
    if (row === undefined) throw errors.layoutNotFound(name);
    const { names, count } = await layoutUsers(this.db, row.id, NAMED_USERS);
    if (count > 0) {
      const more = count > names.length ? `, and ${count - names.length} more` : '';
      throw errors.conflict(
        `Layout ${name} is used by ${count} template${count === 1 ? '' : 's'} (${names.join(', ')}${more}); ` +
          'attach them elsewhere first',
      );
    }
    await deleteLayout(this.db, row.id);
  }
}
