/** Where in a template's text a problem is: line and column, both from 1. */
export interface SourcePlace {
  readonly line: number;
  readonly column: number;
}

/** Whether `a` comes before `b` in the text; a place not known comes after every known one. */
export function comesBefore(a: SourcePlace | null, b: SourcePlace | null): boolean {
  if (a === null) return false;
  return b === null || a.line < b.line || (a.line === b.line && a.column < b.column);
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
