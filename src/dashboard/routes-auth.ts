import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { adminEmail, type NewSession } from '../services/admins.js';
import { errorPage, formPage, notice, type DashboardDeps, type ViewData } from './context.js';
import { fieldsOf, refusal, text } from './forms.js';
import { randomToken } from '../security/token.js';
import { PRE_SESSION_COOKIE, safeNext, SESSION_COOKIE } from './security.js';

type IsSecure = (request: FastifyRequest) => boolean;
type RateLimit = ReturnType<FastifyInstance['createRateLimit']>;

/**
 * Throttling of the setup link and of password changes, per client IP and per admin, counted on
 * every attempt in process memory. Logins are throttled by AdminService.logIn instead: only
 * failures, per account from one client, shared by every api process.
 */
const LIMIT_WINDOW_MS = 15 * 60_000;
const SETUP_MAX_PER_IP = 30;
const PASSWORD_CHANGES_MAX = 10;

/** Counts this attempt against `limit`: the seconds until it is allowed again, or null if it is now. */
async function refusedFor(limit: RateLimit, request: FastifyRequest): Promise<number | null> {
  const result = await limit(request);
  return !result.isAllowed && result.isExceeded ? result.ttlInSeconds : null;
}

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
    max: SETUP_MAX_PER_IP,
    timeWindow: LIMIT_WINDOW_MS,
    keyGenerator: (request) => `setup-ip:${request.ip}`,
  });

  /** A page shown before login (log in, first admin): its forms carry a pre-session CSRF token. */
  const preSessionPage = <S>(view: string, build: (state: S) => ViewData | Promise<ViewData>) =>
    formPage(deps, view, (state: S, request, reply) => {
      request.csrfToken = preSessionToken(request, reply, isSecure(request));
      return build(state);
    });

  const loginPage = preSessionPage(
    'login',
    async (values: { email?: string; next?: string; error?: string }) => ({
      title: 'Log in',
      hasAdmins: await deps.admins.hasAdmins(),
      email: '',
      next: '',
      error: null,
      ...values,
    }),
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
    const result = await deps.admins.logIn(email, text(form, 'password'), request.ip);
    if (result.kind === 'throttled') {
      reply.header('Retry-After', result.retryAfterSeconds);
      const minutes = Math.max(1, Math.ceil(result.retryAfterSeconds / 60));
      return loginPage(
        request,
        reply,
        { email, next, error: `Too many login attempts. Try again in ${minutes} min.` },
        429,
      );
    }
    if (result.kind === 'refused')
      return loginPage(request, reply, { email, next, error: 'Email or password is not correct.' }, 401);
    await logIn(request, reply, deps, result.admin, isSecure(request));
    return reply.redirect(next, 303);
  });

  const setupPage = preSessionPage('setup', (values: { token: string; email?: string; error?: string }) => ({
    title: 'Create the first admin',
    email: '',
    error: null,
    ...values,
  }));

  app.get<{ Params: { token: string } }>('/setup/:token', async (request, reply) => {
    if (!(await deps.admins.isSetupTokenValid(request.params.token))) {
      return errorPage(
        request,
        reply,
        deps,
        404,
        'This setup link is not valid or has already been used. Log in, or ask an admin to add you.',
        'Setup link not valid',
      );
    }
    return setupPage(request, reply, { token: request.params.token });
  });

  app.post<{ Params: { token: string } }>('/setup/:token', async (request, reply) => {
    const { token } = request.params;
    if ((await refusedFor(byIp, request)) !== null)
      return setupPage(request, reply, { token, error: 'Too many attempts. Try again later.' }, 429);
    const form = fieldsOf(request.body);
    const email = text(form, 'email');
    if (text(form, 'password') !== text(form, 'confirm'))
      return setupPage(request, reply, { token, email, error: 'The passwords do not match.' }, 400);
    try {
      const admin = await deps.admins.completeSetup(token, email, text(form, 'password'));
      await logIn(request, reply, deps, admin, isSecure(request));
      return reply.redirect('/projects?notice=welcome', 303);
    } catch (error) {
      return setupPage(request, reply, { token, email, error: refusal(error) }, 400);
    }
  });
}

/** Logout, the admin's own account, and the list of admins (any admin may add or remove another). */
export async function authRoutes(
  app: FastifyInstance,
  deps: DashboardDeps,
  isSecure: IsSecure,
): Promise<void> {
  const passwordChecks = app.createRateLimit({
    max: PASSWORD_CHANGES_MAX,
    timeWindow: LIMIT_WINDOW_MS,
    keyGenerator: (request) => `password-change:${request.dashSession?.admin.id ?? request.ip}`,
  });

  app.post('/logout', async (request, reply) => {
    if (request.dashSession !== null) await deps.admins.endSession(request.dashSession.token);
    reply.clearCookie(SESSION_COOKIE, { path: '/' });
    return reply.redirect('/login', 303);
  });

  const accountPage = formPage(deps, 'account', (state: { error?: string }, request) => ({
    title: 'Your account',
    error: state.error ?? null,
    notice: notice(request, { password: 'Your password has been changed.' }),
  }));

  app.get('/account', async (request, reply) => accountPage(request, reply, {}));

  app.post('/account/password', async (request, reply) => {
    if ((await refusedFor(passwordChecks, request)) !== null)
      return accountPage(request, reply, { error: 'Too many attempts. Try again later.' }, 429);
    const form = fieldsOf(request.body);
    if (text(form, 'password') !== text(form, 'confirm'))
      return accountPage(request, reply, { error: 'The new passwords do not match.' }, 400);
    const session = request.dashSession!;
    try {
      await deps.admins.changePassword(session.admin.id, text(form, 'current'), text(form, 'password'));
    } catch (error) {
      return accountPage(request, reply, { error: refusal(error) }, 400);
    }
    // Every session of this admin ended with the change; this browser gets a new one.
    setSessionCookie(reply, await deps.admins.startSession(session.admin), isSecure(request));
    return reply.redirect('/account?notice=password', 303);
  });

  const adminsPage = formPage(deps, 'admins', async (state: { email?: string; error?: string }, request) => ({
    title: 'Admins',
    admins: await deps.admins.list(),
    email: state.email ?? '',
    error: state.error ?? null,
    notice: notice(request, {
      added: 'Admin added. They can log in now.',
      removed: 'Admin removed. Their sessions have ended.',
    }),
  }));

  app.get('/admins', async (request, reply) => adminsPage(request, reply, {}));

  app.post('/admins', async (request, reply) => {
    const form = fieldsOf(request.body);
    const email = text(form, 'email');
    try {
      await deps.admins.create(email, text(form, 'password'));
    } catch (error) {
      return adminsPage(request, reply, { email, error: refusal(error) }, 400);
    }
    return reply.redirect('/admins?notice=added', 303);
  });

  app.post('/admins/remove', async (request, reply) => {
    const email = text(fieldsOf(request.body), 'email');
    // Another admin removes you: removing yourself here would end this very session.
    if (adminEmail(email) === request.dashSession!.admin.email)
      return adminsPage(request, reply, { error: 'You cannot remove yourself; another admin can.' }, 400);
    try {
      await deps.admins.remove(email);
    } catch (error) {
      return adminsPage(request, reply, { error: refusal(error) }, 400);
    }
    return reply.redirect('/admins?notice=removed', 303);
  });
}
