/**
 * The bound on one message's render. Templates are written by people and data is sent by callers:
 * `{{#each}}` over a long list, blocks nested inside loops, or a large value repeated many times
 * could otherwise build gigabytes or hold the worker's event loop for minutes, and every project's
 * mail waits behind that worker. Rendering is synchronous, so the bound is on work, counted as it
 * is done, not on the clock: the same template and data always render, or fail, the same way,
 * however loaded the machine is.
 */

export const RENDER_LIMITS = {
  /**
   * Block bodies rendered per message: each `{{#each}}` item, each `{{#if}}`/`{{#with}}` body
   * taken. An order of a few hundred lines with a few conditions per line stays far below it; a
   * loop over a hundred thousand items does not.
   */
  blocks: 10_000,
  /**
   * Placeholders written per message (`{{x}}`, `{{{x}}}`), blank ones too: what the blocks bound
   * leaves free, a thousand placeholders inside each of those blocks. An order of a thousand lines
   * with a few dozen placeholders each stays below it.
   */
  values: 100_000,
  /**
   * Steps through the data per message: each segment of each path read (`{{order.customer.name}}`
   * is three), blocks' values included. Long paths repeated in a loop cost in proportion to them.
   */
  lookups: 400_000,
  /**
   * Characters a message's parts may add up to (subject, text and HTML, each within its layout).
   * Mailbox providers refuse messages over 10–25 MB and clip HTML bodies long before that.
   */
  output: 2 * 1024 * 1024,
  /**
   * Characters of the rendered subject, twice what a template's subject may be written with. Mail
   * clients show the first hundred or so, and relays keep a message's header to some tens of
   * kilobytes (Postfix drops what passes its `header_size_limit`): a subject longer than this is a
   * value that belongs in the body.
   */
  subject: 2000,
} as const;

/** The prefix of the `error_message` of a message whose template could not be rendered. */
export const RENDER_FAILED = 'Template render failed';

/** A render that failed: past the bound, or an error from the engine. Final for the message. */
export class TemplateRenderError extends Error {
  override name = 'TemplateRenderError';
  constructor(reason: string) {
    super(`${RENDER_FAILED}: ${reason}`);
  }
}

/**
 * Counts one message's render against RENDER_LIMITS. Output is counted where it is made: every
 * value written, and the text each block body adds of its own (its length less what the blocks
 * nested in it returned), so text is counted once however deeply it is nested.
 */
export class RenderBudget {
  private blocks = 0;
  private values = 0;
  private lookups = 0;
  private output = 0;
  /** Per open block body: the length its nested bodies returned so far. */
  private readonly nested: number[] = [];

  constructor(
    private readonly limits: {
      blocks: number;
      values: number;
      lookups: number;
      output: number;
    } = RENDER_LIMITS,
  ) {}

  /** A placeholder written, `length` characters long as written (escaped), inside a block body or not. */
  value(length: number): void {
    if (++this.values > this.limits.values) {
      throw new TemplateRenderError(
        `more than ${this.limits.values} placeholders written (many placeholders in an #each over many items?)`,
      );
    }
    this.charge(length);
  }

  /** Segments of a path read from the data: one, or a whole path's. */
  lookup(segments = 1): void {
    this.lookups += segments;
    if (this.lookups > this.limits.lookups) {
      throw new TemplateRenderError(
        `more than ${this.limits.lookups} steps through the data (long paths, or many placeholders in an #each over many items?)`,
      );
    }
  }

  private charge(length: number): void {
    this.output += length;
    const depth = this.nested.length;
    if (depth > 0) this.nested[depth - 1] = (this.nested[depth - 1] ?? 0) + length;
    if (this.output > this.limits.output) {
      throw new TemplateRenderError(`output larger than ${this.limits.output} characters`);
    }
  }

  enterBlock(): void {
    if (++this.blocks > this.limits.blocks) {
      throw new TemplateRenderError(
        `more than ${this.limits.blocks} blocks rendered (an #each over too many items?)`,
      );
    }
    this.nested.push(0);
  }

  /** A block body returned `length` characters. */
  leaveBlock(length: number): void {
    const inner = this.nested.pop() ?? 0;
    const depth = this.nested.length;
    if (depth > 0) this.nested[depth - 1] = (this.nested[depth - 1] ?? 0) + length;
    // Values and nested bodies were counted already; what is left is the body's own literal text.
    this.output += Math.max(0, length - inner);
    if (this.output > this.limits.output) {
      throw new TemplateRenderError(`output larger than ${this.limits.output} characters`);
    }
  }

  /**
   * The body, counted as it was rendered, is written again into its layout (`{{{content}}}`): its
   * characters are counted once, in the message as sent.
   */
  rewrite(length: number): void {
    this.output -= length;
  }

  /** A block body threw: forget it, so the budget stays balanced for the caller's error. */
  abandonBlock(): void {
    this.nested.pop();
  }
}
