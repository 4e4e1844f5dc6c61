import { Command, InvalidArgumentError } from 'commander';
import { ErrorCode, errors, HeraldError } from '../domain/errors.js';
import { iso, templateJson, versionJson } from '../services/json-views.js';
import { readBodyFiles, withBodyFiles } from './body-files.js';
import { given, namedSubcommand, projectSubcommand, servicesAction } from './context.js';

interface TemplateOptions {
  project: string;
  name: string;
  subject?: string;
  text?: string;
  html?: string;
  textFile?: string;
  htmlFile?: string;
  layout?: string;
  locale?: string;
}

const variantOf = (options: { locale?: string }) => (options.locale ? ` (${options.locale})` : '');

/** `--version`: a version number as `template versions` lists them. */
function versionNumber(value: string): number {
  if (!/^\d{1,9}$/.test(value))
    throw new InvalidArgumentError(
      'A version is a whole number of up to 9 digits, as template versions lists them.',
    );
  return Number(value);
}

export function templateCommands(): Command {
  const template = new Command('template').description("manage a project's templates");

  withBodyFiles(
    namedSubcommand(
      template,
      'create',
      'create a template, or with --locale add a locale variant to one',
      'template name (callers send it exactly, case-sensitive)',
    )
      .requiredOption('--subject <subject>', 'subject line')
      .option('--text <body>', 'text body (or --text-file)')
      .option('--html <html>', 'HTML body (values are HTML-escaped; {{{name}}} inserts raw)'),
    ['text', 'html'],
  )
    .option('--layout <name>', 'the layout its bodies go into')
    .option('--locale <tag>', 'write this locale variant (a BCP 47 tag such as fr or fr-CA)')
    .action(
      servicesAction(
        async ({ templates }, out, typed: Required<Pick<TemplateOptions, 'subject'>> & TemplateOptions) => {
          const options = await readBodyFiles(typed);
          if (options.text === undefined)
            throw errors.invalidInput('A template needs a text body: give --text or --text-file');
          const created = await templates
            .create(options.project, {
              name: options.name,
              subject: options.subject,
              text: options.text,
              html: options.html ?? null,
              ...given(options, 'layout', 'locale'),
            })
            .catch((error: unknown) => {
              // A variant is added to a template that exists: say which one is missing, and how.
              if (
                options.locale === undefined ||
                !(error instanceof HeraldError && error.code === ErrorCode.TemplateNotFound)
              )
                throw error;
              throw errors.invalidInput(
                `Template ${options.name} not found: create it without --locale first, then add its ${options.locale} variant`,
              );
            });
          out.print(
            templateJson(created),
            `Created template ${created.name}${variantOf(options)}, version ${created.version} (placeholders: ${created.placeholders.join(', ') || 'none'}).`,
          );
        },
      ),
    );

  withBodyFiles(
    namedSubcommand(template, 'update', 'change a template (a new version)', 'template name')
      .option('--subject <subject>', 'subject line')
      .option('--text <body>', 'text body')
      .option('--html <html>', 'HTML body ("" removes it)'),
    ['text', 'html'],
  )
    .option('--layout <name>', "the layout its bodies go into ('' detaches it)")
    .option('--locale <tag>', 'change this locale variant instead of the default')
    .action(
      servicesAction(async ({ templates }, out, typed: TemplateOptions) => {
        const options = await readBodyFiles(typed);
        const changes = given(options, 'subject', 'text', 'html', 'layout');
        if (Object.keys(changes).length === 0)
          throw errors.invalidInput(
            'Nothing to change: give --subject, --text (--text-file), --html (--html-file) or --layout',
          );
        const before = await templates.get(options.project, options.name);
        const updated = await templates.update(options.project, options.name, {
          ...changes,
          ...given(options, 'locale'),
        });
        out.print(
          templateJson(updated),
          updated.version === before.version
            ? `Template ${updated.name}${variantOf(options)} already is that: still version ${updated.version}.`
            : `Updated template ${updated.name}${variantOf(options)}, now version ${updated.version}.`,
        );
      }),
    );

  projectSubcommand(template, 'list', "list a project's templates").action(
    servicesAction(async ({ templates }, out, options: { project: string }) => {
      const list = await templates.list(options.project);
      out.printList(
        'templates',
        list,
        templateJson,
        'No templates.',
        (t) => `${t.name.padEnd(28)} v${String(t.version).padEnd(4)} ${t.subject}`,
      );
    }),
  );

  namedSubcommand(
    template,
    'delete',
    'delete a template, or with --locale one locale variant',
    'template name',
  )
    .option('--locale <tag>', 'delete only this locale variant (a new version without it)')
    .action(
      servicesAction(
        async ({ templates }, out, options: { project: string; name: string; locale?: string }) => {
          if (options.locale !== undefined) {
            const updated = await templates.deleteVariant(options.project, options.name, options.locale);
            out.print(
              { deleted: true, name: options.name, locale: options.locale, version: updated.version },
              `Deleted the ${options.locale} variant of ${options.name}, now version ${updated.version}.`,
            );
            return;
          }
          await templates.delete(options.project, options.name);
          out.print({ deleted: true, name: options.name }, `Deleted template ${options.name}.`);
        },
      ),
    );

  namedSubcommand(template, 'versions', "list a template's versions, newest first", 'template name').action(
    servicesAction(async ({ templates }, out, options: { project: string; name: string }) => {
      const versions = await templates.versions(options.project, options.name);
      out.print(
        { versions: versions.map(versionJson) },
        versions
          .map(
            (v) =>
              `v${String(v.version).padEnd(4)} ${iso(v.createdAt)}  layout: ${v.layout ?? '-'}  locales: ${v.locales.join(', ') || '-'}${v.note ? `  (${v.note})` : ''}`,
          )
          .join('\n'),
      );
    }),
  );

  namedSubcommand(
    template,
    'rollback',
    "make a new version with an earlier version's content (none when it is the current content)",
    'template name',
  )
    .requiredOption('--version <n>', 'the version whose content to restore', versionNumber)
    .action(
      servicesAction(
        async ({ templates }, out, options: { project: string; name: string; version: number }) => {
          const { template: updated, outcome } = await templates.rollback(
            options.project,
            options.name,
            options.version,
          );
          out.print(
            { ...templateJson(updated), outcome },
            outcome === 'unchanged'
              ? `Version ${options.version} of ${updated.name} is its current content (version ${updated.version}); nothing changed.`
              : `Restored version ${options.version} of ${updated.name} as version ${updated.version}.`,
          );
        },
      ),
    );

  return template;
}
