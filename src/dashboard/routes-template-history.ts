import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { noSuchVersion, type Template, type TemplateVersionContent } from '../services/templates.js';
import { notice, page, projectOf, type DashboardDeps, type NameParams } from './context.js';
import { diffLines, type DiffLine } from './diff.js';
import { fieldsOf, refusal, whole } from './forms.js';

/** One part of one variant, compared between two versions; only parts that differ are listed. */
interface PartDiff {
  readonly variant: string;
  readonly part: string;
  readonly lines: DiffLine[];
}

const PARTS = [
  ['subject', 'Subject'],
  ['text', 'Text body'],
  ['html', 'HTML body'],
] as const;

function compare(a: TemplateVersionContent, b: TemplateVersionContent): PartDiff[] {
  const out: PartDiff[] = [];
  if (a.layout !== b.layout)
    out.push({
      variant: 'all',
      part: 'Layout',
      lines: diffLines(a.layout ?? '(none)', b.layout ?? '(none)'),
    });
  const locales = [...new Set([...Object.keys(a.variants), ...Object.keys(b.variants)])].sort();
  for (const locale of locales) {
    for (const [key, label] of PARTS) {
      const before = a.variants[locale]?.[key] ?? '';
      const after = b.variants[locale]?.[key] ?? '';
      if (before !== after)
        out.push({
          variant: locale === '' ? 'default' : locale,
          part: label,
          lines: diffLines(before, after),
        });
    }
  }
  return out;
}

/** What a restore came to, from the numbers its redirect carries (`?notice=restored&from=1&as=3`). */
function restoreNotices(query: Readonly<Record<string, string | undefined>>): Record<string, string> {
  const from = whole(query.from);
  const as = whole(query.as);
  return {
    restored:
      from === undefined || as === undefined
        ? 'Version restored.'
        : `Version ${from} restored as version ${as}.`,
    unchanged:
      from === undefined
        ? 'That version is the current content; nothing changed.'
        : `Version ${from} is the current content; nothing changed.`,
  };
}

/** A template's history: its versions, the difference between two, and restoring one. */
export async function templateHistoryRoutes(app: FastifyInstance, deps: DashboardDeps): Promise<void> {
  const { templates } = deps.services;

  /** The history page; a refused restore shows it again with the reason. */
  const show = async (request: FastifyRequest<NameParams>, reply: FastifyReply, refused?: string) => {
    const project = await projectOf(deps, request.params);
    const template = await templates.get(project.id, request.params.name);
    const versions = await templates.versions(project.id, template.name);
    const query = fieldsOf(request.query);
    const to = whole(query.b, 1, template.version) ?? template.version;
    const from = whole(query.a, 1, template.version) ?? Math.max(1, to - 1);
    const [a, b] = await Promise.all([
      templates.version(project.id, template.name, from),
      templates.version(project.id, template.name, to),
    ]);
    return page(
      request,
      reply,
      deps,
      'template-history',
      {
        title: `History · ${template.name}`,
        project,
        tab: 'templates',
        template,
        versions,
        from,
        to,
        diff: compare(a, b),
        notice: notice(request, restoreNotices(query)),
        error: refused ?? null,
      },
      refused === undefined ? 200 : 400,
    );
  };

  app.get<NameParams>('/projects/:id/templates/history/:name', (request, reply) => show(request, reply));

  app.post<NameParams>('/projects/:id/templates/rollback/:name', async (request, reply) => {
    const project = await projectOf(deps, request.params);
    const chosen = (fieldsOf(request.body).version ?? '').trim();
    const version = whole(chosen);
    if (version === undefined) {
      const reason =
        chosen === '' ? 'Choose a version to restore' : noSuchVersion(request.params.name, chosen).message;
      return show(request, reply, reason);
    }
    let restored: { template: Template; outcome: 'updated' | 'unchanged' };
    try {
      restored = await templates.rollback(project.id, request.params.name, version);
    } catch (error) {
      // A template deleted meanwhile gets the 404 page; anything else refused, the history again.
      return show(request, reply, refusal(error, 'TEMPLATE_NOT_FOUND'));
    }
    const { template, outcome } = restored;
    const said = outcome === 'unchanged' ? 'unchanged' : 'restored';
    return reply.redirect(
      `/projects/${project.id}/templates/history/${encodeURIComponent(template.name)}` +
        `?notice=${said}&from=${version}&as=${template.version}`,
      303,
    );
  });
}
