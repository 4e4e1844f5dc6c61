import type { Kysely } from 'kysely';
import { errors } from '../domain/errors.js';
import { MAX_TEMPLATE_NAME_LENGTH } from '../domain/send-request.js';
import { CompiledMessage, type RenderedMessage } from '../domain/message.js';
import { closestName } from '../domain/suggest.js';
import type { Database, TemplateRow } from '../storage/schema.js';
import {
  deleteTemplate,
  findTemplate,
  insertTemplate,
  listTemplates,
  updateTemplate,
} from '../storage/templates.js';
import { isUniqueViolation } from '../storage/unique-violation.js';
import type { ProjectService } from './projects.js';
import type { Rerender } from '../domain/sensitive.js';

/** Names are bounded like the `template` field of a send request, so every template can be sent. */
export const TEMPLATE_LIMITS = {
  name: MAX_TEMPLATE_NAME_LENGTH,
  subject: 1000,
  sampleData: 64 * 1024,
  text: 256 * 1024,
  html: 512 * 1024,
} as const;

export interface Template {
  readonly id: number;
  readonly projectId: number;
  readonly name: string;
  readonly subject: string;
  readonly text: string;
  readonly html: string | null;
  /** Sample data saved with the template from the dashboard's editor (JSON text), if any. */
  readonly sampleData: string | null;
  readonly placeholders: string[];
  readonly createdAt: number;
  readonly updatedAt: number;
}

export type TemplateDiagnosis =
  | {
      readonly found: true;
      readonly blank: string[] | null;
      /** Renders the template as it is now with some data (masking puts its masks by it). */
      readonly rerender: Rerender;
    }
  | { readonly found: false; readonly names: string[]; readonly suggestion: string | null };

export interface TemplateInput {
  readonly subject?: string;
  readonly text?: string;
  readonly html?: string | null;
  readonly sampleData?: string | null;
}

function toTemplate(row: TemplateRow): Template {
  const compiled = new CompiledMessage({ subject: row.subject, text: row.text_body, html: row.html_body });
  return {
    id: row.id,
    projectId: row.project_id,
    name: row.name,
    subject: row.subject,
    text: row.text_body,
    html: row.html_body,
    sampleData: row.sample_data ?? null,
    placeholders: compiled.placeholders,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

function checkName(name: string): string {
  // Names are matched exactly (case-sensitive) against what callers send, so none is trimmed.
  if (name === '' || name.length > TEMPLATE_LIMITS.name || /[\s\p{Cc}]/u.test(name)) {
    throw errors.invalidInput(`Template name must be 1–${TEMPLATE_LIMITS.name} characters without spaces`);
  }
  return name;
}

function checkBody(input: TemplateInput): void {
  if (
    input.subject !== undefined &&
    (input.subject.trim() === '' || input.subject.length > TEMPLATE_LIMITS.subject)
  ) {
    throw errors.invalidInput(`Subject must be 1–${TEMPLATE_LIMITS.subject} characters`);
  }
  if (input.text !== undefined && input.text.length > TEMPLATE_LIMITS.text) {
    throw errors.invalidInput(`Text body must be at most ${TEMPLATE_LIMITS.text} characters`);
  }
  if (input.html != null && input.html.length > TEMPLATE_LIMITS.html) {
    throw errors.invalidInput(`HTML body must be at most ${TEMPLATE_LIMITS.html} characters`);
  }
  if (input.sampleData != null && input.sampleData.length > TEMPLATE_LIMITS.sampleData) {
    throw errors.invalidInput(`Sample data must be at most ${TEMPLATE_LIMITS.sampleData} characters`);
  }
}

export class TemplateService {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly projects: ProjectService,
    private readonly now: () => number = Date.now,
  ) {}

  async create(
    projectRef: string | number,
    input: { name: string } & Required<Pick<TemplateInput, 'subject' | 'text'>> & TemplateInput,
  ): Promise<Template> {
    const project = await this.projects.resolve(projectRef);
    checkBody(input);
    const now = this.now();
    try {
      const row = await insertTemplate(this.db, {
        project_id: project.id,
        name: checkName(input.name),
        subject: input.subject,
        text_body: input.text,
        html_body: input.html === '' ? null : (input.html ?? null),
        sample_data: input.sampleData ?? null,
        created_at: now,
        updated_at: now,
      });
      return toTemplate(row);
    } catch (error) {
      if (isUniqueViolation(error)) throw errors.templateExists(input.name);
      throw error;
    }
  }

  async update(projectRef: string | number, name: string, input: TemplateInput): Promise<Template> {
    const project = await this.projects.resolve(projectRef);
    checkBody(input);
    const row = await updateTemplate(this.db, project.id, name, {
      ...(input.subject !== undefined && { subject: input.subject }),
      ...(input.text !== undefined && { text_body: input.text }),
      ...(input.html !== undefined && { html_body: input.html === '' ? null : input.html }),
      ...(input.sampleData !== undefined && { sample_data: input.sampleData }),
      updated_at: this.now(),
    });
    if (row === undefined) throw errors.templateNotFound();
    return toTemplate(row);
  }

  async get(projectRef: string | number, name: string): Promise<Template> {
    const project = await this.projects.resolve(projectRef);
    const row = await findTemplate(this.db, project.id, name);
    if (row === undefined) throw errors.templateNotFound();
    return toTemplate(row);
  }

  async list(projectRef: string | number): Promise<Template[]> {
    const project = await this.projects.resolve(projectRef);
    return (await listTemplates(this.db, project.id)).map(toTemplate);
  }

  async delete(projectRef: string | number, name: string): Promise<void> {
    const project = await this.projects.resolve(projectRef);
    if (!(await deleteTemplate(this.db, project.id, name))) throw errors.templateNotFound();
  }

  /** Renders unsaved template text with sample data, exactly as delivery would. */
  preview(
    source: { subject: string; text: string; html?: string | null },
    data: Readonly<Record<string, unknown>>,
  ): RenderedMessage & { placeholders: string[]; blank: string[] } {
    const compiled = new CompiledMessage({
      subject: source.subject,
      text: source.text,
      html: source.html ?? null,
    });
    return {
      ...compiled.render(data),
      placeholders: compiled.placeholders,
      blank: compiled.blankPlaceholders(data),
    };
  }

  /**
   * What a notification's template says about it, for people reading a message: when no template
   * has its name, the project's names and the closest one; otherwise which placeholders render
   * blank with its data (null when the data is gone or unreadable).
   */
  async diagnose(projectId: number, name: string, data: string | null): Promise<TemplateDiagnosis> {
    const row = await findTemplate(this.db, projectId, name);
    if (row === undefined) {
      const names = (await listTemplates(this.db, projectId)).map((template) => template.name);
      return { found: false, names, suggestion: closestName(name, names) };
    }
    const compiled = new CompiledMessage({ subject: row.subject, text: row.text_body, html: row.html_body });
    const rerender: Rerender = (values) =>
      typeof values === 'object' && values !== null && !Array.isArray(values)
        ? compiled.render(values as Record<string, unknown>)
        : null;
    let values: unknown = null;
    try {
      values = data === null ? null : JSON.parse(data);
    } catch {
      values = null;
    }
    if (values === null || typeof values !== 'object') return { found: true, blank: null, rerender };
    return { found: true, blank: compiled.blankPlaceholders(values), rerender };
  }
}
