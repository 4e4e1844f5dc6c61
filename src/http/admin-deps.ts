import type { Services } from '../compose.js';

/** What the management API's routes use: the services the dashboard and the CLI use. */
export interface AdminDeps extends Pick<
  Services,
  | 'projects'
  | 'templates'
  | 'layouts'
  | 'smtpSettings'
  | 'suppressions'
  | 'webhooks'
  | 'notifications'
  | 'adminTokens'
  | 'auditLog'
> {
  /** Calls per minute per admin token (HERALD_ADMIN_RATE_LIMIT). */
  readonly rateLimit: number;
}
