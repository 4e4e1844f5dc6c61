import type { Ddl } from './columns.js';

/** Migration 010_bounce_categories: released, so never edited (a change is a new migration). */
export const bounceCategories: Ddl = () => [
  // The latest bounce of a message, from a relay's refusal or a report that came back, as the
  // classifier read it (product.md §9): hard or soft, its category, enhanced status, diagnostic.
  `ALTER TABLE notifications ADD COLUMN bounce_type TEXT`,
  `ALTER TABLE notifications ADD COLUMN bounce_category TEXT`,
  `ALTER TABLE notifications ADD COLUMN bounce_status TEXT`,
  `ALTER TABLE notifications ADD COLUMN bounce_diagnostic TEXT`,
];
