import { CompiledMessage, type LayoutSource, type RenderedMessage, type TemplateSource } from '../message.js';
import { TemplateRenderError } from './budget.js';
import { chooseLocale } from './locale.js';
import { TemplateSyntaxError } from './syntax-error.js';

/**
 * One template version as delivery renders it: its variants (the default under ''), its layout,
 * each variant compiled on first use and kept. The result says which variant and version rendered.
 */
export class LocalizedTemplate {
  private readonly compiled = new Map<string, CompiledMessage>();
  private readonly locales: string[];

  constructor(
    private readonly variants: ReadonlyMap<string, TemplateSource>,
    private readonly layout: LayoutSource | null,
    readonly version: number,
  ) {
    this.locales = [...variants.keys()].filter((tag) => tag !== '');
  }

  /** Throws TemplateRenderError: past the render's bound, or (never for a saved version) a syntax error. */
  render(values: Readonly<Record<string, unknown>>, requested: string | null): RenderedMessage {
    const locale = chooseLocale(this.locales, requested);
    const { subject, text, html } = this.message(locale ?? '').render(values);
    return { subject, text, html, templateLocale: locale, templateVersion: this.version };
  }

  /** The placeholders of that variant that render blank with these values (see CompiledMessage). */
  blankPlaceholders(requested: string | null, values: unknown): string[] {
    return this.message(chooseLocale(this.locales, requested) ?? '').blankPlaceholders(values);
  }

  private message(locale: string): CompiledMessage {
    let message = this.compiled.get(locale);
    if (message === undefined) {
      const source = this.variants.get(locale);
      if (source === undefined) throw new TemplateRenderError(`no variant ${locale || 'default'}`);
      try {
        message = new CompiledMessage(source, this.layout);
      } catch (error) {
        if (error instanceof TemplateSyntaxError) throw new TemplateRenderError(error.message);
        throw error;
      }
      this.compiled.set(locale, message);
    }
    return message;
  }
}
