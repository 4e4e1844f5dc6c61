import { Command } from 'commander';
import { layoutJson } from '../services/json-views.js';
import { readBodyFiles, withBodyFiles } from './body-files.js';
import { given, namedSubcommand, projectSubcommand, servicesAction } from './context.js';

interface LayoutOptions {
  project: string;
  name: string;
  html?: string;
  text?: string;
  htmlFile?: string;
  textFile?: string;
}

export function layoutCommands(): Command {
  const layout = new Command('layout').description("manage a project's layouts (frames templates go into)");

  withBodyFiles(
    namedSubcommand(
      layout,
      'create',
      'create a layout: {{{content}}} in its HTML, {{content}} in its text',
      'layout name',
    )
      .option('--html <html>', 'HTML frame, with {{{content}}} where the template HTML goes')
      .option('--text <text>', 'text frame, with {{content}} where the template text goes'),
    ['html', 'text'],
  ).action(
    servicesAction(async ({ layouts }, out, typed: LayoutOptions) => {
      const options = await readBodyFiles(typed);
      const created = await layouts.create(options.project, {
        name: options.name,
        html: options.html ?? null,
        text: options.text ?? null,
      });
      out.print(layoutJson(created), `Created layout ${created.name}.`);
    }),
  );

  withBodyFiles(
    namedSubcommand(
      layout,
      'update',
      'change a layout (templates in it render with the change)',
      'layout name',
    )
      .option('--html <html>', 'HTML frame ("" removes it)')
      .option('--text <text>', 'text frame ("" removes it)'),
    ['html', 'text'],
  ).action(
    servicesAction(async ({ layouts }, out, typed: LayoutOptions) => {
      const options = await readBodyFiles(typed);
      const updated = await layouts.update(options.project, options.name, given(options, 'html', 'text'));
      out.print(layoutJson(updated), `Updated layout ${updated.name}.`);
    }),
  );

  projectSubcommand(layout, 'list', "list a project's layouts").action(
    servicesAction(async ({ layouts }, out, options: { project: string }) => {
      const list = await layouts.list(options.project);
      out.printList('layouts', list, layoutJson, 'No layouts.', (l) => l.name);
    }),
  );

  namedSubcommand(layout, 'delete', 'delete a layout no template uses', 'layout name').action(
    servicesAction(async ({ layouts }, out, options: { project: string; name: string }) => {
      await layouts.delete(options.project, options.name);
      out.print({ deleted: true, name: options.name }, `Deleted layout ${options.name}.`);
    }),
  );

  return layout;
}
