import { compileTemplate, rendersBlank, type CompiledTemplate } from './render.js';

export interface TemplateSource {
  readonly subject: string;
  readonly text: string;
  readonly html: string | null;
}

export interface RenderedMessage {
  readonly subject: string;
  readonly text: string;
  readonly html: string | null;
}

/** A template compiled once: subject, text body and optional HTML body. */
export class CompiledMessage {
  private readonly subject: CompiledTemplate;
  private readonly text: CompiledTemplate;
  private readonly html: CompiledTemplate | null;

  constructor(source: TemplateSource) {
    this.subject = compileTemplate(source.subject, 'subject');
    this.text = compileTemplate(source.text, 'text');
    this.html = source.html === null || source.html === '' ? null : compileTemplate(source.html, 'html');
  }

  /** Every placeholder the template uses, in order of first appearance. */
  get placeholders(): string[] {
    const all = [...this.subject.placeholders, ...this.text.placeholders, ...(this.html?.placeholders ?? [])];
    return [...new Set(all)];
  }

  /**
   * The placeholders that render as nothing with these values (a missing key, null, an array or
   * an object): the spec lets them go out blank, and people want to know that they did.
   */
  blankPlaceholders(values: unknown): string[] {
    return this.placeholders.filter((path) => rendersBlank(values, path));
  }

  render(values: Readonly<Record<string, unknown>>): RenderedMessage {
    return {
      subject: this.subject.render(values),
      text: this.text.render(values),
      html: this.html?.render(values) ?? null,
    };
  }
}
