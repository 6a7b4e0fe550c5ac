/**
 * Errors on the wire: `{ "error": { "tag", "message", "details" } }` with the status each class
 * carries. `tag` is the domain error's tag (SessionNotFound, VersionConflict, PathRefused, ...),
 * so clients can branch on it; `details` holds its fields.
 */
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import { Schema } from "effect"

const fields = {
  tag: Schema.String,
  message: Schema.String,
  details: Schema.optional(Schema.Unknown)
}
const Body = Schema.Struct({ error: Schema.Struct(fields) })

const wire = <
  Self extends { readonly tag: string; readonly message: string; readonly details?: unknown },
  I extends { readonly _tag: string }
>(
  schema: Schema.Schema<Self, I>,
  tag: I["_tag"],
  status: number
) =>
  Schema.transform(Body, schema, {
    strict: false,
    decode: (body) => ({ _tag: tag, ...body.error }),
    encode: (e) => {
      const { _tag: _, ...rest } = e as unknown as {
        _tag: string
        tag: string
        message: string
        details?: unknown
      }
      return { error: rest }
    }
  }).annotations(HttpApiSchema.annotations({ status }))

export class BadRequest extends Schema.TaggedError<BadRequest>("@ctxo/api/BadRequest")(
  "BadRequest",
  fields
) {}
export class NotFound extends Schema.TaggedError<NotFound>("@ctxo/api/NotFound")("NotFound", fields) {}
export class Conflict extends Schema.TaggedError<Conflict>("@ctxo/api/Conflict")("Conflict", fields) {}
export class Unprocessable extends Schema.TaggedError<Unprocessable>("@ctxo/api/Unprocessable")(
  "Unprocessable",
  fields
) {}
export class ServerError extends Schema.TaggedError<ServerError>("@ctxo/api/ServerError")(
  "ServerError",
  fields
) {}

export const BadRequestWire = wire(BadRequest, "BadRequest", 400)
export const NotFoundWire = wire(NotFound, "NotFound", 404)
export const ConflictWire = wire(Conflict, "Conflict", 409)
export const UnprocessableWire = wire(Unprocessable, "Unprocessable", 422)
export const ServerErrorWire = wire(ServerError, "ServerError", 500)

export type ApiError = BadRequest | NotFound | Conflict | Unprocessable | ServerError
