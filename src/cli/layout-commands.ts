import { Command } from 'commander';
import { layoutJson } from '../services/json-views.js';
import type { Layout, LayoutService } from '../services/layouts.js';
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

/**
 * `layout create` and `layout update`: `--project`, `--name`, then the two frames, each given inline
 * (`html` and `text` say what the command does with one) or read from a file. `change` gets the
 * options with the files read; the layout it answers with is printed as `done`.
 */
function frameSubcommand(
  parent: Command,
  command: {
    readonly name: string;
    readonly description: string;
    readonly html: string;
    readonly text: string;
    readonly done: 'Created' | 'Updated';
    readonly change: (layouts: LayoutService, options: LayoutOptions) => Promise<Layout>;
  },
): void {
  withBodyFiles(
    namedSubcommand(parent, command.name, command.description, 'layout name')
      .option('--html <html>', command.html)
      .option('--text <text>', command.text),
    ['html', 'text'],
  ).action(
    servicesAction(async ({ layouts }, out, typed: LayoutOptions) => {
      const changed = await command.change(layouts, await readBodyFiles(typed));
      out.print(layoutJson(changed), `${command.done} layout ${changed.name}.`);
    }),
  );
}

export function layoutCommands(): Command {
  const layout = new Command('layout').description("manage a project's layouts (frames templates go into)");

  frameSubcommand(layout, {
    name: 'create',
    description: 'create a layout: {{{content}}} in its HTML, {{content}} in its text',
    html: 'HTML frame, with {{{content}}} where the template HTML goes',
    text: 'text frame, with {{content}} where the template text goes',
    done: 'Created',
    change: (layouts, options) =>
      layouts.create(options.project, {
        name: options.name,
        html: options.html ?? null,
        text: options.text ?? null,
      }),
  });

  frameSubcommand(layout, {
    name: 'update',
    description: 'change a layout (templates in it render with the change)',
    html: 'HTML frame ("" removes it)',
    text: 'text frame ("" removes it)',
    done: 'Updated',
    change: (layouts, options) =>
      layouts.update(options.project, options.name, given(options, 'html', 'text')),
  });

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
