/** Domain errors onto the wire errors of the contract (`{ error: { tag, message, details } }`). */
import { BadRequest, Conflict, NotFound, ServerError, Unprocessable } from "@ctxo/api/ApiErrors"

const NOT_FOUND = new Set(["SessionNotFound", "FileNotFound"])
const CONFLICT = new Set(["SessionExists", "VersionConflict"])
const BAD_REQUEST = new Set(["PathRefused", "InvalidRange", "InvalidSessionId"])
const UNPROCESSABLE = new Set([
  "InvalidManifest",
  "UnresolvedReference",
  "UnknownModel",
  "BudgetExceeded",
  "InvalidContextKey",
  "DuplicateInput",
  "InvalidJson"
])

/** A domain error as a wire error: its tag, message and fields. */
export const toApiError = (e: { readonly _tag: string; readonly message: string }) => {
  const { _tag, ...rest } = e as unknown as Record<string, unknown>
  const fields = { tag: _tag as string, message: e.message, details: rest }
  if (NOT_FOUND.has(fields.tag)) return new NotFound(fields)
  if (CONFLICT.has(fields.tag)) return new Conflict(fields)
  if (BAD_REQUEST.has(fields.tag)) return new BadRequest(fields)
  if (UNPROCESSABLE.has(fields.tag)) return new Unprocessable(fields)
  return new ServerError(fields)
}
