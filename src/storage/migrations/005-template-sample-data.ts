import type { Ddl } from './columns.js';

/** Migration 005_template_sample_data: released, so never edited (a change is a new migration). */
export const templateSampleData: Ddl = () => [
  // The sample data last used in the editor, so it survives saving instead of being replaced.
  `ALTER TABLE templates ADD COLUMN sample_data TEXT`,
];
