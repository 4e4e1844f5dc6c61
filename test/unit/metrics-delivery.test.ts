import { describe, expect, it } from 'vitest';
import { Metrics } from '../../src/metrics/metrics.js';

/**
 * Role all's parent serves its delivery process's metrics beside its own (product.md §7): what the
 * child reports, what the parent shows, and what neither may do when the other cannot answer.
 */

const snapshot = () => Promise.resolve({ queued: 2, sending: 0, oldestDueAgeSeconds: 0 });

function child(): Metrics {
  // A database that cannot be read: the delivery metrics need none of it.
  const metrics = new Metrics(() => Promise.reject(new Error('connect ECONNREFUSED')));
  metrics.delivered.inc({ project_id: '1', outcome: 'sent', transport: 'smtp' }, 3);
  metrics.bounceReportsRefused.inc(7);
  metrics.bounceImapConnected.set(1);
  return metrics;
}

describe("role all's delivery metrics", () => {
  it('are read without the collects of the other metrics, which may need the database', async () => {
    const names = (await child().deliveryMetrics()).map((metric) => metric.name);
    expect(names).toContain('herald_notifications_delivered_total');
    expect(names).not.toContain('herald_queue_depth');
  });

  it("are served by the parent beside its own, and each of the parent's metrics once", async () => {
    const parent = new Metrics(snapshot);
    parent.accepted.inc({ project_id: '1', outcome: 'accepted' }, 3);
    const from = child();
    parent.delivery = () => from.deliveryMetrics();
    const text = await parent.render();
    expect(text).toMatch(/^herald_notifications_delivered_total\{[^}]*outcome="sent"[^}]*\} 3$/m);
    expect(text).toMatch(/^herald_bounce_reports_refused_total 7$/m);
    expect(text).toMatch(/^herald_notifications_accepted_total\{[^}]*\} 3$/m);
    expect(text.match(/^herald_queue_depth\{state="queued"\} 2$/gm)).toHaveLength(1);
    expect(text.match(/^# TYPE herald_bounce_imap_connected /gm)).toHaveLength(1);
  });

  it("are left out while the child does not answer, never shown as the parent's zeros", async () => {
    const parent = new Metrics(snapshot);
    parent.delivery = () => Promise.resolve(null);
    const text = await parent.render();
    // A counter that read 7 and then 0 would be a reset to Prometheus, and a gauge 0 an alert.
    expect(text).not.toMatch(/^herald_bounce_reports_refused_total /m);
    expect(text).not.toMatch(/^herald_bounce_imap_connected /m);
    expect(text).toMatch(/^herald_queue_depth\{state="queued"\} 2$/m);
  });
});
