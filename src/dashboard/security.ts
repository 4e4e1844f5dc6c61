import type { FastifyReply, FastifyRequest } from 'fastify';

export const SESSION_COOKIE = 'herald_session';
/** Double-submit token of the forms used before there is a session: login and setup. */
export const PRE_SESSION_COOKIE = 'herald_csrf';

/**
 * Scripts only from this origin: no inline script, no eval, no event-handler attributes, so markup
 * that slipped through escaping still could not run. Inline *styles* are allowed because the
 * sandboxed `srcdoc` previews of HTML email inherit this policy, and email HTML is styled inline;
 * a style cannot run code. Remote https images are allowed for the same previews.
 */
export const CONTENT_SECURITY_POLICY = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data: https:",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

export function setSecurityHeaders(reply: FastifyReply, secure: boolean): void {
  reply.header('Content-Security-Policy', CONTENT_SECURITY_POLICY);
  reply.header('X-Frame-Options', 'DENY');
  reply.header('X-Content-Type-Options', 'nosniff');
  reply.header('Referrer-Policy', 'same-origin');
  reply.header('Cross-Origin-Opener-Policy', 'same-origin');
  reply.header('Permissions-Policy', 'camera=(), microphone=(), geolocation=(), payment=()');
  if (secure) reply.header('Strict-Transport-Security', 'max-age=31536000');
}

/**
 * Browsers say where a request comes from; a cross-site POST is refused whatever it carries. With
 * the dashboard's public origin known (HERALD_PUBLIC_URL), a POST whose `Origin` is another is
 * refused too. Without it the origin Herald would compare with is a guess (a proxy may change
 * both the scheme and the Host), so only `Sec-Fetch-Site` and the CSRF token decide.
 */
export function comesFromElsewhere(request: FastifyRequest, publicOrigin: string | null): boolean {
  if (request.headers['sec-fetch-site'] === 'cross-site') return true;
  const origin = request.headers.origin;
  return publicOrigin !== null && origin !== undefined && origin !== publicOrigin;
}

/** The CSRF token a request sent: the `_csrf` form field, or the `X-CSRF-Token` header (htmx). */
export function sentCsrfToken(request: FastifyRequest): string {
  const header = request.headers['x-csrf-token'];
  if (typeof header === 'string' && header !== '') return header;
  const body = request.body;
  if (typeof body === 'object' && body !== null) {
    const field = (body as Record<string, unknown>)._csrf;
    if (typeof field === 'string') return field;
    if (Array.isArray(field) && typeof field[0] === 'string') return field[0];
  }
  return '';
}

/** A same-origin path to return to after login; anything else (`//host`, `https:`, `/\`) is dropped. */
export function safeNext(next: unknown): string {
  // Visible ASCII only: browsers drop tabs and line breaks from a URL, so '/\t/evil.example'
  // would become '//evil.example', and CR or LF in a Location header is a header break.
  if (typeof next !== 'string' || next.length > 2000 || !/^\/[\x21-\x7e]*$/.test(next)) return '/projects';
  if (next.startsWith('//') || next.includes('\\')) return '/projects';
  // Whatever the browser makes of it must stay on this origin.
  const base = 'http://herald.invalid';
  const url = new URL(next, base);
  if (url.origin !== base) return '/projects';
  if (url.pathname.startsWith('/login') || url.pathname.startsWith('/setup')) return '/projects';
  return next;
}
