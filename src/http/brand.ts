import type { FastifyInstance } from 'fastify';

/**
 * Herald's mark, the envelope of the dashboard's top bar: the browser's tab icon (`/favicon.svg`,
 * and `/favicon.ico` for browsers that ask for it unprompted) and, with the name, the logo of the
 * API reference page, where it leads back to the dashboard.
 */
const ENVELOPE =
  '<rect width="24" height="24" rx="5" fill="#1f6feb"/>' +
  '<path d="M3 6.5 12 12l9-5.5M4 5h16a1 1 0 0 1 1 1v12a1 1 0 0 1-1 1H4a1 1 0 0 1-1-1V6a1 1 0 0 1 1-1Z" ' +
  'fill="none" stroke="#fff" stroke-width="1.6" stroke-linejoin="round"/>';

export const MARK_SVG = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24" width="24" height="24">${ENVELOPE}</svg>`;

export const LOGO_SVG =
  '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 200 24" width="200" height="24">' +
  ENVELOPE +
  '<text x="32" y="17" font-family="system-ui, sans-serif" font-size="15" fill="#fff">' +
  '<tspan font-weight="600">Herald</tspan> ← dashboard</text></svg>';

/** Run by the API reference page: its top bar's link goes to the dashboard. */
export const BACK_TO_DASHBOARD = `new MutationObserver(function (_, observer) {
  var link = document.querySelector('#swagger-ui .topbar a.link');
  if (!link) return;
  link.setAttribute('href', '/');
  link.setAttribute('title', 'Back to the dashboard');
  observer.disconnect();
}).observe(document.documentElement, { childList: true, subtree: true });
`;

export async function faviconRoutes(app: FastifyInstance): Promise<void> {
  app.get('/favicon.svg', { schema: { hide: true } }, async (_request, reply) =>
    reply.type('image/svg+xml').header('Cache-Control', 'public, max-age=86400').send(MARK_SVG),
  );
  app.get('/favicon.ico', { schema: { hide: true } }, async (_request, reply) =>
    reply.redirect('/favicon.svg', 301),
  );
}
