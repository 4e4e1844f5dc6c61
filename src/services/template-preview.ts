import { HeraldError } from '../domain/errors.js';
import { CompiledMessage, type LayoutSource, type RenderedMessage } from '../domain/message.js';
import type { Rerender } from '../domain/sensitive.js';
import { closestName } from '../domain/suggest.js';
import { TemplateRenderError } from '../domain/template/budget.js';
import { checkTemplateBounds } from '../domain/template/handlebars.js';
import { TemplateSyntaxError } from '../domain/template/syntax-error.js';
import { checkSaveRules, checkVariant, type VariantContent } from './template-checks.js';
import type { TemplateService } from './templates.js';

/** What a template is to the person looking at it: its preview, or what it says about a message. */

export type TemplatePreview = RenderedMessage & {
  readonly placeholders: string[];
  readonly blank: string[];
  readonly error: string | null;
};

/**
 * Renders unsaved template text with sample data, exactly as delivery would, in a layout if given.
 * A template that does not parse, or does not render, is an `error` with its place, not an
 * exception: the editor shows it next to the preview. One that renders but that a save would
 * refuse (another service's tags, sent as written) is shown with the save's refusal as its `error`;
 * `saved`, the variant as stored, is what a save compares it with (template-checks.ts).
 */
export function previewTemplate(
  source: { subject: string; text: string; html?: string | null },
  data: Readonly<Record<string, unknown>>,
  layout: LayoutSource | null = null,
  saved?: VariantContent,
): TemplatePreview {
  const content = { subject: source.subject, text: source.text, html: source.html ?? null };
  let compiled: CompiledMessage;
  try {
    // Held to what a save takes before anything is parsed: the editor previews as the author types.
    for (const part of [content.subject, content.text, content.html ?? '']) checkTemplateBounds(part);
    compiled = new CompiledMessage(content, layout);
  } catch (error) {
    if (!(error instanceof TemplateSyntaxError || error instanceof TemplateRenderError)) throw error;
    return notRendered(refusalOf(() => checkVariant(content, 'handlebars', '', saved)) ?? error.message, []);
  }
  try {
    return {
      ...compiled.render(data),
      placeholders: compiled.placeholders,
      blank: compiled.blankPlaceholders(data),
      // It compiled: only the rules of a save are left to check.
      error: refusalOf(() => checkSaveRules(content, 'handlebars', '', saved)),
    };
  } catch (error) {
    if (!(error instanceof TemplateRenderError)) throw error;
    // It parsed: its placeholders are still the template's, whatever this data made of them.
    return notRendered(error.message, compiled.placeholders);
  }
}

function notRendered(error: string, placeholders: string[]): TemplatePreview {
  return { subject: '', text: '', html: null, placeholders, blank: [], error };
}

/** What a check of a save refuses, as the save names it; null when it passes. */
function refusalOf(check: () => void): string | null {
  try {
    check();
    return null;
  } catch (error) {
    if (error instanceof HeraldError) return error.message;
    throw error;
  }
}

export type TemplateDiagnosis =
  | {
      readonly found: true;
      readonly blank: string[] | null;
      /** Renders the template as it is now with some data (masking puts its masks by it). */
      readonly rerender: Rerender;
    }
  | { readonly found: false; readonly names: string[]; readonly suggestion: string | null };

/**
 * What a notification's template says about it, for people reading a message: when no template
 * has its name, the project's names and the closest one; otherwise which placeholders render blank
 * with its data (null when the data is gone or unreadable), and its rendering, in the variant the
 * send asked for, to mask secrets by.
 */
export async function diagnoseTemplate(
  templates: TemplateService,
  notification: { project_id: number; template: string; data: string | null; locale: string | null },
): Promise<TemplateDiagnosis> {
  const { project_id: projectId, template: name, data, locale } = notification;
  const current = await templates.current(projectId, name);
  if (current === null) {
    const names = await templates.names(projectId);
    return { found: false, names, suggestion: closestName(name, names) };
  }
  const rerender: Rerender = (values) => {
    if (typeof values !== 'object' || values === null || Array.isArray(values)) return null;
    try {
      const { subject, text, html } = current.render(values as Record<string, unknown>, locale);
      return { subject, text, html };
    } catch {
      return null;
    }
  };
  let values: unknown = null;
  try {
    values = data === null ? null : JSON.parse(data);
  } catch {
    values = null;
  }
  if (values === null || typeof values !== 'object') return { found: true, blank: null, rerender };
  let blank: string[] = [];
  try {
    blank = current.blankPlaceholders(locale, values);
  } catch {
    // A version that no longer compiles (its layout changed since) shows no placeholders.
  }
  return { found: true, blank, rerender };
}
