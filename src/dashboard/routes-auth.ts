import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { HeraldError } from '../domain/errors.js';
import type { NewSession } from '../services/admins.js';
import { page, type DashboardDeps } from './context.js';
import { fieldsOf, text } from './forms.js';
import { randomToken } from '../security/token.js';
import { PRE_SESSION_COOKIE, safeNext, SESSION_COOKIE } from './security.js';

type IsSecure = (request: FastifyRequest) => boolean;

/**
 * Login throttling, per client IP and per email, counted on every attempt. Kept in process memory:
 * with several api processes each keeps its own count, which still bounds guessing to a few dozen
 * tries per window per process.
 */
const LOGIN_WINDOW_MS = 15 * 60_000;
const LOGIN_MAX_PER_IP = 30;
const LOGIN_MAX_PER_EMAIL = 10;

function setSessionCookie(reply: FastifyReply, session: NewSession, secure: boolean): void {
  reply.setCookie(SESSION_COOKIE, session.token, {
    path: '/',
    httpOnly: true,
    sameSite: 'lax',
    secure,
    expires: new Date(session.expiresAt),
  });
}

/** The pre-session CSRF token of the login and setup forms (double-submit: cookie and field). */
function preSessionToken(request: FastifyRequest, reply: FastifyReply, secure: boolean): string {
  const existing = request.cookies[PRE_SESSION_COOKIE];
  if (existing !== undefined && /^[A-Za-z0-9_-]{43}$/.test(existing)) return existing;
  const token = randomToken();
  reply.setCookie(PRE_SESSION_COOKIE, token, {
    path: '/',
    httpOnly: true,
    sameSite: 'strict',
    secure,
    maxAge: 24 * 3600,
  });
  return token;
}

/** Starts a fresh session (a new id: the one from before login, if any, is ended) and sets its cookie. */
async function logIn(
  request: FastifyRequest,
  reply: FastifyReply,
  deps: DashboardDeps,
  admin: { readonly id: number; readonly email: string },
  secure: boolean,
): Promise<void> {
  const previous = request.cookies[SESSION_COOKIE];
  if (previous !== undefined) await deps.admins.endSession(previous);
  setSessionCookie(reply, await deps.admins.startSession(admin), secure);
  reply.clearCookie(PRE_SESSION_COOKIE, { path: '/' });
}

/** Login and the one-time setup link: the only pages reachable without a session. */
export async function publicAuthRoutes(
  app: FastifyInstance,
  deps: DashboardDeps,
  isSecure: IsSecure,
): Promise<void> {
  const byIp = app.createRateLimit({
    max: LOGIN_MAX_PER_IP,
    timeWindow: LOGIN_WINDOW_MS,
    keyGenerator: (request) => `login-ip:${request.ip}`,
  });
  const byEmail = app.createRateLimit({
    max: LOGIN_MAX_PER_EMAIL,
    timeWindow: LOGIN_WINDOW_MS,
    keyGenerator: (request) => `login-email:${text(fieldsOf(request.body), 'email').trim().toLowerCase()}`,
  });

  /** A page shown before login (log in, first admin): its forms carry a pre-session CSRF token. */
  const preSessionPage = (
    request: FastifyRequest,
    reply: FastifyReply,
    view: string,
    data: Record<string, unknown>,
    status: number,
  ) => {
    request.csrfToken = preSessionToken(request, reply, isSecure(request));
    return page(request, reply, deps, view, data, status);
  };

  const loginPage = async (
    request: FastifyRequest,
    reply: FastifyReply,
    values: { email?: string; next?: string; error?: string },
    status = 200,
  ) =>
    preSessionPage(
      request,
      reply,
      'login',
      {
        title: 'Log in',
        hasAdmins: await deps.admins.hasAdmins(),
        email: '',
        next: '',
        error: null,
        ...values,
      },
      status,
    );

  app.get('/login', async (request, reply) => {
    const token = request.cookies[SESSION_COOKIE];
    const next = safeNext((request.query as Record<string, unknown>).next);
    if (token !== undefined && (await deps.admins.session(token)) !== null) return reply.redirect(next);
    return loginPage(request, reply, { next });
  });

  app.post('/login', async (request, reply) => {
    const form = fieldsOf(request.body);
    const email = text(form, 'email');
    const next = safeNext(form.next);
    for (const limit of [byIp, byEmail]) {
      const result = await limit(request);
      if (!result.isAllowed && result.isExceeded) {
        reply.header('Retry-After', result.ttlInSeconds);
        const minutes = Math.max(1, Math.ceil(result.ttlInSeconds / 60));
        return loginPage(
          request,
          reply,
          { email, next, error: `Too many login attempts. Try again in ${minutes} min.` },
          429,
        );
      }
    }
    const admin = await deps.admins.authenticate(email, text(form, 'password'));
    if (admin === null)
      return loginPage(request, reply, { email, next, error: 'Email or password is not correct.' }, 401);
    await logIn(request, reply, deps, admin, isSecure(request));
    return reply.redirect(next, 303);
  });

  const setupPage = async (
    request: FastifyRequest,
    reply: FastifyReply,
    token: string,
    values: { email?: string; error?: string },
    status = 200,
  ) =>
    preSessionPage(
      request,
      reply,
      'setup',
      { title: 'Create the first admin', token, email: '', error: null, ...values },
      status,
    );

  app.get<{ Params: { token: string } }>('/setup/:token', async (request, reply) => {
    if (!(await deps.admins.isSetupTokenValid(request.params.token))) {
      return page(
        request,
        reply,
        deps,
        'error',
        {
          title: 'Setup link not valid',
          status: 404,
          message:
            'This setup link is not valid or has already been used. Log in, or ask an admin to add you.',
        },
        404,
      );
    }
    return setupPage(request, reply, request.params.token, {});
  });

  app.post<{ Params: { token: string } }>('/setup/:token', async (request, reply) => {
    const result = await byIp(request);
    if (!result.isAllowed && result.isExceeded)
      return setupPage(
        request,
        reply,
        request.params.token,
        { error: 'Too many attempts. Try again later.' },
        429,
      );
    const form = fieldsOf(request.body);
    const email = text(form, 'email');
    if (text(form, 'password') !== text(form, 'confirm'))
      return setupPage(
        request,
        reply,
        request.params.token,
        { email, error: 'The passwords do not match.' },
        400,
      );
    try {
      const admin = await deps.admins.completeSetup(request.params.token, email, text(form, 'password'));
      await logIn(request, reply, deps, admin, isSecure(request));
      return reply.redirect('/projects?notice=welcome', 303);
    } catch (error) {
      if (!(error instanceof HeraldError)) throw error;
      return setupPage(request, reply, request.params.token, { email, error: error.message }, 400);
    }
  });
}

/** Logout, the admin's own account, and the list of admins (any admin may add another). */
export async function authRoutes(
  app: FastifyInstance,
  deps: DashboardDeps,
  isSecure: IsSecure,
): Promise<void> {
  const passwordChecks = app.createRateLimit({
    max: LOGIN_MAX_PER_EMAIL,
    timeWindow: LOGIN_WINDOW_MS,
    keyGenerator: (request) => `password-change:${request.dashSession?.admin.id ?? request.ip}`,
  });

  app.post('/logout', async (request, reply) => {
    if (request.dashSession !== null) await deps.admins.endSession(request.dashSession.token);
    reply.clearCookie(SESSION_COOKIE, { path: '/' });
    return reply.redirect('/login', 303);
  });

  const accountPage = (
    request: FastifyRequest,
    reply: FastifyReply,
    values: { error?: string; notice?: string },
    status = 200,
  ) =>
    page(
      request,
      reply,
      deps,
      'account',
      { title: 'Your account', error: null, notice: null, ...values },
      status,
    );

  app.get('/account', async (request, reply) => {
    const saved = (request.query as Record<string, unknown>).notice === 'password';
    return accountPage(request, reply, saved ? { notice: 'Your password has been changed.' } : {});
  });

  app.post('/account/password', async (request, reply) => {
    const result = await passwordChecks(request);
    if (!result.isAllowed && result.isExceeded)
      return accountPage(request, reply, { error: 'Too many attempts. Try again later.' }, 429);
    const form = fieldsOf(request.body);
    if (text(form, 'password') !== text(form, 'confirm'))
      return accountPage(request, reply, { error: 'The new passwords do not match.' }, 400);
    const session = request.dashSession!;
    try {
      await deps.admins.changePassword(session.admin.id, text(form, 'current'), text(form, 'password'));
    } catch (error) {
      if (!(error instanceof HeraldError)) throw error;
      return accountPage(request, reply, { error: error.message }, 400);
    }
    // Every session of this admin ended with the change; this browser gets a new one.
    setSessionCookie(reply, await deps.admins.startSession(session.admin), isSecure(request));
    return reply.redirect('/account?notice=password', 303);
  });

  const adminsPage = async (
    request: FastifyRequest,
    reply: FastifyReply,
    values: { email?: string; error?: string; notice?: string },
    status = 200,
  ) =>
    page(
      request,
      reply,
      deps,
      'admins',
      { title: 'Admins', admins: await deps.admins.list(), email: '', error: null, notice: null, ...values },
      status,
    );

  app.get('/admins', async (request, reply) => {
    const added = (request.query as Record<string, unknown>).notice === 'added';
    return adminsPage(request, reply, added ? { notice: 'Admin added. They can log in now.' } : {});
  });

  app.post('/admins', async (request, reply) => {
    const form = fieldsOf(request.body);
    const email = text(form, 'email');
    try {
      await deps.admins.create(email, text(form, 'password'));
    } catch (error) {
      if (!(error instanceof HeraldError)) throw error;
      return adminsPage(request, reply, { email, error: error.message }, 400);
    }
    return reply.redirect('/admins?notice=added', 303);
  });
}
