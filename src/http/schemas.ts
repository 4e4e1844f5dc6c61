import { Type, type Static, type TSchema } from 'typebox';
import { MAX_INPUT_LENGTH } from '../domain/address.js';
import { MAX_ATTACHMENTS, MAX_FILENAME_LENGTH } from '../domain/attachments.js';
import { MAX_METADATA_KEY_LENGTH, MAX_METADATA_KEYS, MAX_METADATA_VALUE_LENGTH } from '../domain/metadata.js';
import { MAX_TEMPLATE_NAME_LENGTH } from '../domain/send-request.js';
import { BOUNCE_CATEGORIES, type BounceCategory } from '../domain/bounce/categories.js';
import { MAX_IDEMPOTENCY_KEY_LENGTH } from '../services/accept.js';

/**
 * The public API's shapes (spec §4, product.md §2–§3 and §6), written once. Fastify compiles the
 * response shapes into serializers, so they are also the guarantee that no field beyond these
 * ever leaks out; the OpenAPI document at /api/v1/openapi.json is generated from all of them.
 *
 * Request bodies are checked by `parseSendRequest`, which must apply the spec's checks in its
 * fixed order and with its exact error strings; the request shapes here describe what it accepts,
 * and a property test holds the two to each other.
 */

/** Spec §7.1 and product.md: every error is `{"error": "…"}`. */
export const ErrorBody = Type.Object(
  {
    error: Type.String({ description: 'What was wrong, in words fixed by the specification.' }),
    hint: Type.Optional(Type.String({ description: 'What to change, where the fixed words cannot say it.' })),
  },
  { description: 'An error.' },
);

/** `401`: the key is missing or wrong; the scheme to use is named (RFC 9110 §15.5.2). */
export const UnauthorizedBody = {
  ...Type.Object(ErrorBody.properties, { description: 'The API key is missing or invalid.' }),
  headers: { 'WWW-Authenticate': { type: 'string', description: 'Bearer realm="herald"' } },
};

const QUOTA_HEADERS = {
  'X-Quota-Limit': { type: 'integer', description: "The project's request quota per period." },
  'X-Quota-Remaining': { type: 'integer', description: 'Sends left in the current period.' },
  'X-Quota-Reset': { type: 'integer', description: 'When the period resets, in Unix seconds.' },
};

/** A response body that carries the project's quota headers (only when it has a quota). */
function withQuotaHeaders<T extends TSchema>(schema: T, extra: Record<string, unknown> = {}): T {
  return { ...schema, headers: { ...QUOTA_HEADERS, ...extra } };
}

/** `402`: the project's quota for this period is used up; nothing was queued. */
export const QuotaExceededBody = withQuotaHeaders(
  Type.Object(ErrorBody.properties, { description: 'Request quota exceeded; nothing was queued.' }),
  { 'Retry-After': { type: 'integer', description: 'Seconds until the quota period resets.' } },
);

/** An error response with what it means on its route, for the document. */
export function errorMeaning(description: string) {
  return Type.Object(ErrorBody.properties, { description });
}

/** The error responses of the send routes beyond 401 and 402 (spec §7.1, product.md §2). */
export const SEND_ERRORS = {
  409: errorMeaning('A request with this Idempotency-Key is still being processed.'),
  413: errorMeaning('The body is larger than the limit.'),
  415: errorMeaning('The body is not JSON, or came compressed (Content-Encoding).'),
  422: errorMeaning('The Idempotency-Key was already used with a different body.'),
} as const;

/** The error responses every authenticated route can give. */
export const ERROR_RESPONSES = { 401: UnauthorizedBody, '4xx': ErrorBody, '5xx': ErrorBody } as const;

const PlaceholderObject = Type.Union([Type.Record(Type.String(), Type.Unknown()), Type.Null()], {
  description: `Placeholder values, nested at most 32 levels deep; no string may contain NUL.`,
});

const Metadata = Type.Record(
  Type.String({ pattern: `^[A-Za-z0-9_.-]{1,${MAX_METADATA_KEY_LENGTH}}$` }),
  Type.String({ maxLength: MAX_METADATA_VALUE_LENGTH }),
  {
    maxProperties: MAX_METADATA_KEYS,
    description: `Your own labels for the message (at most ${MAX_METADATA_KEYS}, keys of 1–${MAX_METADATA_KEY_LENGTH} characters \`A-Z a-z 0-9 _ . -\`, string values of at most ${MAX_METADATA_VALUE_LENGTH} characters), returned in the status body and every webhook event, and searchable in the delivery log.`,
  },
);

const AttachmentInfo = Type.Object({
  filename: Type.String({ description: 'In its safe form (no path, no invisible or reserved characters).' }),
  content_type: Type.String(),
  size: Type.Integer({ minimum: 0, description: 'Bytes, decoded.' }),
});

export const SendBody = Type.Object(
  {
    template: Type.String({
      minLength: 1,
      maxLength: MAX_TEMPLATE_NAME_LENGTH,
      pattern: '\\S',
      description: "The template's name in the project.",
    }),
    type: Type.Optional(Type.Literal('email', { description: "Only 'email' is supported." })),
    to: Type.Optional(
      Type.Union([Type.String({ maxLength: MAX_INPUT_LENGTH }), Type.Null()], {
        description:
          "The recipient, `user@example.org` or `Name <user@example.org>`; left out or null, the project's contact email (an empty string is refused).",
      }),
    ),
    variables: Type.Optional(PlaceholderObject),
    data: Type.Optional(PlaceholderObject),
    send_at: Type.Optional(
      Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
        description:
          'Send at this time (RFC 3339 with an offset or Z), at most 30 days ahead; a time already past sends now.',
      }),
    ),
    locale: Type.Optional(
      Type.Union([Type.String({ minLength: 1, maxLength: 35 }), Type.Null()], {
        description:
          "The template variant to render, a BCP 47 tag such as `fr-CA`: the exact tag, else its language (`fr`), else the default. Otherwise `400 Invalid 'locale'`.",
      }),
    ),
    reply_to: Type.Optional(
      Type.Union([Type.String({ maxLength: MAX_INPUT_LENGTH }), Type.Null()], {
        description: "The Reply-To header, one address as `to` takes it. Otherwise `400 Invalid 'reply_to'`.",
      }),
    ),
    metadata: Type.Optional(Type.Union([Metadata, Type.Null()])),
    attachments: Type.Optional(
      Type.Union(
        [
          Type.Array(
            Type.Object(
              {
                filename: Type.String({ minLength: 1, maxLength: MAX_FILENAME_LENGTH }),
                content: Type.String({
                  contentEncoding: 'base64',
                  pattern: '^[A-Za-z0-9+/]*={0,2}$',
                  description: 'The bytes as base64: the standard alphabet, padded, without line breaks.',
                }),
                content_type: Type.Optional(
                  Type.Union([Type.String({ maxLength: 200 }), Type.Null()], {
                    description:
                      'A media type such as `application/pdf`; left out, taken from the extension.',
                  }),
                ),
              },
              { additionalProperties: false },
            ),
            { maxItems: MAX_ATTACHMENTS },
          ),
          Type.Null(),
        ],
        {
          description:
            `At most ${MAX_ATTACHMENTS} files, 10 MiB decoded in all; the body may then be up to 15 MiB, everything but the files' content within 256 KiB. ` +
            'Executable types (`exe`, `bat`, `js`, `vbs`, `msi`, `jar`, …) are refused. Not allowed in a batch. ' +
            "Otherwise `400 Invalid 'attachments' (…)`.",
        },
      ),
    ),
  },
  {
    additionalProperties: false,
    description:
      "One notification to send. `data` wins over `variables` on a shared key. Any other field is refused: `400 Unknown field 'NAME'`.",
  },
);

export const MAX_BATCH_SIZE = 500;

export const BatchBody = Type.Array(SendBody, {
  minItems: 1,
  maxItems: MAX_BATCH_SIZE,
  description: `1–${MAX_BATCH_SIZE} sends, queued all or none.`,
});

const REPLAYED_HEADER = {
  'Idempotent-Replayed': { type: 'string', enum: ['true'], description: 'A stored response, replayed.' },
};

const Accepted = Type.Object({
  id: Type.Integer(),
  request_id: Type.String({ description: 'Poll GET /api/v1/notifications/{request_id}.' }),
  status: Type.Literal('queued'),
  message: Type.String(),
});

export const SendResponse = withQuotaHeaders(
  Type.Object(Accepted.properties, { description: 'Accepted and durably queued.' }),
  REPLAYED_HEADER,
);

export const BatchResponse = withQuotaHeaders(
  Type.Object(
    { notifications: Type.Array(Accepted) },
    { description: 'Every send accepted and durably queued, in input order.' },
  ),
  REPLAYED_HEADER,
);

export const BatchErrorBody = Type.Object(
  {
    error: Type.String({ description: 'The first problem, with its item: "… (item N)".' }),
    hint: Type.Optional(
      Type.String({
        description: 'What to change, where the fixed words cannot say it (a refusal of the whole body).',
      }),
    ),
    errors: Type.Optional(
      Type.Array(
        Type.Object({
          index: Type.Integer({ minimum: 0 }),
          error: Type.String({ description: 'The error a single send of this item would get.' }),
        }),
      ),
    ),
  },
  { description: 'The batch was refused whole; nothing was queued.' },
);

const Time = Type.String({ format: 'date-time' });

export const StatusResponse = Type.Object(
  {
    id: Type.Integer(),
    request_id: Type.String(),
    status: Type.Union([Type.Literal('queued'), Type.Literal('sent'), Type.Literal('failed')]),
    template: Type.String(),
    to: Type.String(),
    type: Type.String(),
    attempts: Type.Integer({ minimum: 0 }),
    created_at: Time,
    updated_at: Time,
    sent_at: Type.Optional(Time),
    transport: Type.Optional(Type.String()),
    relay: Type.Optional(
      Type.Union([Type.Literal('primary'), Type.Literal('fallback')], {
        description:
          "Once sent over SMTP: which relay carried it, the project's (or Herald's) primary or its fallback.",
      }),
    ),
    error_message: Type.Optional(Type.String()),
    send_at: Type.Optional({ ...Time, description: 'While a scheduled send waits: the time it asked for.' }),
    last_error: Type.Optional(
      Type.String({ description: 'While a message waits for a retry: why the last attempt failed.' }),
    ),
    next_attempt_at: Type.Optional({ ...Time, description: 'While a message waits for a retry: when.' }),
    bounced_at: Type.Optional({
      ...Time,
      description: 'When a bounce report turned a sent message failed (`error_message` says `Bounced: …`).',
    }),
    bounce: Type.Optional(
      Type.Object(
        {
          type: Type.Union([Type.Literal('hard'), Type.Literal('soft')], {
            description: '`hard`: the address is bad and was suppressed; `soft`: this message only.',
          }),
          category: Type.Unsafe<BounceCategory>({
            type: 'string',
            enum: [...BOUNCE_CATEGORIES],
            description: 'Why, in one word.',
          }),
          status: Type.Union([Type.String(), Type.Null()], {
            description: 'Enhanced status code, e.g. `5.1.1`.',
          }),
          diagnostic: Type.String({ description: "The relay's or the report's own words." }),
        },
        {
          description:
            "The latest bounce: a relay's refusal of an attempt, or a report that came back after sending.",
        },
      ),
    ),
    template_locale: Type.Optional(
      Type.Union([Type.String(), Type.Null()], {
        description:
          'Once rendered: the locale variant of the template that rendered it; null for the default.',
      }),
    ),
    template_version: Type.Optional(
      Type.Integer({ minimum: 1, description: 'Once rendered: the template version that rendered it.' }),
    ),
    reply_to: Type.Optional(Type.String({ description: 'The Reply-To the send asked for.' })),
    metadata: Type.Optional(Metadata),
    attachments: Type.Optional(
      Type.Array(AttachmentInfo, {
        description:
          "The send's files (never their bytes, which are erased with the content after HERALD_CONTENT_RETENTION_DAYS).",
      }),
    ),
  },
  { description: "The notification's state." },
);

export const StatusParams = Type.Object({ request_id: Type.String() });
export type StatusParams = Static<typeof StatusParams>;

/** The request header every send route reads besides `Authorization` (product.md §2). */
export const SendHeaders = Type.Object({
  'idempotency-key': Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: MAX_IDEMPOTENCY_KEY_LENGTH,
      pattern: '^[\\x21-\\x7e]+$',
      description:
        'Replays the stored response of an earlier request with the same key and body for 24 hours.',
    }),
  ),
});
