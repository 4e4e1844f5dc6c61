import {
  compileTemplate,
  rendersBlank,
  sectionMissing,
  type CompiledTemplate,
  type RenderMode,
} from './render.js';
import { RENDER_LIMITS, RenderBudget, TemplateRenderError } from './template/budget.js';
import { compileHandlebars, handlebarsPlaceholders } from './template/handlebars.js';

/**
 * How a template version is written. `handlebars`: the template language (docs/templates.md).
 * `placeholders`: `{{name}}` and nothing else, every other brace literal: what templates saved
 * before Herald spoke Handlebars were written in; their versions keep rendering the same bytes.
 */
export type TemplateEngine = 'handlebars' | 'placeholders';

export interface TemplateSource {
  readonly subject: string;
  readonly text: string;
  readonly html: string | null;
  /** Handlebars unless said otherwise. */
  readonly engine?: TemplateEngine;
}

/** A layout: the frame a template's bodies go into, at `{{{content}}}` (HTML) and `{{content}}` (text). */
export interface LayoutSource {
  readonly text: string | null;
  readonly html: string | null;
}

export interface RenderedMessage {
  readonly subject: string;
  readonly text: string;
  readonly html: string | null;
  /** The locale variant that rendered (null: the default), when a stored template did. */
  readonly templateLocale?: string | null;
  /** The template version that rendered, when a stored template did. */
  readonly templateVersion?: number | null;
}

export function compilePart(source: string, mode: RenderMode, engine: TemplateEngine): CompiledTemplate {
  return engine === 'placeholders' ? compileTemplate(source, mode) : compileHandlebars(source, mode);
}

const present = (text: string | null | undefined): text is string => text != null && text !== '';

/**
 * Every placeholder a template uses (its layout's too), in order of first appearance, as
 * `CompiledMessage.placeholders` lists them, without compiling: what a list of templates shows.
 * Throws TemplateSyntaxError as compiling would.
 */
export function templatePlaceholders(source: TemplateSource, layout: LayoutSource | null = null): string[] {
  const engine = source.engine ?? 'handlebars';
  const of = (part: string, mode: RenderMode) =>
    engine === 'placeholders' ? compileTemplate(part, mode).placeholders : handlebarsPlaceholders(part, mode);
  return mergePlaceholders(
    [
      of(source.subject, 'subject'),
      of(source.text, 'text'),
      present(source.html) ? of(source.html, 'html') : [],
      present(layout?.text) ? handlebarsPlaceholders(layout.text, 'text') : [],
      present(layout?.html) ? handlebarsPlaceholders(layout.html, 'html') : [],
    ],
    present(layout?.text) || present(layout?.html),
  );
}

/** The parts' placeholders as one list; `content` is the layout's, not the caller's, in a layout. */
function mergePlaceholders(parts: readonly (readonly string[])[], framed: boolean): string[] {
  return [...new Set(parts.flat().filter((path) => path !== 'content' || !framed))];
}

/**
 * A template compiled once, in its layout if it has one: subject, text body and optional HTML
 * body. Compiling throws TemplateSyntaxError; rendering throws TemplateRenderError past the
 * message's budget (budget.ts), one budget for all its parts.
 */
export class CompiledMessage {
  private readonly subject: CompiledTemplate;
  private readonly text: CompiledTemplate;
  private readonly html: CompiledTemplate | null;
  private readonly layoutText: CompiledTemplate | null;
  private readonly layoutHtml: CompiledTemplate | null;

  constructor(source: TemplateSource, layout: LayoutSource | null = null) {
    const engine = source.engine ?? 'handlebars';
    this.subject = compilePart(source.subject, 'subject', engine);
    this.text = compilePart(source.text, 'text', engine);
    this.html = present(source.html) ? compilePart(source.html, 'html', engine) : null;
    this.layoutText = present(layout?.text) ? compileHandlebars(layout.text, 'text') : null;
    this.layoutHtml = present(layout?.html) ? compileHandlebars(layout.html, 'html') : null;
  }

  /** Every placeholder the template uses (its layout's too), in order of first appearance. */
  get placeholders(): string[] {
    return mergePlaceholders(
      [this.subject, this.text, this.html, this.layoutText, this.layoutHtml].map(
        (part) => part?.placeholders ?? [],
      ),
      this.layoutText !== null || this.layoutHtml !== null,
    );
  }

  /**
   * The placeholders that render as nothing with these values (a missing key, null, an array or
   * an object written as a value; a block's value only when it is missing): the spec lets them go
   * out blank, and people want to know that they did.
   */
  blankPlaceholders(values: unknown): string[] {
    const parts = [this.subject, this.text, this.html, this.layoutText, this.layoutHtml];
    // A path is a block's value alone only when no part writes it as a value.
    const sections = new Set(parts.flatMap((part) => part?.sections ?? []));
    for (const part of parts)
      for (const path of part?.placeholders ?? []) if (!part!.sections.includes(path)) sections.delete(path);
    return this.placeholders.filter((path) =>
      sections.has(path) ? sectionMissing(values, path) : rendersBlank(values, path),
    );
  }

  render(
    values: Readonly<Record<string, unknown>>,
    budget: RenderBudget = new RenderBudget(),
  ): RenderedMessage {
    const subject = this.subject.render(values, budget);
    if (subject.length > RENDER_LIMITS.subject)
      throw new TemplateRenderError(
        `the subject is ${subject.length} characters, more than ${RENDER_LIMITS.subject} (a long value in it belongs in the body)`,
      );
    let text = this.text.render(values, budget);
    let html = this.html?.render(values, budget) ?? null;
    // An HTML body that renders as nothing but white space (all of it in a block that is false)
    // is left out: the message goes as text, instead of blank in every client that shows HTML.
    if (html !== null && !/\S/.test(html)) html = null;
    // The layout sees the same data, and the body as `content`, whose length is counted once.
    if (this.layoutText !== null) {
      budget.rewrite(text.length);
      text = this.layoutText.render({ ...values, content: text }, budget);
    }
    if (this.layoutHtml !== null && html !== null) {
      budget.rewrite(html.length);
      html = this.layoutHtml.render({ ...values, content: html }, budget);
    }
    return { subject, text, html };
  }
}
