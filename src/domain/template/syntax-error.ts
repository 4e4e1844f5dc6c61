/** Where in a template's text a problem is: line and column, both from 1. */
export interface SourcePlace {
  readonly line: number;
  readonly column: number;
}

/**
 * A template that does not parse, or uses what Herald does not run (a partial, an unknown
 * helper), with the place of the first problem. Raised when a template is saved or previewed.
 */
export class TemplateSyntaxError extends Error {
  override name = 'TemplateSyntaxError';
  constructor(
    readonly reason: string,
    readonly place: SourcePlace | null,
  ) {
    super(place === null ? reason : `line ${place.line}, column ${place.column}: ${reason}`);
  }
}
