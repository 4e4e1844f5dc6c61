import type { Project } from '../services/projects.js';
import type { Template } from '../services/templates.js';

/**
 * Every command prints either one JSON object (`--json`) or a short human-readable text. The JSON
 * shapes use the API's snake_case names; secrets appear only where a command creates them.
 */

export function iso(ms: number | null): string | null {
  return ms === null ? null : new Date(ms).toISOString();
}

export function projectJson(project: Project): Record<string, unknown> {
  return {
    id: project.id,
    name: project.name,
    contact_email: project.contactEmail,
    from_email: project.fromEmail,
    from_name: project.fromName,
    quota: project.quotaLimit === null ? 'unlimited' : project.quotaLimit,
    quota_period: project.quotaPeriod,
    key_prefix: project.keyPrefix,
    created_at: iso(project.createdAt),
    updated_at: iso(project.updatedAt),
  };
}

export function templateJson(template: Template): Record<string, unknown> {
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
  };
}

export interface Output {
  /** Prints `json` with --json, else the text (or the JSON's key: value lines when no text given). */
  print(json: Record<string, unknown>, text?: string): void;
}

export function createOutput(asJson: boolean): Output {
  return {
    print(json, text) {
      if (asJson) {
        process.stdout.write(JSON.stringify(json) + '\n');
        return;
      }
      if (text !== undefined) {
        process.stdout.write(text.endsWith('\n') ? text : text + '\n');
        return;
      }
      const lines = Object.entries(json).map(
        ([key, value]) => `${key}: ${typeof value === 'string' ? value : JSON.stringify(value)}`,
      );
      process.stdout.write(lines.join('\n') + '\n');
    },
  };
}
