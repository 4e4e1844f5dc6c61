import { Command } from 'commander';
import { projectSubcommand, servicesAction } from './context.js';
import { templateJson } from './output.js';

interface TemplateOptions {
  project: string;
  name: string;
  subject?: string;
  text?: string;
  html?: string;
}

export function templateCommands(): Command {
  const template = new Command('template').description("manage a project's templates");

  projectSubcommand(template, 'create', 'create a template; placeholders are written {{name}}')
    .requiredOption('--name <name>', 'template name (callers send it exactly, case-sensitive)')
    .requiredOption('--subject <subject>', 'subject line')
    .requiredOption('--text <body>', 'text body')
    .option('--html <html>', 'HTML body (values are HTML-escaped; {{{name}}} inserts raw)')
    .action(
      servicesAction(
        async ({ templates }, out, options: Required<Omit<TemplateOptions, 'html'>> & TemplateOptions) => {
          const created = await templates.create(options.project, {
            name: options.name,
            subject: options.subject,
            text: options.text,
            html: options.html ?? null,
          });
          out.print(
            templateJson(created),
            `Created template ${created.name} (placeholders: ${created.placeholders.join(', ') || 'none'}).`,
          );
        },
      ),
    );

  projectSubcommand(template, 'update', 'change a template')
    .requiredOption('--name <name>', 'template name')
    .option('--subject <subject>', 'subject line')
    .option('--text <body>', 'text body')
    .option('--html <html>', 'HTML body ("" removes it)')
    .action(
      servicesAction(async ({ templates }, out, options: TemplateOptions) => {
        const updated = await templates.update(options.project, options.name, {
          ...(options.subject !== undefined && { subject: options.subject }),
          ...(options.text !== undefined && { text: options.text }),
          ...(options.html !== undefined && { html: options.html }),
        });
        out.print(templateJson(updated), `Updated template ${updated.name}.`);
      }),
    );

  projectSubcommand(template, 'list', "list a project's templates").action(
    servicesAction(async ({ templates }, out, options: { project: string }) => {
      const list = await templates.list(options.project);
      out.print(
        { templates: list.map(templateJson) },
        list.length === 0 ? 'No templates.' : list.map((t) => `${t.name.padEnd(28)} ${t.subject}`).join('\n'),
      );
    }),
  );

  projectSubcommand(template, 'delete', 'delete a template')
    .requiredOption('--name <name>', 'template name')
    .action(
      servicesAction(async ({ templates }, out, options: { project: string; name: string }) => {
        await templates.delete(options.project, options.name);
        out.print({ deleted: true, name: options.name }, `Deleted template ${options.name}.`);
      }),
    );

  return template;
}
