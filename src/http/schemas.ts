import { Type, type Static } from 'typebox';

/**
 * Response shapes of the public API (spec §4, product.md §3). Fastify compiles them into
 * serializers, so they are also the guarantee that no field beyond these ever leaks out.
 */

export const ErrorBody = Type.Object({ error: Type.String() });

export const SendResponse = Type.Object({
  id: Type.Integer(),
  request_id: Type.String(),
  status: Type.Literal('queued'),
  message: Type.String(),
});

export const StatusResponse = Type.Object({
  id: Type.Integer(),
  request_id: Type.String(),
  status: Type.Union([Type.Literal('queued'), Type.Literal('sent'), Type.Literal('failed')]),
  template: Type.String(),
  to: Type.String(),
  type: Type.String(),
  attempts: Type.Integer(),
  created_at: Type.String(),
  updated_at: Type.String(),
  sent_at: Type.Optional(Type.String()),
  transport: Type.Optional(Type.String()),
  error_message: Type.Optional(Type.String()),
});

export const StatusParams = Type.Object({ request_id: Type.String() });

export type StatusParams = Static<typeof StatusParams>;
