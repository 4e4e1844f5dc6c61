import type { LocalizedTemplate } from '../domain/template/localized.js';
import { localizedTemplate } from '../storage/template-versions.js';
import type { ProjectSmtp } from '../services/smtp-settings.js';
import type { ProjectRow } from '../storage/schema.js';
import type { CurrentTemplate } from '../storage/template-versions.js';

/** What delivering a notification needs besides its own row, as the worker asks for it. */
export interface DeliverySources {
  project(id: number): Promise<ProjectRow | undefined>;
  /** The template at its current version, with its variants and layout. */
  template(projectId: number, name: string): Promise<CurrentTemplate | undefined>;
  /** The project's own SMTP settings, password decrypted; null when it has none. */
  smtp(projectId: number): Promise<ProjectSmtp | null>;
}

/** Everything a notification's delivery reads, loaded. */
export interface DeliveryContext {
  readonly project: ProjectRow;
  readonly message: LocalizedTemplate;
  readonly smtp: ProjectSmtp | null;
}

/** Compiled templates kept across batches; a full cache starts over rather than growing. */
const MAX_COMPILED = 1000;

/**
 * How long what a batch loaded serves its later messages. Mail may wait behind a slow relay for
 * minutes after its batch was claimed; a change of the project's SMTP settings (or template)
 * reaches it within this time, not when the batch is done.
 */
export const LOADED_FOR_MS = 2_000;

/**
 * Loads what a claimed batch needs once per project and template, not once per message, and keeps
 * compiled templates across batches: one per version (a save is a new version, so it takes effect
 * at once) and per state of its layout (which changes without a new version).
 */
export class DeliveryLoader {
  private readonly compiled = new Map<string, LocalizedTemplate>();

  constructor(private readonly sources: DeliverySources) {}

  /** A loader for one claimed batch: what it reads is read once and shared by the batch. */
  batch(): BatchLoader {
    return new BatchLoader(this.sources, (template) => this.compile(template));
  }

  private compile(current: CurrentTemplate): LocalizedTemplate {
    const { version, layout } = current;
    const key = `${version.id}:${layout === null ? '' : `${layout.id}:${layout.updated_at}`}`;
    let compiled = this.compiled.get(key);
    if (compiled === undefined) {
      if (this.compiled.size >= MAX_COMPILED) this.compiled.clear();
      compiled = localizedTemplate(current);
      this.compiled.set(key, compiled);
    }
    return compiled;
  }
}

interface Loaded<V> {
  readonly value: Promise<V>;
  readonly at: number;
}

export class BatchLoader {
  private readonly projects = new Map<number, Loaded<ProjectRow | undefined>>();
  private readonly templates = new Map<string, Loaded<CurrentTemplate | undefined>>();
  private readonly smtp = new Map<number, Loaded<ProjectSmtp | null>>();

  constructor(
    private readonly sources: DeliverySources,
    private readonly compile: (template: CurrentTemplate) => LocalizedTemplate,
    private readonly now: () => number = Date.now,
  ) {}

  /** The project, compiled template and SMTP settings of a notification; null: no such template. */
  async load(projectId: number, templateName: string): Promise<DeliveryContext | null> {
    const project = await this.once(this.projects, projectId, () => this.sources.project(projectId));
    const template = await this.once(this.templates, `${projectId}\n${templateName}`, () =>
      this.sources.template(projectId, templateName),
    );
    if (project === undefined || template === undefined) return null;
    const smtp = await this.once(this.smtp, projectId, () => this.sources.smtp(projectId));
    return { project, message: this.compile(template), smtp };
  }

  /** What `load` read for `key`, read again once it is LOADED_FOR_MS old. */
  private once<K, V>(map: Map<K, Loaded<V>>, key: K, load: () => Promise<V>): Promise<V> {
    const now = this.now();
    const kept = map.get(key);
    if (kept !== undefined && now - kept.at < LOADED_FOR_MS) return kept.value;
    const value = load();
    map.set(key, { value, at: now });
    return value;
  }
}
