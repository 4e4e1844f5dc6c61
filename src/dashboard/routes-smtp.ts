import { randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { planDelivery, type PlanProblem } from '../domain/delivery-plan.js';
import { composeMessage } from '../mail/mime.js';
import { SmtpDeliveryError } from '../mail/smtp-failures.js';
import { urlHost } from '../domain/url-host.js';
import {
  describeSmtpTarget,
  isSmtpSecurity,
  parseSmtpUrl,
  SMTP_SECURITY,
  type SmtpTarget,
} from '../mail/smtp-target.js';
import type {
  RelayInput,
  RelayView,
  SmtpSettingsInput,
  SmtpSettingsView,
} from '../services/smtp-settings.js';
import {
  formPage,
  fragment,
  isHtmx,
  notice,
  settingsForm,
  type DashboardDeps,
  type IdParams,
} from './context.js';
import { fieldsOf, idParam, optional, text, type Fields } from './forms.js';
import { senderMissing, transportState } from './routes-projects.js';

/** The outcome of "verify" or "send test email": the relay's own words, shown as text. */
export interface SmtpCheckResult {
  readonly ok: boolean;
  readonly title: string;
  readonly reply: string;
}

const NOTICES: Record<string, string> = {
  saved: 'SMTP settings saved. Verify the connection or send a test email below.',
  cleared: 'SMTP settings removed.',
};

/**
 * A relay as the fallback field shows it: a URL without its password (`security` spelled out
 * unless the scheme says it), which saved again as it is keeps the stored password.
 */
function relayUrl(view: RelayView | null): string {
  if (view === null) return '';
  const user = view.username === null ? '' : `${encodeURIComponent(view.username)}@`;
  const scheme = view.security === 'tls' ? 'smtps' : 'smtp';
  const security = view.security === 'tls' || view.security === 'auto' ? '' : `?security=${view.security}`;
  return `${scheme}://${user}${urlHost(view.host)}:${view.port}${security}`;
}

/** A typed fallback URL shown again (the form had an error) without the password it may hold. */
function withoutPassword(url: string): string {
  return url.replace(/^([^:/?#]*:\/\/[^:/?#@]*):[^/?#]*@/, '$1@');
}

/** The fallback field: empty removes the fallback; a URL without a password keeps the stored one. */
function fallbackInput(form: Fields): RelayInput | null {
  const url = text(form, 'fallback_url');
  if (url === '') return null;
  const target = parseSmtpUrl(url);
  return { ...target, password: target.password ?? undefined };
}

/** The form; an empty password keeps the stored one unless "remove the password" is ticked. */
function settingsInput(form: Fields): SmtpSettingsInput {
  const security = text(form, 'security');
  const password = text(form, 'password');
  return {
    fallback: fallbackInput(form),
    host: text(form, 'host'),
    port: /^\d{1,5}$/.test(text(form, 'port')) ? Number(text(form, 'port')) : NaN,
    security: isSmtpSecurity(security) ? security : 'auto',
    username: optional(form, 'username'),
    password: form.clear_password === 'yes' ? null : password === '' ? undefined : password,
    fromEmail: optional(form, 'from_email'),
    fromName: optional(form, 'from_name'),
  };
}

function formValues(view: SmtpSettingsView | null): Record<string, string> {
  return {
    host: view?.host ?? '',
    port: String(view?.port ?? 587),
    security: view?.security ?? 'auto',
    username: view?.username ?? '',
    from_email: view?.fromEmail ?? '',
    from_name: view?.fromName ?? '',
    fallback_url: relayUrl(view?.fallback ?? null),
  };
}

/**
 * A failed test email's title: refused by the relay, sent and not confirmed, or never at the relay
 * (not reached, or not tried: an address the outbound rules refuse, a name without one).
 */
function testTitle(error: unknown): string {
  if (!(error instanceof SmtpDeliveryError)) return 'Test email refused';
  const { reached, timedOut } = error.failure;
  if (reached !== true) return 'Test email not sent: the relay was not reached';
  return timedOut === true ? 'Test email not confirmed by the relay' : 'Test email refused';
}

/** A check asked for where there is no relay at all: neither the project's nor Herald's. */
const NOT_CONFIGURED: SmtpCheckResult = {
  ok: false,
  title: 'Not configured',
  reply: 'Save SMTP settings first.',
};

/** A test email with nowhere to go (the field is empty or not an address), or no sender. */
function testNotPlanned(problem: PlanProblem, to: string): SmtpCheckResult {
  if (problem !== 'recipient')
    return {
      ok: false,
      title: 'No from address',
      reply: 'Set a from email on the project or in these SMTP settings.',
    };
  if (to.trim() === '') return { ok: false, title: 'No recipient', reply: 'Enter an email address.' };
  return {
    ok: false,
    title: 'Not an email address',
    reply: 'The recipient is not an email address: enter one such as you@example.org.',
  };
}

/**
 * A verify or test send that failed, as shown: the error's message, which for an SmtpDeliveryError
 * is the relay's reply (or what went wrong on the way to it) as delivery would record it.
 */
function failure(title: string, error: unknown): SmtpCheckResult {
  return { ok: false, title, reply: error instanceof Error ? error.message : String(error) };
}

export async function smtpRoutes(app: FastifyInstance, deps: DashboardDeps): Promise<void> {
  const { projects, smtpSettings, mailer } = deps.services;

  const smtpPage = formPage(
    deps,
    'smtp',
    async (
      state: { id: number; values?: Fields; error?: string; result?: SmtpCheckResult; testTo?: string },
      request,
    ) => {
      const project = await projects.get(state.id);
      const view = await smtpSettings.get(project.id);
      return {
        // Its relays, with the one that is down (since when, why, the next probe) first to see.
        relays: await smtpSettings.relays(project.id),
        title: `SMTP · ${project.name}`,
        project,
        tab: 'smtp',
        settings: view,
        transport: transportState(deps, view),
        noSender: senderMissing(deps, project, view),
        globalSmtp: deps.services.globalSmtp === null ? null : describeSmtpTarget(deps.services.globalSmtp),
        securities: SMTP_SECURITY,
        values:
          state.values === undefined
            ? formValues(view)
            : { ...state.values, fallback_url: withoutPassword(text(state.values, 'fallback_url')) },
        error: state.error ?? null,
        result: state.result ?? null,
        testTo: state.testTo ?? project.contactEmail ?? '',
        notice: notice(request, NOTICES),
      };
    },
  );

  const showResult = (
    request: FastifyRequest,
    reply: FastifyReply,
    projectId: number,
    result: SmtpCheckResult,
    testTo?: string,
  ) =>
    isHtmx(request)
      ? fragment(request, reply, 'partials/smtp-result', { result })
      : smtpPage(request, reply, { id: projectId, result, ...(testTo !== undefined && { testTo }) });

  app.get<IdParams>('/projects/:id/smtp', async (request, reply) =>
    smtpPage(request, reply, { id: idParam(request.params.id) }),
  );

  // The form's own errors (a fallback URL that does not parse) are shown like the service's.
  settingsForm(app, '/projects/:id/smtp', (id, form) => smtpSettings.set(id, settingsInput(form)), smtpPage);

  app.post<IdParams>('/projects/:id/smtp/clear', async (request, reply) => {
    const id = idParam(request.params.id);
    await smtpSettings.clear(id);
    return reply.redirect(`/projects/${id}/smtp?notice=cleared`, 303);
  });

  app.post<IdParams>('/projects/:id/smtp/verify', async (request, reply) => {
    const id = idParam(request.params.id);
    // The project's own relays, or Herald's while it has none.
    const smtp = await smtpSettings.forChecks((await projects.resolve(id)).id);
    if (smtp === null) return showResult(request, reply, id, NOT_CONFIGURED);
    const connected = (target: SmtpTarget) =>
      `Connected to ${describeSmtpTarget(target)}; ${target.username === null ? 'no login configured' : 'the login was accepted'}.`;
    let verified: string;
    try {
      await mailer.verify(smtp.target);
      verified = connected(smtp.target);
    } catch (error) {
      return showResult(request, reply, id, failure('Connection failed', error));
    }
    // The fallback is checked too: it is needed exactly when the primary is not there to tell.
    if (smtp.fallback !== null) {
      try {
        await mailer.verify(smtp.fallback);
        verified += `\nFallback: ${connected(smtp.fallback)}`;
      } catch (error) {
        const { reply: why } = failure('', error);
        return showResult(request, reply, id, {
          ok: false,
          title: 'Fallback connection failed',
          reply: `${verified}\nFallback ${describeSmtpTarget(smtp.fallback)}: ${why}`,
        });
      }
    }
    return showResult(request, reply, id, { ok: true, title: 'Connection verified', reply: verified });
  });

  // A direct send over the saved settings, outside the queue: it checks the relay itself and
  // shows its reply at once. (Template test emails go through the queue instead.)
  app.post<IdParams>('/projects/:id/smtp/test', async (request, reply) => {
    const id = idParam(request.params.id);
    const project = await projects.get(id);
    const toText = text(fieldsOf(request.body), 'to');
    const smtp = await smtpSettings.forDelivery(project.id);
    const globalTarget = smtp === null ? deps.services.globalSmtp : null;
    if (smtp === null && globalTarget === null) return showResult(request, reply, id, NOT_CONFIGURED, toText);
    // Planned like real mail, over the project's own settings, or Herald's relay while it has
    // none: this tests them.
    const planned = planDelivery({
      project,
      smtp,
      defaultFrom: deps.services.defaultFrom,
      globalTarget,
      production: true,
      recipient: toText,
      idLeft: `test-${randomUUID()}`,
    });
    if (!planned.ok) {
      const result = testNotPlanned(planned.problem, toText);
      return showResult(request, reply, id, result, toText);
    }
    const { plan } = planned;
    // Planned for production, the plan names a relay whenever there is one (checked above).
    const relay = plan.target;
    if (relay === null) return showResult(request, reply, id, NOT_CONFIGURED, toText);
    try {
      const raw = await composeMessage({
        from: plan.from,
        to: plan.to,
        subject: `Herald test email for ${project.name}`,
        text: `This is a test email from Herald for the project ${project.name}.\n\nIf you can read it, the SMTP settings work.\n`,
        messageId: plan.messageId,
        date: new Date(),
      });
      const sent = await mailer.send(relay, plan.envelope, raw);
      return showResult(
        request,
        reply,
        id,
        { ok: true, title: 'Test email accepted', reply: sent.response },
        toText,
      );
    } catch (error) {
      return showResult(request, reply, id, failure(testTitle(error), error), toText);
    }
  });
}
