import type { Kysely } from 'kysely';
import { errors } from '../domain/errors.js';
import { parseEventFilter, TEST_EVENT, type NotificationEvent } from '../domain/events.js';
import type { OutboundPolicy } from '../domain/outbound.js';
import type { SecretBox } from '../security/cipher.js';
import type { Database, WebhookAttemptRow, WebhookEndpointRow } from '../storage/schema.js';
import { recordEvents } from '../storage/webhook-events.js';
import {
  deleteEndpoint,
  earliestPending,
  hasUntriedOfType,
  findDelivery,
  findEndpoint,
  insertEndpoint,
  insertReplay,
  listDeliveries,
  listEndpoints,
  listWebhookAttempts,
  setEndpointEnabled,
  type DeliveryListRow,
} from '../storage/webhooks.js';
import { parseWebhookUrl } from '../domain/webhook-url.js';
import { generateWebhookSecret } from '../security/webhook-signature.js';
import type { ProjectService } from './projects.js';
import type { Signal } from './signal.js';

/** An endpoint as shown to people: the secret is shown once, at creation, and never again. */
export interface WebhookEndpoint {
  readonly id: number;
  readonly projectId: number;
  readonly url: string;
  /** The events it receives; null: every event. */
  readonly events: readonly NotificationEvent[] | null;
  readonly enabled: boolean;
  readonly createdAt: number;
  readonly updatedAt: number;
}

export interface WebhookDelivery extends DeliveryListRow {
  readonly attemptLog: readonly WebhookAttemptRow[];
}

/** Endpoints per project: enough for every receiver a team runs, few enough to fan out cheaply. */
export const MAX_ENDPOINTS_PER_PROJECT = 20;

function toEndpoint(row: WebhookEndpointRow): WebhookEndpoint {
  return {
    id: row.id,
    projectId: row.project_id,
    url: row.url,
    events: row.events === null ? null : (JSON.parse(row.events) as NotificationEvent[]),
    enabled: row.enabled === 1,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

/** Deliveries per page of an endpoint's log. */
export const MAX_DELIVERIES_PAGE = 100;

/** A disabled endpoint is sent nothing, so a test or replay for it would only wait unseen. */
function refuseDisabled(endpoint: WebhookEndpointRow): void {
  if (endpoint.enabled !== 1) throw errors.invalidInput('The endpoint is disabled; enable it first');
}

/** Ids from a command line or a URL: positive safe integers, nothing else. */
function parseId(raw: string | number): number | null {
  // Exactly as given: an id with spaces around it (`%201` in a path) names no endpoint.
  const text = String(raw);
  if (!/^\d{1,15}$/.test(text)) return null;
  const id = Number(text);
  return id > 0 ? id : null;
}

/**
 * Webhook endpoints of a project (product.md §5): create (the `whsec_` secret shown once and
 * stored encrypted), list, disable, delete, and the dashboard's delivery log, replay and test event.
 * Every lookup is scoped to the project, so an id never reaches another tenant's endpoint.
 */
export class WebhookService {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly projects: ProjectService,
    private readonly secrets: SecretBox,
    private readonly outbound: OutboundPolicy,
    /** Fired once webhook deliveries were queued in this process (signal.ts). */
    private readonly queued: Signal,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * Called when this process queued webhook deliveries or made them due: a test event, a replay,
   * an endpoint enabled again, or the events of a cancel, a bounce or a complaint.
   */
  onQueued(listener: () => void): void {
    this.queued.on(listener);
  }

  async create(
    projectRef: string | number,
    input: { readonly url: string; readonly events?: string | readonly string[] },
  ): Promise<{ endpoint: WebhookEndpoint; secret: string }> {
    const project = await this.projects.resolve(projectRef);
    let url: string;
    let events: NotificationEvent[] | null;
    try {
      url = parseWebhookUrl(input.url, this.outbound);
      events = parseEventFilter(input.events);
    } catch (error) {
      throw errors.invalidInput((error as Error).message);
    }
    if ((await listEndpoints(this.db, project.id)).length >= MAX_ENDPOINTS_PER_PROJECT)
      throw errors.invalidInput(`A project can have at most ${MAX_ENDPOINTS_PER_PROJECT} webhook endpoints`);
    const secret = generateWebhookSecret();
    const row = await insertEndpoint(this.db, {
      project_id: project.id,
      url,
      events: events === null ? null : JSON.stringify(events),
      secret_enc: this.secrets.seal(secret),
      now: this.now(),
    });
    return { endpoint: toEndpoint(row), secret };
  }

  async list(projectRef: string | number): Promise<WebhookEndpoint[]> {
    const project = await this.projects.resolve(projectRef);
    return (await listEndpoints(this.db, project.id)).map(toEndpoint);
  }

  async get(projectRef: string | number, id: string | number): Promise<WebhookEndpoint> {
    return toEndpoint(await this.endpointRow(projectRef, id));
  }

  async setEnabled(
    projectRef: string | number,
    id: string | number,
    enabled: boolean,
  ): Promise<WebhookEndpoint> {
    const row = await this.endpointRow(projectRef, id);
    await setEndpointEnabled(this.db, row.project_id, row.id, enabled, this.now());
    // What waited while it was disabled is due now.
    if (enabled) this.queued.fire();
    return this.get(row.project_id, row.id);
  }

  async delete(projectRef: string | number, id: string | number): Promise<void> {
    const row = await this.endpointRow(projectRef, id);
    if (!(await deleteEndpoint(this.db, row.project_id, row.id))) throw errors.webhookNotFound(id);
  }

  /** An endpoint's deliveries, newest first, with every attempt of each. */
  async deliveries(
    projectRef: string | number,
    id: string | number,
    page: { readonly limit: number; readonly before?: number },
  ): Promise<WebhookDelivery[]> {
    const endpoint = await this.endpointRow(projectRef, id);
    const rows = await listDeliveries(this.db, endpoint.id, {
      limit: Math.min(Math.max(Math.trunc(page.limit), 1), MAX_DELIVERIES_PAGE),
      ...(page.before !== undefined && { before: page.before }),
    });
    const attempts = await listWebhookAttempts(
      this.db,
      rows.map((row) => row.id),
    );
    return rows.map((row) => ({ ...row, attemptLog: attempts.filter((a) => a.delivery_id === row.id) }));
  }

  /** Delivers an event to the endpoint again: a new delivery with the same `webhook-id`. */
  async replay(
    projectRef: string | number,
    id: string | number,
    deliveryId: string | number,
  ): Promise<number> {
    const endpoint = await this.endpointRow(projectRef, id);
    const delivery = parseId(deliveryId);
    const row = delivery === null ? undefined : await findDelivery(this.db, endpoint.id, delivery);
    if (row === undefined) throw errors.deliveryNotFound();
    refuseDisabled(endpoint);
    const replay = await insertReplay(this.db, row, this.now());
    this.queued.fire();
    return replay.id;
  }

  /**
   * Queues a `webhook.test` event for this endpoint alone, whatever its filter, ahead of the
   * deliveries it has waiting: the next call to it is the test's. One test waits at a time: while
   * one has yet to be answered (queued, or on its first call), another is not queued (each would
   * go ahead of the backlog, so clicks repeated at a failing endpoint would hold its real
   * deliveries back), and `false` says so. A test that failed and waits to retry does not count.
   */
  async sendTest(projectRef: string | number, id: string | number): Promise<boolean> {
    const endpoint = await this.endpointRow(projectRef, id);
    refuseDisabled(endpoint);
    const project = await this.projects.resolve(endpoint.project_id);
    const at = this.now();
    const queued = await this.db.transaction().execute(async (tx) => {
      if (await hasUntriedOfType(tx, endpoint.id, TEST_EVENT)) return false;
      await recordEvents(tx, [
        {
          projectId: project.id,
          notificationId: null,
          type: TEST_EVENT,
          data: () => ({ endpoint_id: endpoint.id, message: 'This is a test event from Herald.' }),
          at,
          endpointId: endpoint.id,
          // Someone is watching for it, and a failing endpoint, called once per poll, would
          // reach it only after every delivery due before it.
          runAt: Math.min(at, ((await earliestPending(tx, endpoint.id)) ?? at) - 1),
        },
      ]);
      return true;
    });
    if (queued) this.queued.fire();
    return queued;
  }

  private async endpointRow(projectRef: string | number, id: string | number): Promise<WebhookEndpointRow> {
    const project = await this.projects.resolve(projectRef);
    const endpointId = parseId(id);
    const row = endpointId === null ? undefined : await findEndpoint(this.db, project.id, endpointId);
    if (row === undefined) throw errors.webhookNotFound(String(id).slice(0, 40));
    return row;
  }
}
