/**
 * Domain results onto the contract, in one place.
 *
 * - Every domain error that can reach a handler has its status in `STATUS`, a table over the union
 *   of their tags: adding an error to that union without a status fails the typecheck, and a
 *   handler whose errors are not in the union does not compile (`toApiError` takes `DomainError`).
 * - `/api` answers `{ error: { tag, message, details } }`; `/v1` answers OpenAI's
 *   `{ error: { message, type, code, param } }`; the status of an error is the same on both.
 * - No error body carries a stack, an absolute path or more than 120 characters of a submitted
 *   value, and none is over 2 KB (`boundErrorBody`, applied to every error response).
 */
import type { ContextTooLong, InvalidCompletionRequest } from "@ctxo/agent/Completions"
import type { DistributionConflict, InvalidControllerInput, TaskNotFound } from "@ctxo/agent/Controller"
import type { IllegalTransition, SessionNotActive } from "@ctxo/agent/Lifecycle"
import type { HistoryUnreadable, MemoryEntryNotFound } from "@ctxo/agent/Memory"
import type { UpstreamError } from "@ctxo/agent/ModelClient"
import type { InvalidToolResults } from "@ctxo/agent/TurnEngine"
import type { Preview } from "@ctxo/api/Api"
import {
  type ApiError,
  BadGateway,
  BadRequest,
  Conflict,
  GatewayTimeout,
  NotFound,
  PayloadTooLarge,
  ServerError,
  TooManyRequests,
  Unprocessable,
  UnsupportedMediaType
} from "@ctxo/api/ApiErrors"
import type { BlockNotFound, InvalidJson, InvalidSidecar } from "@ctxo/blocks/BlockErrors"
import type { BudgetExceeded, InvalidModelConfig, UnknownModel } from "@ctxo/budget/BudgetErrors"
import type { CompileResult } from "@ctxo/compiler/Compile"
import type {
  DuplicateInput,
  InvalidContextKey,
  InvalidManifest,
  UnresolvedReference
} from "@ctxo/compiler/CompilerErrors"
import type { InvalidMap, MapNodeNotFound, MapNotFound } from "@ctxo/compiler/ThinkingMap"
import type {
  HistoryCorrupt,
  HistoryIOError,
  IdempotencyConflict,
  InvalidSessionId,
  MessageNotFound
} from "@ctxo/history/HistoryErrors"
import type { StoreError } from "@ctxo/store/StoreErrors"
import { Data, ParseResult } from "effect"

/** A request body that does not match the contract: the field (`messages[0].content`) and why. */
export class InvalidRequestBody extends Data.TaggedError("InvalidRequestBody")<{
  readonly message: string
  readonly param: string | null
}> {}

/** Every error a handler can fail with. */
export type DomainError =
  | StoreError
  | InvalidManifest
  | UnresolvedReference
  | InvalidContextKey
  | DuplicateInput
  | UnknownModel
  | InvalidModelConfig
  | BudgetExceeded
  | HistoryCorrupt
  | HistoryIOError
  | InvalidSessionId
  | MessageNotFound
  | IdempotencyConflict
  | InvalidJson
  | BlockNotFound
  | InvalidSidecar
  | UpstreamError
  | ContextTooLong
  | InvalidCompletionRequest
  | InvalidToolResults
  | InvalidRequestBody
  | SessionNotActive
  | IllegalTransition
  | TaskNotFound
  | DistributionConflict
  | InvalidControllerInput
  | MemoryEntryNotFound
  | HistoryUnreadable
  | InvalidMap
  | MapNotFound
  | MapNodeNotFound

export type Status = 400 | 404 | 409 | 413 | 415 | 422 | 429 | 500 | 502 | 504

type Rule<E> = Status | ((e: E) => Status)

/** Upstream statuses the client may act on keep their meaning; the rest are the gateway's (502). */
const passedOn = new Set<number>([400, 404, 409, 413, 422, 429])

const upstreamStatus = (e: UpstreamError): Status => {
  if (e.code === "context_length_exceeded") return 400
  if (e.status !== undefined && passedOn.has(e.status)) return e.status as Status
  // `kind` says what failed (timeout, status, network, protocol); without it, the reason says.
  const kind = (e as { readonly kind?: unknown }).kind
  if (kind === "timeout") return 504
  if (kind === undefined && e.status === undefined && /timed? ?out|no data/i.test(e.reason)) return 504
  return 502
}

/** The status of every domain error, the same on `/api` and `/v1`. */
export const STATUS: {
  readonly [K in DomainError["_tag"]]: Rule<Extract<DomainError, { readonly _tag: K }>>
} = {
  SessionNotFound: 404,
  RunNotFound: 404,
  FileNotFound: 404,
  SessionExists: 409,
  VersionConflict: 409,
  PathRefused: 400,
  InvalidRange: 400,
  CorruptFile: 422,
  HistoryJournalCorrupt: 422,
  StoreIOError: 500,
  InvalidManifest: 422,
  UnresolvedReference: 422,
  InvalidContextKey: 422,
  DuplicateInput: 422,
  UnknownModel: 404,
  InvalidModelConfig: 500,
  BudgetExceeded: 400,
  HistoryCorrupt: 422,
  HistoryIOError: 500,
  InvalidSessionId: 400,
  MessageNotFound: 422,
  IdempotencyConflict: 409,
  InvalidJson: 422,
  BlockNotFound: 404,
  InvalidSidecar: 422,
  UpstreamError: upstreamStatus,
  ContextTooLong: 400,
  InvalidCompletionRequest: 400,
  InvalidToolResults: 400,
  InvalidRequestBody: 400,
  SessionNotActive: 409,
  IllegalTransition: 409,
  TaskNotFound: 404,
  DistributionConflict: 409,
  InvalidControllerInput: 400,
  MemoryEntryNotFound: 404,
  HistoryUnreadable: 422,
  InvalidMap: 422,
  MapNotFound: 404,
  MapNodeNotFound: 404
}

export const statusOf = (e: DomainError): Status => {
  const rule = STATUS[e._tag] as Rule<DomainError> | undefined
  // An error cast past the compiler has no entry: a 500, never a crash of the mapping itself.
  return typeof rule === "function" ? rule(e) : (rule ?? 500)
}

/** OpenAI's codes where it has one; otherwise the tag in snake case. */
const OPENAI_CODE: Partial<Record<DomainError["_tag"], string>> = {
  UnknownModel: "model_not_found",
  BudgetExceeded: "context_length_exceeded",
  ContextTooLong: "context_length_exceeded",
  SessionNotFound: "session_not_found",
  IdempotencyConflict: "idempotency_key_reused",
  InvalidRequestBody: "invalid_request_body"
}

export const snakeCase = (tag: string) =>
  tag
    .replace(/([a-z0-9])([A-Z])/g, "$1_$2")
    .replace(/([A-Z]+)([A-Z][a-z])/g, "$1_$2")
    .replace(/[^A-Za-z0-9]+/g, "_")
    .toLowerCase()

// --- bounding what goes out -------------------------------------------------------------------

/** At most this much of any submitted value goes back in an error. */
export const MAX_VALUE = 120
/** A message is one sentence of at most this many characters. */
export const MAX_MESSAGE = 300
/** No error body is larger than this. */
export const MAX_ERROR_BODY = 2048

export const clip = (text: string, max: number) => (text.length <= max ? text : `${text.slice(0, max - 1)}…`)

/** A value with every string clipped, arrays and objects cut short and shallow. */
const clipValue = (value: unknown, depth = 0): unknown => {
  if (typeof value === "string") return clip(value, MAX_VALUE)
  if (typeof value !== "object" || value === null) return value
  if (depth >= 3) return Array.isArray(value) ? `[${value.length} items]` : "{…}"
  if (Array.isArray(value)) return value.slice(0, 10).map((v) => clipValue(v, depth + 1))
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(value).slice(0, 20)) out[clip(k, 40)] = clipValue(v, depth + 1)
  return out
}

/** The error's own fields with every value clipped (what its message is then made of). */
const clippedFields = (e: DomainError): Record<string, unknown> => {
  const { _tag: _, ...fields } = { ...e } as Record<string, unknown>
  delete fields.stack
  return clipValue(fields) as Record<string, unknown>
}

/** The error's message computed over its clipped fields, so no submitted value comes back whole. */
const clippedMessage = (e: DomainError, fields: Record<string, unknown>) => {
  const copy = Object.assign(Object.create(Object.getPrototypeOf(e) as object) as object, fields) as {
    message?: unknown
  }
  let message: unknown
  try {
    message = copy.message
  } catch {
    message = undefined
  }
  if (typeof message !== "string" || message === "")
    message = typeof fields.message === "string" ? fields.message : e.message || e._tag
  return clip((message as string).replace(/\s+/g, " ").trim(), MAX_MESSAGE)
}

const Wire: Record<Status, new (fields: { tag: string; message: string; details?: unknown }) => ApiError> = {
  400: BadRequest,
  404: NotFound,
  409: Conflict,
  413: PayloadTooLarge,
  415: UnsupportedMediaType,
  422: Unprocessable,
  429: TooManyRequests,
  500: ServerError,
  502: BadGateway,
  504: GatewayTimeout
}

/** A domain error as a wire error of `/api`: its tag, message and (clipped) fields. */
export const toApiError = (e: DomainError): ApiError => {
  const details = clippedFields(e)
  const message = clippedMessage(e, details)
  delete details.message
  return new Wire[statusOf(e)]({ tag: e._tag, message, details })
}

/**
 * A domain error in OpenAI's shape for `/v1`, with its status and the headers to send: an upstream's
 * error keeps its own message (no status prefix), `type`, `code`, `param` and rate-limit headers
 * (`retry-after`, `x-ratelimit-*`), so an OpenAI client retries and reports it as it would OpenAI's.
 */
export const toOpenAIError = (e: DomainError) => {
  const status = statusOf(e)
  const fields = clippedFields(e)
  let message = clippedMessage(e, fields)
  let code: string | null = OPENAI_CODE[e._tag] ?? snakeCase(e._tag)
  let type = status >= 500 ? "server_error" : "invalid_request_error"
  let param: string | null = null
  const extra: Record<string, unknown> = {}
  const headers: Record<string, string> = {}
  if (e._tag === "UpstreamError") {
    code = e.code ?? null
    type = e.type ?? (code === "context_length_exceeded" ? "invalid_request_error" : "upstream_error")
    param = e.param ?? null
    if (status < 500) message = clip(e.reason.replace(/\s+/g, " ").trim(), MAX_MESSAGE)
    for (const [name, value] of Object.entries(e.headers ?? {})) headers[name] = clip(value, MAX_VALUE)
    if (e.retryAfter !== undefined) headers["retry-after"] ??= clip(e.retryAfter, MAX_VALUE)
  }
  if (e._tag === "BudgetExceeded" && e.report !== undefined) extra.report = e.report
  if (e._tag === "UnknownModel") param = "model"
  if (e._tag === "ContextTooLong" || e._tag === "BudgetExceeded") param = "messages"
  if (e._tag === "InvalidRequestBody") param = e.param
  if (e._tag === "InvalidToolResults") param = "messages"
  return { status, headers, body: { error: { message, type, code, param, ...extra } } }
}

// --- schema errors as one sentence -------------------------------------------------------------

export interface Issue {
  readonly _tag: string
  readonly path: ReadonlyArray<PropertyKey>
  readonly message: string
}

/** `messages[0].content`; `null` for the body itself. */
export const fieldPath = (path: ReadonlyArray<PropertyKey>): string | null => {
  if (path.length === 0) return null
  let out = ""
  for (const key of path)
    if (typeof key === "number") out += `[${key}]`
    else {
      const name = clip(String(key), 40)
      out += /^[A-Za-z_$][\w$-]*$/.test(name)
        ? `${out === "" ? "" : "."}${name}`
        : `[${JSON.stringify(name)}]`
    }
  return out
}

const shortExpected = (expected: string) => {
  const text = expected.replace(/\s+/g, " ").trim()
  if (text.length <= 60 && !text.includes("{")) return text
  if (text.startsWith("{")) return "an object"
  if (/^(Readonly)?Array<|^readonly /.test(text)) return "an array"
  if (text.includes(" | ")) return "one of the allowed forms"
  return clip(text, 60)
}

/**
 * Schema issues (`ParseResult.ArrayFormatter`, or an `HttpApiDecodeError`'s `issues`) as one
 * sentence naming the field and what was expected, at most 300 characters, and the field's path.
 */
export const describeIssues = (
  issues: ReadonlyArray<Issue>
): { readonly message: string; readonly param: string | null } => {
  const first = issues[0]
  if (first === undefined) return { message: "The request body does not match the contract", param: null }
  const param = fieldPath(first.path)
  const where = param ?? "the body"
  let problem: string
  if (first._tag === "Missing") problem = "is required"
  else if (first._tag === "Unexpected") problem = "is not a known field"
  else {
    const same = issues.filter((i) => fieldPath(i.path) === param && i._tag === first._tag)
    const expected: Array<string> = []
    let actual: string | undefined
    for (const issue of same) {
      const m = /^Expected ([\s\S]*?), actual ([\s\S]*)$/.exec(issue.message)
      if (m === null) continue
      for (const alternative of m[1]!.split(" | ")) expected.push(shortExpected(alternative))
      actual ??= m[2]!
    }
    // An optional field given a wrong value: leaving it out is not what the client meant.
    const given = expected.filter((e) => e !== "undefined")
    const unique = [...new Set(given.length > 0 ? given : expected)].slice(0, 6)
    problem =
      unique.length === 0
        ? clip(first.message.replace(/\s+/g, " ").trim(), 160)
        : `expected ${unique.length === 1 ? unique[0] : `${unique.slice(0, -1).join(", ")} or ${unique.at(-1)}`}${actual === undefined ? "" : `, got ${clip(actual.replace(/\s+/g, " "), 60)}`}`
  }
  return { message: clip(`${where}: ${problem}`, MAX_MESSAGE), param }
}

/** A schema's parse error as an `InvalidRequestBody`. */
export const fromParseError = (error: ParseResult.ParseError) =>
  new InvalidRequestBody(describeIssues(ParseResult.ArrayFormatter.formatErrorSync(error)))

// --- the final guard on every error response -----------------------------------------------------

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")

// Absolute paths under the usual roots of a file system (POSIX and Windows drives), and file URLs.
const ABSOLUTE =
  /(?:file:\/\/)?(?<![\w.~-])\/(?:home|Users|tmp|var|etc|usr|srv|opt|root|private|mnt|proc|dev|data|work|app|Volumes|run|media|snap|nix|lib|bin|sys|boot)(?:\/[^\s"'`:,;)]*)?|\b[A-Za-z]:\\[^\s"'`:,;)]*/g

/** Text with the data root made relative and any other absolute path cut to its last segment. */
export const sanitizeText = (text: string, roots: ReadonlyArray<string>) => {
  let out = text
  for (const root of roots)
    if (root.length > 1)
      out = out.replace(new RegExp(`${escapeRegExp(root)}(?:[/\\\\]|(?![\\w.-]))`, "g"), "")
  return out.replace(ABSOLUTE, (path) => {
    const last = path
      .split(/[/\\]/)
      .filter((s) => s !== "")
      .at(-1)
    return last === undefined ? "<path>" : `<path>/${last}`
  })
}

const sanitizeValue = (value: unknown, roots: ReadonlyArray<string>, depth = 0): unknown => {
  if (typeof value === "string") return sanitizeText(value, roots)
  if (typeof value !== "object" || value === null || depth > 8) return value
  if (Array.isArray(value)) return value.map((v) => sanitizeValue(v, roots, depth + 1))
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(value)) if (k !== "stack") out[k] = sanitizeValue(v, roots, depth + 1)
  return out
}

/**
 * An error body as it may leave the gateway: no stack, no absolute path, the message one bounded
 * sentence, and at most 2 KB (details, then extra fields, are dropped to get there).
 */
export const boundErrorBody = (
  body: { readonly error: Record<string, unknown> },
  roots: ReadonlyArray<string>
): { readonly error: Record<string, unknown> } => {
  const error = sanitizeValue(body.error, roots) as Record<string, unknown>
  if (typeof error.message === "string") error.message = clip(error.message, MAX_MESSAGE)
  const size = (e: Record<string, unknown>) => Buffer.byteLength(JSON.stringify({ error: e }))
  if (size(error) <= MAX_ERROR_BODY) return { error }
  if (error.details !== undefined) error.details = clipValue(error.details)
  if (size(error) <= MAX_ERROR_BODY) return { error }
  const kept: Record<string, unknown> = {}
  for (const key of ["tag", "message", "type", "code", "param"])
    if (key in error)
      kept[key] = typeof error[key] === "string" ? clip(error[key] as string, MAX_MESSAGE) : error[key]
  return { error: kept }
}

/** OpenAI's codes for the errors the middleware and the framework answer on `/v1`. */
const GATEWAY_CODE: Record<string, string> = {
  Unauthorized: "invalid_api_key",
  Forbidden: "insufficient_permissions",
  RouteNotFound: "unknown_url",
  NotFound: "not_found",
  UnsupportedMediaType: "unsupported_media_type",
  TooManyRequests: "rate_limit_exceeded",
  InvalidRequest: "invalid_request_body",
  InvalidJson: "invalid_json"
}

/** OpenAI's `type` by status (as api.openai.com answers them). */
const typeOfStatus = (status: number) =>
  status === 401
    ? "invalid_request_error"
    : status === 403
      ? "invalid_request_error"
      : status === 429
        ? "requests"
        : status >= 500
          ? "server_error"
          : "invalid_request_error"

/** A gateway-shaped error (`{ tag, message, details }`) in OpenAI's shape, for `/v1` routes. */
export const gatewayToOpenAI = (status: number, error: Record<string, unknown>) => {
  const tag = typeof error.tag === "string" ? error.tag : "Error"
  const details = (error.details ?? {}) as Record<string, unknown>
  return {
    error: {
      message: typeof error.message === "string" ? error.message : tag,
      type: typeOfStatus(status),
      code: GATEWAY_CODE[tag] ?? OPENAI_CODE[tag as DomainError["_tag"]] ?? snakeCase(tag),
      param: typeof details.param === "string" ? details.param : null
    }
  }
}

/** A compile result as the contract's Preview. */
export const toPreview = (result: CompileResult): Preview => {
  const common = {
    model: result.model,
    report: result.report,
    layers: result.layers,
    prefix: result.prefix,
    warnings: result.warnings
  }
  switch (result.format) {
    case "openai":
      return { ...common, format: "openai", request: result.request }
    case "anthropic":
      return { ...common, format: "anthropic", request: result.request }
    case "react":
      return { ...common, format: "react", request: result.request }
  }
}
