/**
 * Domain results onto the contract: errors as wire errors (`{ error: { tag, message, details } }`),
 * a compile as the preview the contract returns.
 */
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

/** A compile result as the contract's Preview. */
export const toPreview = (result: {
  readonly model: string
  readonly format: string
  readonly request: unknown
  readonly report: unknown
  readonly layers: ReadonlyArray<{ readonly id: string; readonly tokens: number; readonly messages?: number }>
  readonly prefix: unknown
  readonly warnings: ReadonlyArray<string>
}) => ({
  model: result.model,
  format: result.format,
  request: result.request,
  report: result.report,
  layers: result.layers,
  prefix: result.prefix,
  warnings: result.warnings
})
