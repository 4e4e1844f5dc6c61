import { NOTIFICATION_EVENTS, type NotificationEvent } from '../domain/events.js';
import type { AdminToken } from './admin-tokens.js';
import type { Layout } from './layouts.js';
import type { Project } from './projects.js';
import type { RelayStatus, RelayView, SmtpSettingsView } from './smtp-settings.js';
import type { Template, TemplateVersion } from './templates.js';
import type { WebhookEndpoint } from './webhooks.js';

/**
 * What people and programs read of each thing, as JSON: the CLI's `--json` output and the
 * management API's bodies are the same objects, in the API's snake_case names, with times in
 * ISO-8601 UTC. Secrets appear only where they are created, beside these.
 */

export function iso(ms: number): string;
export function iso(ms: number | null): string | null;
export function iso(ms: number | null): string | null {
  return ms === null ? null : new Date(ms).toISOString();
}

export function projectJson(project: Project) {
  return {
    id: project.id,
    name: project.name,
    contact_email: project.contactEmail,
    from_email: project.fromEmail,
    from_name: project.fromName,
    quota: project.quotaLimit === null ? ('unlimited' as const) : project.quotaLimit,
    quota_period: project.quotaPeriod,
    key_prefix: project.keyPrefix,
    created_at: iso(project.createdAt),
    updated_at: iso(project.updatedAt),
  };
}

export function templateJson(template: Template) {
  return {
    id: template.id,
    project_id: template.projectId,
    name: template.name,
    subject: template.subject,
    text: template.text,
    html: template.html,
    placeholders: template.placeholders,
    created_at: iso(template.createdAt),
    updated_at: iso(template.updatedAt),
    version: template.version,
    layout: template.layout,
    locales: template.locales,
  };
}

export function versionJson(version: TemplateVersion) {
  return {
    version: version.version,
    created_at: iso(version.createdAt),
    layout: version.layout,
    locales: version.locales,
    engine: version.engine,
    note: version.note,
  };
}

export function layoutJson(layout: Layout) {
  return {
    id: layout.id,
    name: layout.name,
    html: layout.html,
    text: layout.text,
    created_at: iso(layout.createdAt),
    updated_at: iso(layout.updatedAt),
  };
}

export function endpointJson(endpoint: WebhookEndpoint) {
  return {
    id: endpoint.id,
    project_id: endpoint.projectId,
    url: endpoint.url,
    events: [...(endpoint.events ?? NOTIFICATION_EVENTS)] as NotificationEvent[],
    enabled: endpoint.enabled,
    created_at: iso(endpoint.createdAt),
  };
}

/** A fallback relay as shown: like the primary, only whether a password is stored. */
export function relayJson(view: RelayView | null) {
  if (view === null) return null;
  const { host, port, security, username, hasPassword } = view;
  return { host, port, security, username, has_password: hasPassword };
}

/** What is known of a relay: up, or down since when, why, and its next probe. */
export function relayStatusJson(status: RelayStatus) {
  return {
    role: status.role,
    relay: status.relay,
    source: status.source,
    up: status.down === null,
    ...(status.down !== null && {
      down_since: iso(status.down.since),
      last_error: status.down.lastError,
      next_probe_at: iso(status.down.nextProbeAt),
    }),
  };
}

/** SMTP settings as shown: the password is never shown, only whether one is stored. */
export function smtpJson(view: SmtpSettingsView) {
  return {
    project_id: view.projectId,
    host: view.host,
    port: view.port,
    security: view.security,
    username: view.username,
    has_password: view.hasPassword,
    from_email: view.fromEmail,
    from_name: view.fromName,
    fallback: relayJson(view.fallback),
    updated_at: iso(view.updatedAt),
  };
}

/** An admin token as listed: its prefix, never the token. */
export function adminTokenJson(token: AdminToken) {
  return {
    id: token.id,
    name: token.name,
    prefix: token.prefix,
    created_at: iso(token.createdAt),
    last_used_at: iso(token.lastUsedAt),
    revoked_at: iso(token.revokedAt),
  };
}
