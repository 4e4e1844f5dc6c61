import type { Kysely } from 'kysely';
import { ErrorCode, HeraldError, errors } from '../domain/errors.js';
import type { LayoutSource, TemplateEngine } from '../domain/message.js';
import type { LocalizedTemplate } from '../domain/template/localized.js';
import type { Database, TemplateRow } from '../storage/schema.js';
import { layoutRows } from '../storage/template-layouts.js';
import {
  findCurrentTemplate,
  localizedTemplate,
  findVersion,
  insertVersion,
  listVersions,
  type CurrentTemplate,
} from '../storage/template-versions.js';
import { templateRows } from '../storage/templates.js';
import { isUniqueViolation } from '../storage/unique-violation.js';
import type { ProjectService } from './projects.js';
import {
  checkName,
  checkSizes,
  checkVariant,
  checkVariants,
  type VariantContent,
} from './template-checks.js';
import {
  emptyHtml,
  sameContent,
  variantRows,
  variantsFrom,
  type TemplateContent,
} from './template-content.js';
import {
  DEFAULT,
  handlebarsVariants,
  localeOf,
  toTemplate,
  variantsOf,
  type CreateInput,
  type Template,
  type TemplateInput,
  type TemplateVersion,
  type TemplateVersionContent,
} from './template-model.js';

export { TEMPLATE_LIMITS } from './template-checks.js';

export type {
  CreateInput,
  Template,
  TemplateInput,
  TemplateVersion,
  TemplateVersionContent,
} from './template-model.js';

/** A version asked for that the template does not have, named as it was asked for. */
export function noSuchVersion(name: string, version: number | string): HeraldError {
  return errors.invalidInput(`Template ${JSON.stringify(name)} has no version ${version}`);
}

export class TemplateService {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly projects: ProjectService,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * Creates a template (version 1 of its default variant), or, with `locale`, adds that variant to
   * an existing template as its next version.
   */
  async create(projectRef: string | number, input: CreateInput): Promise<Template> {
    const project = await this.projects.resolve(projectRef);
    checkSizes(input);
    const locale = localeOf(input);
    if (locale !== DEFAULT) {
      const current = await findCurrentTemplate(this.db, project.id, input.name);
      if (current === undefined) throw errors.templateNotFound();
      if (variantsOf(current).has(locale))
        throw errors.invalidInput(`Template ${JSON.stringify(input.name)} already has a ${locale} variant`);
      return this.update(project.id, input.name, input);
    }
    const content = { subject: input.subject, text: input.text, html: emptyHtml(input.html) ?? null };
    checkVariant(content, 'handlebars', DEFAULT);
    const layout = await this.layoutFor(project.id, input.layout ?? null);
    await this.insertNew(project.id, input.name, new Map([[DEFAULT, content]]), layout?.id ?? null, input);
    return this.get(project.id, input.name);
  }

  /**
   * Sets a template to exactly this content (the admin API's PUT): its default variant, its locale
   * variants (any not given are removed) and its layout (none when not given). A new template is
   * version 1; a change is one new version with every variant; the same content again changes
   * nothing, so deploying unchanged files makes no versions.
   */
  async put(
    projectRef: string | number,
    name: string,
    input: TemplateContent,
  ): Promise<{ template: Template; outcome: 'created' | 'updated' | 'unchanged' }> {
    const project = await this.projects.resolve(projectRef);
    let current = await findCurrentTemplate(this.db, project.id, name);
    const variants = variantsFrom(input);
    await checkVariants(variants, 'handlebars', current === undefined ? undefined : variantsOf(current));
    const layoutId = (await this.layoutFor(project.id, input.layout ?? null))?.id ?? null;
    if (current === undefined) {
      try {
        await this.insertNew(project.id, name, variants, layoutId, {});
        return { template: await this.get(project.id, name), outcome: 'created' };
      } catch (error) {
        if (!(error instanceof HeraldError && error.code === ErrorCode.TemplateExists)) throw error;
        // Another PUT created it while this one was checked: this one updates what that one made.
        current = await findCurrentTemplate(this.db, project.id, name);
        if (current === undefined) throw error;
      }
    }
    if (sameContent(current, variants, layoutId))
      return { template: toTemplate(current), outcome: 'unchanged' };
    await this.saveVersion(current, variants, { engine: 'handlebars', layoutId, checked: true });
    return { template: await this.get(project.id, name), outcome: 'updated' };
  }

  /** A new template at version 1 with these variants (checked by the caller). */
  private async insertNew(
    projectId: number,
    name: string,
    variants: ReadonlyMap<string, VariantContent>,
    layoutId: number | null,
    input: Pick<TemplateInput, 'sampleData'>,
  ): Promise<void> {
    const main = variants.get(DEFAULT) as VariantContent;
    const now = this.now();
    try {
      await this.db.transaction().execute(async (tx) => {
        const row = await templateRows.insert(tx, {
          project_id: projectId,
          name: checkName(name),
          subject: main.subject,
          text_body: main.text,
          html_body: main.html,
          sample_data: input.sampleData ?? null,
          created_at: now,
          updated_at: now,
          version: 1,
        });
        await insertVersion(
          tx,
          { template_id: row.id, version: 1, engine: 'handlebars', layout_id: layoutId, created_at: now },
          variantRows(variants),
        );
      });
    } catch (error) {
      if (isUniqueViolation(error)) throw errors.templateExists(name);
      throw error;
    }
  }

  /**
   * Changes a template: any change of content or layout is a new version, a whole snapshot with
   * every variant. Sample data alone is not content and makes no version.
   */
  async update(projectRef: string | number, name: string, input: TemplateInput): Promise<Template> {
    const project = await this.projects.resolve(projectRef);
    checkSizes(input);
    const locale = localeOf(input);
    const changesContent =
      input.subject !== undefined ||
      input.text !== undefined ||
      input.html !== undefined ||
      input.layout !== undefined;
    if (!changesContent) return this.keepContent(project.id, name, input.sampleData);
    const current = await findCurrentTemplate(this.db, project.id, name);
    if (current === undefined) throw errors.templateNotFound();
    const saved = variantsOf(current).get(locale);
    const variants = handlebarsVariants(current);
    const before = variants.get(locale);
    if (before === undefined && (input.subject === undefined || input.text === undefined))
      throw errors.invalidInput(`A new ${locale} variant needs a subject and a text body`);
    // A part left out, or sent back as it was saved (a form sends every field), stays as it was.
    const keep = <T>(given: T | undefined, savedPart: T | undefined, kept: T): T =>
      given === undefined || given === savedPart ? kept : given;
    const html = input.html === undefined ? undefined : (emptyHtml(input.html) ?? null);
    const touched = input.subject !== undefined || input.text !== undefined || input.html !== undefined;
    if (touched || before === undefined) {
      variants.set(locale, {
        subject: keep(input.subject, saved?.subject, before?.subject ?? ''),
        text: keep(input.text, saved?.text, before?.text ?? ''),
        html: keep(html, saved?.html, before?.html ?? null),
      });
    }
    const layoutId =
      input.layout === undefined
        ? current.version.layout_id
        : ((await this.layoutFor(project.id, input.layout))?.id ?? null);
    // The content as it already is (a form saved without a change) makes no version.
    if (sameContent(current, variants, layoutId)) return this.keepContent(project.id, name, input.sampleData);
    await this.saveVersion(current, variants, {
      engine: 'handlebars',
      layoutId,
      sampleData: input.sampleData,
    });
    return this.get(project.id, name);
  }

  /**
   * An update that makes no version: only the sample data, when given and different, changes, and
   * only then does the template count as updated.
   */
  private async keepContent(
    projectId: number,
    name: string,
    sampleData: string | null | undefined,
  ): Promise<Template> {
    const template = await this.get(projectId, name);
    if (sampleData === undefined || sampleData === template.sampleData) return template;
    const row = await templateRows.update(this.db, projectId, name, {
      sample_data: sampleData,
      updated_at: this.now(),
    });
    if (row === undefined) throw errors.templateNotFound();
    return this.get(projectId, name);
  }

  /** Removes a locale variant: a new version without it. The default variant is the template. */
  async deleteVariant(projectRef: string | number, name: string, locale: string): Promise<Template> {
    const project = await this.projects.resolve(projectRef);
    const tag = localeOf({ locale });
    const current = await findCurrentTemplate(this.db, project.id, name);
    if (current === undefined) throw errors.templateNotFound();
    const variants = variantsOf(current);
    const stored = [...variants.keys()].find((key) => key.toLowerCase() === tag.toLowerCase());
    if (tag === DEFAULT || stored === undefined)
      throw errors.invalidInput(`Template ${JSON.stringify(name)} has no ${tag} variant`);
    variants.delete(stored);
    await this.saveVersion(current, variants, {
      engine: current.version.engine,
      layoutId: current.version.layout_id,
    });
    return this.get(project.id, name);
  }

  /**
   * A new version with version `n`'s content (its variants, layout and engine); none when that is
   * the current content already (`unchanged`).
   */
  async rollback(
    projectRef: string | number,
    name: string,
    n: number,
  ): Promise<{ template: Template; outcome: 'updated' | 'unchanged' }> {
    const project = await this.projects.resolve(projectRef);
    const current = await findCurrentTemplate(this.db, project.id, name);
    if (current === undefined) throw errors.templateNotFound();
    const target = Number.isSafeInteger(n) ? await findVersion(this.db, current.template.id, n) : undefined;
    if (target === undefined) throw noSuchVersion(name, n);
    // A rollback restores what was saved once: its parts are not held to rules made since.
    const restored = variantsOf(target);
    const { engine, layout_id: layoutId } = target.version;
    if (sameContent(current, restored, layoutId, engine))
      return { template: toTemplate(current), outcome: 'unchanged' };
    await this.saveVersion(current, restored, { engine, layoutId, note: `rollback to ${n}`, from: restored });
    return { template: await this.get(project.id, name), outcome: 'updated' };
  }

  private async saveVersion(
    current: CurrentTemplate,
    variants: Map<string, VariantContent>,
    made: NewVersion,
  ): Promise<void> {
    const { engine, layoutId, note = null, sampleData } = made;
    for (const content of variants.values()) checkSizes(content);
    if (made.checked !== true) await checkVariants(variants, engine, made.from ?? variantsOf(current));
    const now = this.now();
    const main = variants.get(DEFAULT) as VariantContent;
    const version = current.template.version + 1;
    try {
      await this.db.transaction().execute(async (tx) => {
        // Conditional on the version read: of two saves racing from the same version, one wins.
        const moved = await tx
          .updateTable('templates')
          .set({
            subject: main.subject,
            text_body: main.text,
            html_body: main.html,
            version,
            updated_at: now,
            ...(sampleData !== undefined && { sample_data: sampleData }),
          })
          .where('id', '=', current.template.id)
          .where('version', '=', current.template.version)
          .executeTakeFirst();
        if (moved.numUpdatedRows === 0n) throw errors.conflict('The template changed meanwhile; try again');
        await insertVersion(
          tx,
          { template_id: current.template.id, version, engine, layout_id: layoutId, note, created_at: now },
          variantRows(variants),
        );
      });
    } catch (error) {
      if (isUniqueViolation(error)) throw errors.conflict('The template changed meanwhile; try again');
      throw error;
    }
  }

  private async layoutFor(projectId: number, name: string | null) {
    if (name === null || name === '') return null;
    const layout = await layoutRows.find(this.db, projectId, name);
    if (layout === undefined) throw errors.invalidInput(`Layout not found: ${name}`);
    return layout;
  }

  async get(projectRef: string | number, name: string): Promise<Template> {
    const project = await this.projects.resolve(projectRef);
    const current = await findCurrentTemplate(this.db, project.id, name);
    if (current === undefined) throw errors.templateNotFound();
    return toTemplate(current);
  }

  async list(projectRef: string | number): Promise<Template[]> {
    const project = await this.projects.resolve(projectRef);
    const rows = await templateRows.list(this.db, project.id);
    const all = await Promise.all(rows.map((row) => findCurrentTemplate(this.db, project.id, row.name)));
    return all.filter((t): t is CurrentTemplate => t !== undefined).map(toTemplate);
  }

  async delete(projectRef: string | number, name: string): Promise<void> {
    const project = await this.projects.resolve(projectRef);
    if (!(await templateRows.delete(this.db, project.id, name))) throw errors.templateNotFound();
  }

  /** A template's versions, newest first. */
  async versions(projectRef: string | number, name: string): Promise<TemplateVersion[]> {
    const template = await this.get(projectRef, name);
    return (await listVersions(this.db, template.id)).map((row) => ({
      version: row.version,
      createdAt: row.created_at,
      engine: row.engine,
      layout: row.layout_name,
      locales: row.locales,
      note: row.note,
    }));
  }

  /** One version's whole content. */
  async version(projectRef: string | number, name: string, n: number): Promise<TemplateVersionContent> {
    const template = await this.get(projectRef, name);
    const stored = await findVersion(this.db, template.id, n);
    if (stored === undefined) throw noSuchVersion(name, n);
    const layout =
      stored.version.layout_id === null
        ? undefined
        : await layoutRows.findById(this.db, stored.version.layout_id);
    return {
      version: stored.version.version,
      createdAt: stored.version.created_at,
      engine: stored.version.engine,
      layout: layout?.name ?? null,
      locales: stored.variants.filter((v) => v.locale !== DEFAULT).map((v) => v.locale),
      note: stored.version.note,
      variants: Object.fromEntries(variantsOf(stored)),
    };
  }

  /** The layout a preview uses, by name; null for none. */
  async layoutSource(projectRef: string | number, name: string | null): Promise<LayoutSource | null> {
    if (name === null || name === '') return null;
    const project = await this.projects.resolve(projectRef);
    const layout = await this.layoutFor(project.id, name);
    return layout && { text: layout.text_body, html: layout.html_body };
  }

  /** A template as delivery renders it now: its current version, variants and layout; null: none. */
  async current(projectId: number, name: string): Promise<LocalizedTemplate | null> {
    const current = await findCurrentTemplate(this.db, projectId, name);
    return current === undefined ? null : localizedTemplate(current);
  }

  /** A variant as the current version stores it, what a save compares its parts with; undefined: none. */
  async storedVariant(projectId: number, name: string, locale: string): Promise<VariantContent | undefined> {
    const current = await findCurrentTemplate(this.db, projectId, name);
    return current === undefined ? undefined : variantsOf(current).get(locale);
  }

  /** The names of a project's templates. */
  async names(projectId: number): Promise<string[]> {
    return (await templateRows.list(this.db, projectId)).map((template: TemplateRow) => template.name);
  }
} /** How `saveVersion` makes a version, besides its variants. */
interface NewVersion {
  readonly engine: TemplateEngine;
  readonly layoutId: number | null;
  /** Shown in the template's history (a rollback's). */
  readonly note?: string;
  /** The sample data saved with it; undefined keeps the template's. */
  readonly sampleData?: string | null;
  /** The variants the parts are checked against (`checkVariant`): the current version's unless given. */
  readonly from?: ReadonlyMap<string, VariantContent>;
  /** The variants were checked already (a PUT checks them as it reads them). */
  readonly checked?: boolean;
}
