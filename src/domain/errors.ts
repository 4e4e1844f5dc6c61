/**
 * The catalog of errors the domain raises. Each has a stable code; the HTTP layer alone maps codes
 * to status codes, and the CLI and dashboard show the message. Messages that the interface
 * specification fixes are reproduced here to the letter.
 */

export const ErrorCode = {
  InvalidApiKey: 'INVALID_API_KEY',
  InvalidJson: 'INVALID_JSON',
  InvalidTemplate: 'INVALID_TEMPLATE',
  InvalidType: 'INVALID_TYPE',
  InvalidRecipient: 'INVALID_RECIPIENT',
  InvalidField: 'INVALID_FIELD',
  QuotaExceeded: 'QUOTA_EXCEEDED',
  NotificationNotFound: 'NOTIFICATION_NOT_FOUND',
  NotCancelable: 'NOT_CANCELABLE',
  QueueFailed: 'QUEUE_FAILED',
  IdempotencyMismatch: 'IDEMPOTENCY_MISMATCH',
  IdempotencyInFlight: 'IDEMPOTENCY_IN_FLIGHT',
  ProjectNotFound: 'PROJECT_NOT_FOUND',
  ProjectExists: 'PROJECT_EXISTS',
  TemplateNotFound: 'TEMPLATE_NOT_FOUND',
  TemplateExists: 'TEMPLATE_EXISTS',
  InvalidInput: 'INVALID_INPUT',
  WebhookNotFound: 'WEBHOOK_NOT_FOUND',
  DeliveryNotFound: 'DELIVERY_NOT_FOUND',
  AdminNotFound: 'ADMIN_NOT_FOUND',
  LayoutNotFound: 'LAYOUT_NOT_FOUND',
  LayoutExists: 'LAYOUT_EXISTS',
  SuppressionNotFound: 'SUPPRESSION_NOT_FOUND',
  InvalidAdminToken: 'INVALID_ADMIN_TOKEN',
  AdminTokenNotFound: 'ADMIN_TOKEN_NOT_FOUND',
  AdminTokenExists: 'ADMIN_TOKEN_EXISTS',
  /** The thing changed meanwhile, or its state does not allow the change now. */
  Conflict: 'CONFLICT',
  RateLimited: 'RATE_LIMITED',
  /** A body sent compressed (`Content-Encoding: gzip`): Herald reads bodies as they are sent. */
  UnsupportedEncoding: 'UNSUPPORTED_ENCODING',
} as const;

export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

export class HeraldError extends Error {
  override name = 'HeraldError';
  /** What to change, where the fixed message cannot say it: answered beside it as `hint`. */
  readonly hint: string | undefined;
  constructor(
    readonly code: ErrorCode,
    message: string,
    options?: { cause?: unknown; hint?: string },
  ) {
    super(message, options);
    this.hint = options?.hint;
  }
}

/** Messages fixed by the interface specification (§7.1) and product decisions. */
export const Messages = {
  invalidApiKey: 'Invalid or missing API key',
  invalidAdminToken: 'Invalid or missing admin token',
  invalidJson: 'Invalid JSON body',
  invalidTemplate: "Missing or invalid 'template'",
  invalidRecipient: "Missing or invalid 'to' (recipient email)",
  invalidType: "Only 'email' type is supported",
  quotaExceeded: 'Request quota exceeded',
  notificationNotFound: 'Notification not found',
  queueFailed: 'Failed to queue notification',
  templateNotFound: 'Template not found',
  smtpNotConfigured: 'SMTP not configured',
  invalidSendAt: "Invalid 'send_at' (ISO-8601 time at most 30 days ahead)",
  notCancelable: 'Notification can no longer be canceled',
  canceled: 'Canceled',
} as const;

/** Valid JSON refused all the same (it could pollute prototypes), as the 400's hint. */
export const PROTOTYPE_KEY_HINT =
  "A key named '__proto__', or 'constructor' holding a 'prototype' key, is refused";

const NO_RECIPIENT_HINT = "No 'to' was given, and the project has no contact email to send to instead";

export const errors = {
  invalidApiKey: () => new HeraldError(ErrorCode.InvalidApiKey, Messages.invalidApiKey),
  invalidJson: (hint?: string) =>
    new HeraldError(ErrorCode.InvalidJson, Messages.invalidJson, hint === undefined ? {} : { hint }),
  invalidTemplate: (hint?: string) =>
    new HeraldError(ErrorCode.InvalidTemplate, Messages.invalidTemplate, hint === undefined ? {} : { hint }),
  invalidRecipient: (hint?: string) =>
    new HeraldError(
      ErrorCode.InvalidRecipient,
      Messages.invalidRecipient,
      hint === undefined ? {} : { hint },
    ),
  /** No `to`, and no contact email to send to instead (spec §7.1). */
  noRecipient: () => errors.invalidRecipient(NO_RECIPIENT_HINT),
  invalidType: () => new HeraldError(ErrorCode.InvalidType, Messages.invalidType),
  invalidField: (message: string, hint?: string) =>
    new HeraldError(ErrorCode.InvalidField, message, hint === undefined ? {} : { hint }),
  invalidSendAt: (hint?: string) =>
    new HeraldError(ErrorCode.InvalidField, Messages.invalidSendAt, hint === undefined ? {} : { hint }),
  quotaExceeded: () => new HeraldError(ErrorCode.QuotaExceeded, Messages.quotaExceeded),
  notificationNotFound: () => new HeraldError(ErrorCode.NotificationNotFound, Messages.notificationNotFound),
  notCancelable: (hint?: string) =>
    new HeraldError(ErrorCode.NotCancelable, Messages.notCancelable, hint === undefined ? {} : { hint }),
  /** The store could not commit; `cause` is the store's error, for the operator's log. */
  queueFailed: (cause?: unknown) => new HeraldError(ErrorCode.QueueFailed, Messages.queueFailed, { cause }),
  unsupportedEncoding: (given: string) =>
    new HeraldError(ErrorCode.UnsupportedEncoding, 'Content-Encoding is not supported', {
      hint: `The body came with Content-Encoding: ${given}; send the JSON as it is, uncompressed, without that header`,
    }),
  idempotencyMismatch: () =>
    new HeraldError(
      ErrorCode.IdempotencyMismatch,
      'Idempotency-Key was already used with a different request body',
    ),
  idempotencyInFlight: () =>
    new HeraldError(
      ErrorCode.IdempotencyInFlight,
      'A request with this Idempotency-Key is still being processed',
    ),
  projectNotFound: (ref: string) => new HeraldError(ErrorCode.ProjectNotFound, `Project not found: ${ref}`),
  projectExists: (name: string) =>
    new HeraldError(ErrorCode.ProjectExists, `A project named ${JSON.stringify(name)} already exists`),
  templateNotFound: () => new HeraldError(ErrorCode.TemplateNotFound, Messages.templateNotFound),
  templateExists: (name: string) =>
    new HeraldError(ErrorCode.TemplateExists, `A template named ${JSON.stringify(name)} already exists`),
  invalidInput: (message: string) => new HeraldError(ErrorCode.InvalidInput, message),
  webhookNotFound: (id: string | number) =>
    new HeraldError(ErrorCode.WebhookNotFound, `Webhook endpoint not found: ${id}`),
  deliveryNotFound: () => new HeraldError(ErrorCode.DeliveryNotFound, 'Webhook delivery not found'),
  adminNotFound: (email: string) => new HeraldError(ErrorCode.AdminNotFound, `No admin with email ${email}`),
  layoutNotFound: (name: string) => new HeraldError(ErrorCode.LayoutNotFound, `Layout not found: ${name}`),
  layoutExists: (name: string) =>
    new HeraldError(ErrorCode.LayoutExists, `A layout named ${JSON.stringify(name)} already exists`),
  suppressionNotFound: (email: string) =>
    new HeraldError(
      ErrorCode.SuppressionNotFound,
      `Not on the suppression list: ${JSON.stringify(email.slice(0, 100))}`,
    ),
  invalidAdminToken: () => new HeraldError(ErrorCode.InvalidAdminToken, Messages.invalidAdminToken),
  adminTokenNotFound: (id: string | number) =>
    new HeraldError(ErrorCode.AdminTokenNotFound, `Admin token not found: ${String(id).slice(0, 40)}`),
  adminTokenExists: (name: string) =>
    new HeraldError(
      ErrorCode.AdminTokenExists,
      `An admin token named ${JSON.stringify(name)} already exists`,
    ),
  conflict: (message: string) => new HeraldError(ErrorCode.Conflict, message),
};
