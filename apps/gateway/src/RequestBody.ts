/**
 * The edges of a request body, checked before any handler parses it:
 *
 * - the content type: every body the gateway takes is JSON (`application/json` or `*\/*+json`), so
 *   a cross-site form post (`text/plain`, `application/x-www-form-urlencoded`, `multipart/form-data`)
 *   cannot reach a handler;
 * - the size: a body over the limit is answered 413 whether its length was declared or it came
 *   chunked; what follows the limit is read and dropped (up to a bound) so the client can read the
 *   answer instead of seeing its connection reset;
 * - the nesting: JSON nested deeper than `MAX_JSON_DEPTH` is refused on the raw text, before
 *   `JSON.parse` or a schema walks it.
 */
import type { IncomingMessage } from "node:http"

/** The version an `If-Match` header names (a weak or quoted tag as the bare version). */
export const ifMatch = (header: string | undefined) => header?.replace(/^W\//, "").replace(/^"|"$/g, "")

/** Arrays and objects nested deeper than this are refused (400). */
export const MAX_JSON_DEPTH = 64

/** `application/json`, `application/json; charset=utf-8`, `application/vnd.x+json`. */
export const isJsonContentType = (contentType: string | undefined) => {
  const media = (contentType ?? "").split(";")[0]!.trim().toLowerCase()
  return media === "application/json" || /^[a-z0-9!#$&^_.+-]+\/[a-z0-9!#$&^_.+-]+\+json$/.test(media)
}

/** The request says a body follows: a length over 0, or a chunked transfer. */
export const hasBody = (headers: Readonly<Record<string, string | undefined>>) =>
  Number(headers["content-length"] ?? 0) > 0 || /chunked/i.test(headers["transfer-encoding"] ?? "")

/**
 * The first nesting level over `max` in a JSON text (`undefined` when it stays within): one pass
 * over the characters, strings skipped, no parsing.
 */
export const depthOver = (text: string, max: number = MAX_JSON_DEPTH): number | undefined => {
  let depth = 0
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (inString) {
      if (c === 92)
        i++ // backslash: skip the escaped character
      else if (c === 34) inString = false
    } else if (c === 34) inString = true
    else if (c === 91 || c === 123) {
      depth++
      if (depth > max) return depth
    } else if (c === 93 || c === 125) depth--
  }
  return undefined
}

/** A request refused at its edges: the status, the error's tag and one sentence. */
export interface Refusal {
  readonly status: number
  readonly tag: string
  readonly message: string
  /** Headers of the answer (`connection: close` when the rest of the body was not read). */
  readonly headers?: Readonly<Record<string, string>>
}

/** What past the limit is still read and dropped, so the client gets to read its 413. */
export const drainBoundOf = (limit: number) => Math.max(4 * limit, 4 << 20)

const tooLarge = (limit: number, close: boolean): Refusal => ({
  status: 413,
  tag: "PayloadTooLarge",
  message: `The body is over the limit of ${limit} bytes (CTXO_MAX_BODY_BYTES)`,
  ...(close ? { headers: { connection: "close" } } : {})
})

/**
 * A declared length over the limit, refused before the body is read: Node reads and drops the rest
 * so the client reads the 413, unless it is beyond the drain bound (then the connection closes).
 */
export const declaredRefusal = (
  headers: Readonly<Record<string, string | string[] | undefined>>,
  limit: number
): Refusal | undefined => {
  const declared = Number(headers["content-length"] ?? 0)
  return declared > limit ? tooLarge(limit, declared > limit + drainBoundOf(limit)) : undefined
}

/** A JSON body read whole: its bytes and text (empty when the request has none). */
export interface JsonBody {
  readonly bytes: Uint8Array
  readonly text: string
}

/**
 * A request's body, checked at its edges: a JSON content type (else 415), at most `limit` bytes
 * also when it comes chunked (else 413, the rest read and dropped up to a bound), read to its end
 * (else 400), nested at most `MAX_JSON_DEPTH` levels (else 400). A request without a body has the
 * empty one.
 */
export const readJsonBody = (source: IncomingMessage, limit: number): Promise<JsonBody | Refusal> => {
  const headers = source.headers as Readonly<Record<string, string | undefined>>
  if (!hasBody(headers)) return Promise.resolve({ bytes: new Uint8Array(), text: "" })
  if (!isJsonContentType(headers["content-type"]))
    return Promise.resolve({
      status: 415,
      tag: "UnsupportedMediaType",
      message: "The body must be JSON (Content-Type: application/json)"
    })
  return new Promise((resolve) => {
    const chunks: Array<Buffer> = []
    const drainBound = drainBoundOf(limit)
    let size = 0
    let done = false
    const finish = (result: JsonBody | Refusal) => {
      if (done) return
      done = true
      source.off("data", onData)
      source.off("end", onEnd)
      source.off("error", onError)
      source.off("aborted", onError)
      if ("status" in result && result.headers?.connection === "close") source.pause()
      resolve(result)
    }
    const onData = (chunk: Buffer) => {
      size += chunk.length
      if (size <= limit) chunks.push(chunk)
      else {
        chunks.length = 0
        if (size > limit + drainBound) finish(tooLarge(limit, true))
      }
    }
    const onEnd = () => {
      if (size > limit) return finish(tooLarge(limit, false))
      const bytes = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)
      const text = bytes.toString("utf8")
      finish(
        depthOver(text) === undefined
          ? { bytes, text }
          : {
              status: 400,
              tag: "InvalidRequest",
              message: `The body is nested deeper than ${MAX_JSON_DEPTH} levels of arrays and objects`
            }
      )
    }
    const onError = () =>
      finish({ status: 400, tag: "InvalidRequest", message: "The body could not be read to its end" })
    if (source.readableEnded) return finish({ bytes: new Uint8Array(), text: "" })
    source.on("data", onData)
    source.on("end", onEnd)
    source.on("error", onError)
    source.on("aborted", onError)
  })
}
