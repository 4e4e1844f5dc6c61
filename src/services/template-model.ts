import { hash } from 'node:crypto';
import { errors } from '../domain/errors.js';
import {
  templatePlaceholders,
  type LayoutSource,
  type TemplateSource,
  type TemplateEngine,
} from '../domain/message.js';
import { placeholdersAsHandlebars } from '../domain/template/from-placeholders.js';
import { canonicalLocale } from '../domain/template/locale.js';
import type { CurrentTemplate, StoredVersion } from '../storage/template-versions.js';
import type { VariantContent } from './template-checks.js';

/** What the template service answers with, and how it reads a stored version into it. */

export interface Template {
  readonly id: number;
  readonly projectId: number;
  readonly name: string;
  /** The default variant. */
  readonly subject: string;
  readonly text: string;
  readonly html: string | null;
  /** Sample data saved with the template from the dashboard's editor (JSON text), if any. */
  readonly sampleData: string | null;
  readonly placeholders: string[];
  readonly createdAt: number;
  readonly updatedAt: number;
  /** The current version, from 1. */
  readonly version: number;
  readonly engine: TemplateEngine;
  /** The layout's name; null without one. */
  readonly layout: string | null;
  /** The locale variants, by tag. */
  readonly locales: Readonly<Record<string, VariantContent>>;
}

export interface TemplateVersion {
  readonly version: number;
  readonly createdAt: number;
  readonly engine: TemplateEngine;
  readonly layout: string | null;
  readonly locales: string[];
  readonly note: string | null;
}

/** A whole version, for reading or comparing: every variant's content and its layout's name. */
export interface TemplateVersionContent extends TemplateVersion {
  readonly variants: Readonly<Record<string, VariantContent>>;
}

export interface TemplateInput {
  readonly subject?: string;
  readonly text?: string;
  readonly html?: string | null;
  readonly sampleData?: string | null;
  /** A layout's name; null or '' detaches the template from its layout. */
  readonly layout?: string | null;
  /** The variant written: a BCP 47 tag; absent for the default. */
  readonly locale?: string;
}

export type CreateInput = { name: string } & Required<Pick<TemplateInput, 'subject' | 'text'>> &
  TemplateInput;

/** The default variant's locale key. */
export const DEFAULT = '';

export function variantsOf(stored: StoredVersion): Map<string, VariantContent> {
  return new Map(
    stored.variants.map((v) => [v.locale, { subject: v.subject, text: v.text_body, html: v.html_body }]),
  );
}

/**
 * A version's variants as Handlebars sources: a version still in the placeholder engine is
 * rewritten to render the same bytes, so changing one part of it changes nothing else.
 */
export function handlebarsVariants(stored: StoredVersion): Map<string, VariantContent> {
  const variants = variantsOf(stored);
  if (stored.version.engine === 'handlebars') return variants;
  return new Map(
    [...variants].map(([locale, v]) => [
      locale,
      {
        subject: placeholdersAsHandlebars(v.subject),
        text: placeholdersAsHandlebars(v.text),
        html: v.html === null ? null : placeholdersAsHandlebars(v.html),
      },
    ]),
  );
}

/** Placeholders by the hash of the parts they were read from: a list of templates reads them again. */
const knownPlaceholders = new Map<string, string[]>();
const KNOWN_PLACEHOLDERS_MAX = 2000;

/** A template's placeholders (templatePlaceholders), read once per content while it is kept. */
function placeholdersOf(source: TemplateSource, layout: LayoutSource | null): string[] {
  const key = hash(
    'sha256',
    JSON.stringify([source.engine, source.subject, source.text, source.html, layout?.text, layout?.html]),
  );
  let found = knownPlaceholders.get(key);
  if (found === undefined) {
    found = templatePlaceholders(source, layout);
    if (knownPlaceholders.size >= KNOWN_PLACEHOLDERS_MAX)
      knownPlaceholders.delete(knownPlaceholders.keys().next().value!);
    knownPlaceholders.set(key, found);
  }
  return [...found];
}

export function toTemplate(current: CurrentTemplate): Template {
  const { template: row } = current;
  const variants = variantsOf(current);
  let placeholders: string[] = [];
  try {
    placeholders = placeholdersOf(
      { subject: row.subject, text: row.text_body, html: row.html_body, engine: current.version.engine },
      current.layout && { text: current.layout.text_body, html: current.layout.html_body },
    );
  } catch {
    // A version saved before its layout changed may no longer compile; it shows no placeholders.
  }
  variants.delete(DEFAULT);
  return {
    id: row.id,
    projectId: row.project_id,
    name: row.name,
    subject: row.subject,
    text: row.text_body,
    html: row.html_body,
    sampleData: row.sample_data ?? null,
    placeholders,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    version: row.version,
    engine: current.version.engine,
    layout: current.layout?.name ?? null,
    locales: Object.fromEntries(variants),
  };
}

export function localeOf(input: TemplateInput): string {
  if (input.locale === undefined || input.locale === '') return DEFAULT;
  const locale = canonicalLocale(input.locale);
  if (locale === null)
    throw errors.invalidInput(`Invalid locale '${input.locale}' (a BCP 47 tag such as fr or fr-CA)`);
  return locale;
}
