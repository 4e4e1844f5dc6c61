/**
 * The life of a notification. `sending` is internal: the row is claimed by a worker under a lease.
 * Callers, the dashboard and the CLI see the three public states of the interface specification,
 * in which a message being sent is still `queued`.
 */
export type NotificationState = 'queued' | 'sending' | 'sent' | 'failed';

export type PublicStatus = 'queued' | 'sent' | 'failed';

export const NOTIFICATION_STATES: readonly NotificationState[] = ['queued', 'sending', 'sent', 'failed'];

export function publicStatus(state: NotificationState): PublicStatus {
  return state === 'sending' ? 'queued' : state;
}
