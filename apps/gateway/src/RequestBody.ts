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
import { Effect } from "effect"

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

export type BodyRead =
  | { readonly _tag: "Body"; readonly bytes: Uint8Array }
  /** Over the limit; `drained` says the rest was read to its end (the connection can be kept). */
  | { readonly _tag: "TooLarge"; readonly drained: boolean }
  | { readonly _tag: "Aborted" }

/**
 * Reads a body up to `limit` bytes. Past the limit it keeps reading and dropping up to `drainBound`
 * more bytes, so a client that sends everything before reading gets to read the 413.
 */
export const readBody = (source: IncomingMessage, limit: number, drainBound: number) =>
  Effect.async<BodyRead>((resume) => {
    const chunks: Array<Buffer> = []
    let size = 0
    let done = false
    const stop = () => {
      done = true
      source.off("data", onData)
      source.off("end", onEnd)
      source.off("error", onError)
      source.off("aborted", onError)
    }
    const finish = (result: BodyRead) => {
      if (done) return
      stop()
      if (result._tag === "TooLarge" && !result.drained) source.pause()
      resume(Effect.succeed(result))
    }
    const onData = (chunk: Buffer) => {
      size += chunk.length
      if (size <= limit) chunks.push(chunk)
      else {
        chunks.length = 0
        if (size > limit + drainBound) finish({ _tag: "TooLarge", drained: false })
      }
    }
    const onEnd = () =>
      finish(
        size > limit ? { _tag: "TooLarge", drained: true } : { _tag: "Body", bytes: Buffer.concat(chunks) }
      )
    const onError = () => finish({ _tag: "Aborted" })
    if (source.readableEnded) {
      finish({ _tag: "Body", bytes: new Uint8Array() })
      return
    }
    source.on("data", onData)
    source.on("end", onEnd)
    source.on("error", onError)
    source.on("aborted", onError)
    return Effect.sync(stop)
  })
