/**
 * Errors on the wire: `{ "error": { "tag", "message", "details" } }` with the status each class
 * carries. `tag` is the domain error's tag (SessionNotFound, VersionConflict, PathRefused, ...),
 * so clients can branch on it; `details` holds its fields (each value at most 120 characters).
 * The `/v1` endpoints answer the same statuses in OpenAI's shape instead.
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

/** No key, or not a valid one. */
export class Unauthorized extends Schema.TaggedError<Unauthorized>("@ctxo/api/Unauthorized")(
  "Unauthorized",
  fields
) {}
/** A key without the right to this endpoint (a tenant's key on `/admin`, the admin key on data). */
export class Forbidden extends Schema.TaggedError<Forbidden>("@ctxo/api/Forbidden")("Forbidden", fields) {}
/** A body over CTXO_MAX_BODY_BYTES, declared or chunked. */
export class PayloadTooLarge extends Schema.TaggedError<PayloadTooLarge>("@ctxo/api/PayloadTooLarge")(
  "PayloadTooLarge",
  fields
) {}
/** A body that is not JSON (`application/json` or `*\/*+json`). */
export class UnsupportedMediaType extends Schema.TaggedError<UnsupportedMediaType>(
  "@ctxo/api/UnsupportedMediaType"
)("UnsupportedMediaType", fields) {}
/** A tenant's requests in flight over its limit, or the upstream's rate limit (`Retry-After`). */
export class TooManyRequests extends Schema.TaggedError<TooManyRequests>("@ctxo/api/TooManyRequests")(
  "TooManyRequests",
  fields
) {}
/** The upstream model failed (an error status, a broken or empty stream, a network error). */
export class BadGateway extends Schema.TaggedError<BadGateway>("@ctxo/api/BadGateway")(
  "BadGateway",
  fields
) {}
/** The upstream model did not answer in time. */
export class GatewayTimeout extends Schema.TaggedError<GatewayTimeout>("@ctxo/api/GatewayTimeout")(
  "GatewayTimeout",
  fields
) {}

export const BadRequestWire = wire(BadRequest, "BadRequest", 400)
export const UnauthorizedWire = wire(Unauthorized, "Unauthorized", 401)
export const ForbiddenWire = wire(Forbidden, "Forbidden", 403)
export const PayloadTooLargeWire = wire(PayloadTooLarge, "PayloadTooLarge", 413)
export const UnsupportedMediaTypeWire = wire(UnsupportedMediaType, "UnsupportedMediaType", 415)
export const TooManyRequestsWire = wire(TooManyRequests, "TooManyRequests", 429)
export const BadGatewayWire = wire(BadGateway, "BadGateway", 502)
export const GatewayTimeoutWire = wire(GatewayTimeout, "GatewayTimeout", 504)
export const NotFoundWire = wire(NotFound, "NotFound", 404)
export const ConflictWire = wire(Conflict, "Conflict", 409)
export const UnprocessableWire = wire(Unprocessable, "Unprocessable", 422)
export const ServerErrorWire = wire(ServerError, "ServerError", 500)

export type ApiError =
  | BadRequest
  | Unauthorized
  | Forbidden
  | NotFound
  | Conflict
  | PayloadTooLarge
  | UnsupportedMediaType
  | Unprocessable
  | TooManyRequests
  | ServerError
  | BadGateway
  | GatewayTimeout
