import { namedRows } from './rows.js';

/** A project's templates, each by its name (its content is in template_versions). */
export const templateRows = namedRows('templates');
