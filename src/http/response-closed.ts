import type { ServerResponse } from 'node:http';

/**
 * Runs `done` once `response` is finished or its connection has closed, whichever comes first:
 * its `close` event follows both, once. A client that went away while an earlier hook waited (the
 * key's look-up on PostgreSQL) has already had that event by the time a later hook holds something
 * for the request, so then `done` runs at once: what the request held is never held for good.
 */
export function whenResponseClosed(response: ServerResponse, done: () => void): void {
  if (response.closed) done();
  else response.once('close', done);
}
