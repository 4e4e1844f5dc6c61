import { Type, type TSchema } from 'typebox';
import { NOTIFICATION_EVENTS } from '../domain/events.js';
import { QUOTA_PERIODS } from '../domain/quota.js';
import { SUPPRESSION_REASONS } from '../domain/suppression.js';
import { ErrorBody, errorMeaning } from './schemas.js';

/**
 * The management API's shapes (product.md §13). Response shapes are those of
 * services/json-views.ts (what `herald … --json` prints); request shapes list the fields and their
 * types only: what a value must be is checked by the services, in the CLI's and dashboard's words.
 */

const Time = Type.String({ format: 'date-time' });
const Nullable = <T extends TSchema>(schema: T, description?: string) =>
  Type.Union([schema, Type.Null()], description === undefined ? {} : { description });
/** An optional field of a request, where null means "none". */
const OptionalText = (description: string) => Type.Optional(Nullable(Type.String(), description));
const Deleted = (key: TSchema, name: string) =>
  Type.Object({ deleted: Type.Literal(true), [name]: key }, { description: 'Deleted.' });

// Projects

const Quota = Type.Union([Type.Integer(), Type.Literal('unlimited')], {
  description: 'Accepted sends per period (0–1000000000), or "unlimited".',
});

export const Project = Type.Object(
  {
    id: Type.Integer(),
    name: Type.String(),
    contact_email: Nullable(Type.String(), 'Recipient when a send has no `to`.'),
    from_email: Nullable(Type.String()),
    from_name: Nullable(Type.String()),
    quota: Quota,
    quota_period: Type.Unsafe<string>({ type: 'string', enum: [...QUOTA_PERIODS] }),
    key_prefix: Type.String({ description: 'The start of the API key, to tell keys apart.' }),
    created_at: Time,
    updated_at: Time,
  },
  { description: 'A project: one sender of notifications, with its own API key and templates.' },
);

export const ProjectDetail = Type.Object(
  {
    ...Project.properties,
    quota_used: Nullable(Type.Integer(), 'Sends counted in the current period; null when unlimited.'),
    quota_reset: Nullable(Time, 'When the period ends; null when unlimited.'),
  },
  { description: 'A project and its quota now.' },
);

export const ProjectCreated = Type.Object(
  { ...Project.properties, api_key: Type.String({ description: 'The API key, shown here only.' }) },
  { description: 'Created, with its API key: shown once, never again.' },
);

const projectFields = {
  contact_email: OptionalText('Recipient when a send has no `to`; null or "" for none.'),
  from_email: OptionalText('Sender address.'),
  from_name: OptionalText('Sender display name.'),
  quota: Type.Optional(Quota),
  quota_period: Type.Optional(
    Type.String({ description: `The quota's window: ${QUOTA_PERIODS.join(', ')}.` }),
  ),
};

export const ProjectCreateBody = Type.Object(
  {
    name: Type.String({
      description: 'Letters, digits, spaces, dots, dashes or underscores; not only digits.',
    }),
    ...projectFields,
  },
  { additionalProperties: false },
);

export const ProjectUpdateBody = Type.Object(
  { name: Type.Optional(Type.String({ description: 'A new name.' })), ...projectFields },
  { additionalProperties: false, description: 'The fields to change; the others stay.' },
);

export const ProjectList = Type.Object({ projects: Type.Array(Project) });

export const KeyRotated = Type.Object(
  {
    id: Type.Integer(),
    name: Type.String(),
    key_prefix: Type.String(),
    api_key: Type.String({ description: 'The new API key, shown here only.' }),
  },
  { description: 'The new key; the old one stopped working.' },
);

export const ProjectDeleted = Type.Object(
  { ...Deleted(Type.Integer(), 'id').properties, name: Type.String() },
  { description: 'Deleted, with everything of it.' },
);

export const DeleteProjectQuery = Type.Object(
  {
    force: Type.Optional(
      Type.Union([Type.Literal('true'), Type.Literal('false')], {
        description: 'true: delete even with mail queued or being sent (queued mail is never sent).',
      }),
    ),
  },
  { additionalProperties: false },
);

export const ProjectParams = Type.Object({
  project: Type.String({ description: "The project's name or numeric id." }),
});

// Templates and layouts

const Variant = Type.Object({ subject: Type.String(), text: Type.String(), html: Nullable(Type.String()) });

export const Template = Type.Object(
  {
    id: Type.Integer(),
    project_id: Type.Integer(),
    name: Type.String(),
    subject: Type.String(),
    text: Type.String(),
    html: Nullable(Type.String()),
    placeholders: Type.Array(Type.String(), { description: 'The values it reads from a send.' }),
    created_at: Time,
    updated_at: Time,
    version: Type.Integer({ minimum: 1, description: 'The current version.' }),
    layout: Nullable(Type.String(), "The layout's name."),
    locales: Type.Record(Type.String(), Variant, { description: 'The locale variants, by BCP 47 tag.' }),
  },
  { description: 'A template: its default variant, its locale variants and its layout.' },
);

/** The template as it is now, with what the call did to it (`outcome`). */
const TemplateWithOutcome = <Outcome extends TSchema>(outcome: Outcome) =>
  Type.Object(
    { ...Template.properties, outcome },
    { description: 'The template as it is now, with its new (or unchanged) version.' },
  );

export const TemplatePut = TemplateWithOutcome(
  Type.Union([Type.Literal('created'), Type.Literal('updated'), Type.Literal('unchanged')], {
    description: '`unchanged`: the same content was there already, and no version was made.',
  }),
);

export const TemplateRollback = TemplateWithOutcome(
  Type.Union([Type.Literal('updated'), Type.Literal('unchanged')], {
    description: "`unchanged`: that version's content is the current content, and no version was made.",
  }),
);

const VariantInput = (what: string) => ({
  subject: Type.String({ description: `Subject (Handlebars)${what}.` }),
  text: Type.String({ description: `Text body (Handlebars)${what}.` }),
  html: OptionalText(`HTML body (Handlebars; values are escaped)${what}; null or "" for none.`),
});

export const TemplatePutBody = Type.Object(
  {
    ...VariantInput(''),
    layout: OptionalText('The layout its bodies go into; null or left out: none.'),
    locales: Type.Optional(
      Type.Record(
        Type.String(),
        Type.Object(VariantInput(' of this locale'), { additionalProperties: false }),
        {
          description: 'Locale variants by BCP 47 tag (fr, fr-CA); any left out are removed.',
        },
      ),
    ),
  },
  {
    additionalProperties: false,
    description: 'The whole template: what is not given is not kept (the default variant is required).',
  },
);

export const TemplateList = Type.Object({ templates: Type.Array(Template) });

export const TemplateVersions = Type.Object({
  versions: Type.Array(
    Type.Object({
      version: Type.Integer({ minimum: 1 }),
      created_at: Time,
      layout: Nullable(Type.String()),
      locales: Type.Array(Type.String()),
      engine: Type.String(),
      note: Nullable(Type.String(), 'What made it, when not an edit: `rollback to 3`.'),
    }),
    { description: 'Newest first.' },
  ),
});

export const RollbackBody = Type.Object(
  { version: Type.Integer({ description: 'The version whose content becomes a new version.' }) },
  { additionalProperties: false },
);

export const TemplateParams = Type.Object({ ...ProjectParams.properties, name: Type.String() });
export const TemplateDeleted = Deleted(Type.String(), 'name');

export const Layout = Type.Object(
  {
    id: Type.Integer(),
    name: Type.String(),
    html: Nullable(Type.String()),
    text: Nullable(Type.String()),
    created_at: Time,
    updated_at: Time,
  },
  { description: 'A layout: the frame templates go into.' },
);

export const LayoutPutBody = Type.Object(
  {
    html: OptionalText('HTML frame with {{{content}}} where the template HTML goes.'),
    text: OptionalText('Text frame with {{content}} where the template text goes.'),
  },
  { additionalProperties: false, description: 'The whole layout: a part left out is removed.' },
);

export const LayoutList = Type.Object({ layouts: Type.Array(Layout) });

// SMTP, suppressions, webhooks

const Relay = Type.Object({
  host: Type.String(),
  port: Type.Integer(),
  security: Type.String(),
  username: Nullable(Type.String()),
  has_password: Type.Boolean({ description: 'Passwords are never shown.' }),
});

const smtpFields = {
  project_id: Type.Integer(),
  ...Relay.properties,
  from_email: Nullable(Type.String()),
  from_name: Nullable(Type.String()),
  fallback: Nullable(Relay, 'The relay that takes over when this one fails or is down.'),
  updated_at: Time,
};

export const Smtp = Type.Object(smtpFields, { description: "The project's own SMTP relay." });

export const SmtpShow = Type.Object(
  {
    configured: Type.Boolean({ description: 'false: the project uses Herald’s default relay.' }),
    ...Type.Partial(Type.Object(smtpFields)).properties,
    relays: Type.Array(
      Type.Object({
        role: Type.String(),
        relay: Type.String(),
        source: Type.String(),
        up: Type.Boolean(),
        down_since: Type.Optional(Time),
        last_error: Type.Optional(Nullable(Type.String())),
        next_probe_at: Type.Optional(Nullable(Time)),
      }),
      { description: 'The relays its mail goes through and whether each is up.' },
    ),
  },
  { description: "The project's SMTP settings (without passwords) and its relays." },
);

export const SmtpPutBody = Type.Object(
  {
    url: Type.String({
      description: 'smtp://user:pass@host:port or smtps://…; ?security=auto|starttls|tls|none',
    }),
    fallback_url: OptionalText('A second relay (same form); left out or null: none.'),
    from_email: OptionalText('Sender address when the project has none.'),
    from_name: OptionalText('Sender display name.'),
  },
  { additionalProperties: false, description: 'The whole setting: what is left out is not kept.' },
);

export const SmtpCleared = Type.Object({
  cleared: Type.Boolean({ description: 'false: the project had no settings of its own.' }),
});

export const Suppression = Type.Object({
  email: Type.String(),
  reason: Type.Unsafe<string>({ type: 'string', enum: [...SUPPRESSION_REASONS] }),
  created_at: Time,
  request_id: Nullable(Type.String(), 'The notification that caused it.'),
  detail: Nullable(Type.String()),
});

export const SuppressionList = Type.Object({
  suppressions: Type.Array(Suppression, { description: 'Newest first.' }),
  next_offset: Nullable(Type.Integer(), 'The `offset` of the next page; null on the last.'),
});

/** The query of a route that takes no parameters: any parameter is refused, not ignored. */
export const NoQuery = Type.Object({}, { additionalProperties: false });

export const PageQuery = Type.Object(
  {
    limit: Type.Optional(Type.String({ description: 'Entries per page, 1–1000 (100).' })),
    offset: Type.Optional(Type.String({ description: 'Entries to skip (0).' })),
  },
  { additionalProperties: false },
);

export const SuppressionAddBody = Type.Object({ email: Type.String() }, { additionalProperties: false });
export const SuppressionParams = Type.Object({ ...ProjectParams.properties, email: Type.String() });
export const SuppressionRemoved = Type.Object({ removed: Type.Literal(true), email: Type.String() });

export const Webhook = Type.Object({
  id: Type.Integer(),
  project_id: Type.Integer(),
  url: Type.String(),
  events: Type.Array(Type.Unsafe<string>({ type: 'string', enum: [...NOTIFICATION_EVENTS] })),
  enabled: Type.Boolean(),
  created_at: Time,
});

export const WebhookCreated = Type.Object(
  {
    ...Webhook.properties,
    secret: Type.String({ description: 'The whsec_ signing secret, shown here only.' }),
  },
  { description: 'Created, with its signing secret: shown once, never again.' },
);

export const WebhookCreateBody = Type.Object(
  {
    url: Type.String({ description: 'The http(s) URL that receives the events.' }),
    events: Type.Optional(
      Type.Array(Type.String(), { description: `Any of ${NOTIFICATION_EVENTS.join(', ')}; left out: all.` }),
    ),
  },
  { additionalProperties: false },
);

export const WebhookList = Type.Object({ webhooks: Type.Array(Webhook) });
export const WebhookParams = Type.Object({ ...ProjectParams.properties, id: Type.String() });
export const WebhookDeleted = Deleted(Type.Integer(), 'id');

// Errors

/** `401`: no admin token, a wrong or revoked one, or an API key. */
export const AdminUnauthorizedBody = {
  ...Type.Object(ErrorBody.properties, {
    description: 'Invalid or missing admin token (an API key is not one).',
  }),
  headers: { 'WWW-Authenticate': { type: 'string', description: 'Bearer realm="herald-admin"' } },
};

/** `429`: this token made more calls this minute than HERALD_ADMIN_RATE_LIMIT allows. */
export const RateLimitedBody = {
  ...Type.Object(ErrorBody.properties, { description: 'Too many calls with this token; wait and retry.' }),
  headers: {
    'Retry-After': { type: 'integer', description: 'Seconds until calls are taken again.' },
    'x-ratelimit-limit': { type: 'integer', description: 'Calls per minute allowed per token.' },
  },
};

/** The error responses every admin route can give. */
export const ADMIN_ERRORS = {
  400: errorMeaning('The request is invalid; nothing was changed.'),
  401: AdminUnauthorizedBody,
  429: RateLimitedBody,
  '4xx': ErrorBody,
  '5xx': ErrorBody,
} as const;

export const NOT_FOUND = (what: string) => ({ 404: errorMeaning(`${what} not found.`) });

/** The answers of a route about something that may be missing: `ok`, 404 naming `what`, every admin error. */
export const answers = <T>(ok: T, what: string) => ({ 200: ok, ...NOT_FOUND(what), ...ADMIN_ERRORS });
/** The same for a route that creates what it answers with: `201`. */
export const createdAnswers = <T>(created: T, what: string) => ({
  201: created,
  ...NOT_FOUND(what),
  ...ADMIN_ERRORS,
});

/** Every admin route's security: the admin token, never a project's key. */
export const ADMIN_SECURITY = [{ adminToken: [] }];
/** Bodies of the small routes: a project's fields, a rollback, an address, a relay. */
export const SMALL_BODY_LIMIT = 16 * 1024;

/**
 * The schemas of one group of admin routes (`tag`, its heading in the document): each with its
 * operation, its summary, the admin token, and `rest`.
 */
export function adminGroup(tag: string) {
  return <S extends object>(operationId: string, summary: string, rest: S) => ({
    operationId,
    summary,
    tags: [`admin: ${tag}`],
    security: ADMIN_SECURITY,
    ...rest,
  });
}
