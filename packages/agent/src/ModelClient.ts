/**
 * The upstream model: any OpenAI-compatible base URL, over a keep-alive connection pool (undici)
 * with no SDK in between (a streamed chunk is parsed once and passed on as the upstream wrote it). With
 * no API key configured, the gateway starts the local fake upstream (`FakeUpstream`) and talks to
 * it the same way. `complete` streams one chat completion as events: text deltas, then the tool
 * calls and the usage when the stream ends.
 *
 * Every call has deadlines (`Deadlines`): to its first byte, between two chunks, and in all. A
 * deadline that passes, a caller that stops (an aborted signal, an interrupted fiber) or a failure
 * aborts the HTTP request; a call read to its end keeps its connection. A call is a plain promise
 * (`direct`, for a path that runs no Effect per request); the Effect calls wrap it. A `200` that holds no answer (empty, not JSON, not Server-Sent
 * Events, a stream that ends with no finish reason, content or tool call) is an `UpstreamError` of
 * kind `protocol`, never an empty answer.
 */

import type { IncomingHttpHeaders } from "node:http"
import { type OpenAIMessage, openAIMessageJson } from "@ctxo/compiler/Render"
import type { ToolSpec } from "@ctxo/compiler/ToolSelection"
import { Context, Effect, Layer, Option, Redacted, Schema, Stream } from "effect"
import type { Dispatcher } from "undici"
import { type Reply, startFakeUpstream } from "./FakeUpstream.ts"

/**
 * What went wrong with an upstream call:
 * - `timeout`: no first byte, no data between chunks, or no whole answer within its deadline;
 * - `status`: the upstream answered with an error (an HTTP status, or an error object in its stream);
 * - `network`: the connection failed or broke;
 * - `protocol`: the upstream answered, but not with a chat completion (malformed JSON, an empty
 *   body, a stream that ended without a finish reason, content or tool call).
 */
export const UpstreamErrorKind = Schema.Literal("timeout", "status", "network", "protocol")
export type UpstreamErrorKind = typeof UpstreamErrorKind.Type

export class UpstreamError extends Schema.TaggedError<UpstreamError>("@ctxo/gateway/UpstreamError")(
  "UpstreamError",
  {
    kind: UpstreamErrorKind,
    status: Schema.optional(Schema.Number),
    code: Schema.optional(Schema.String),
    /** The upstream's error `type` (`invalid_request_error`, `tokens`, ...), as it sent it. */
    type: Schema.optional(Schema.String),
    /** The upstream's error `param`, when it named one. */
    param: Schema.optional(Schema.String),
    /** The upstream's `Retry-After` header, as it sent it. */
    retryAfter: Schema.optional(Schema.String),
    /** The upstream's rate-limit headers (`retry-after`, `retry-after-ms`, `x-ratelimit-*`), passed on. */
    headers: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
    /** The upstream's own message (no status prefix), when it sent one. */
    reason: Schema.String
  }
) {
  override get message() {
    const retry = this.retryAfter === undefined ? "" : ` (it asks to retry after ${this.retryAfter})`
    return `Upstream model failed${this.status === undefined ? "" : ` (${this.status})`}: ${this.reason}${retry}`
  }
}

export type CompletionEvent =
  | { readonly _tag: "TextDelta"; readonly text: string }
  | {
      readonly _tag: "Done"
      readonly text: string
      readonly toolCalls: ReadonlyArray<{
        readonly id: string
        readonly name: string
        readonly arguments: string
      }>
      readonly usage?: { readonly inputTokens: number; readonly outputTokens: number }
    }

/** A streamed completion chunk, as much of it as the accumulator reads. */
export interface Chunk {
  readonly usage?: { readonly prompt_tokens?: number; readonly completion_tokens?: number } | null
  readonly choices?: ReadonlyArray<{
    readonly finish_reason?: string | null
    readonly delta?: {
      readonly content?: string | null
      readonly tool_calls?: ReadonlyArray<{
        readonly index: number
        readonly id?: string
        readonly function?: { readonly name?: string; readonly arguments?: string }
      }>
    }
  }>
}

/** Collects a streamed answer: its text, its tool calls (merged by index) and the usage. */
export const chunkAccumulator = () => {
  let text = ""
  const calls = new Map<number, { id: string; name: string; arguments: string }>()
  let usage: { inputTokens: number; outputTokens: number } | undefined
  let finishReason: string | undefined
  return {
    /** Adds a chunk; returns its text ("" when it has none). */
    add: (chunk: Chunk): string => {
      if (chunk.usage)
        usage = {
          inputTokens: chunk.usage.prompt_tokens ?? 0,
          outputTokens: chunk.usage.completion_tokens ?? 0
        }
      const choice = chunk.choices?.[0]
      if (typeof choice?.finish_reason === "string") finishReason = choice.finish_reason
      const delta = choice?.delta
      if (delta === undefined || delta === null) return ""
      for (const call of delta.tool_calls ?? []) {
        const current = calls.get(call.index) ?? { id: "", name: "", arguments: "" }
        calls.set(call.index, {
          id: call.id ?? current.id,
          name: current.name + (call.function?.name ?? ""),
          arguments: current.arguments + (call.function?.arguments ?? "")
        })
      }
      const piece = typeof delta.content === "string" ? delta.content : ""
      text += piece
      return piece
    },
    result: () => ({
      text,
      toolCalls: [...calls.entries()].sort(([a], [b]) => a - b).map(([, c]) => c),
      usage,
      finishReason
    }),
    /** Nothing came that makes an answer: no finish reason, no text, no tool call. */
    isEmpty: () => finishReason === undefined && text === "" && calls.size === 0
  }
}

export interface CompletionRequest {
  readonly model: string
  /** The compiled request's messages (OpenAI's chat format). */
  readonly messages: ReadonlyArray<OpenAIMessage>
  /** The compiled request's tools (the tools source's choice). */
  readonly tools?: ReadonlyArray<ToolSpec>
}

export interface Service {
  /** Where requests go (for /readyz and logs). */
  readonly upstream: string
  readonly complete: (request: CompletionRequest) => Stream.Stream<CompletionEvent, UpstreamError>
  /** The client's request body as is: the completion (JSON). */
  readonly passthrough: (body: RawBody) => Effect.Effect<unknown, UpstreamError>
  /**
   * The client's request body as is, streamed: each chunk handed to `each` as it comes, in order,
   * with no stream's machinery per chunk (an Effect stream of the chunks took about a millisecond
   * of a session's streamed turn). A failure or an interruption ends the call.
   */
  readonly passthroughEach: (
    body: RawBody,
    each: (chunk: Record<string, unknown>) => void
  ) => Effect.Effect<void, UpstreamError>
  /**
   * The same passthrough calls without Effect, for a path that runs no Effect per request (the
   * gateway's proxy mode): they fail with an `UpstreamError`; `stop` and `close` abort the call.
   */
  readonly direct: Direct
}

/** The passthrough calls without Effect (see `Service.direct`). */
export interface Direct {
  /** One completion: `answer` is the upstream's answer; `stop` aborts the call (the client went away). */
  readonly passthrough: (body: RawBody) => {
    readonly answer: Promise<unknown>
    readonly stop: () => void
  }
  /** A streamed completion, read as it comes (its first `next` waits for the upstream's headers). */
  readonly stream: (body: RawBody) => ChunkReader
}

/** A streamed answer read as it comes: `next` gives the chunks completed so far, `undefined` at its end. */
export interface ChunkReader {
  readonly next: () => Promise<ReadonlyArray<Chunk & Record<string, unknown>> | undefined>
  /** Ends the call: aborts the request unless its answer was read to the end. */
  readonly close: () => void
}

export class ModelClient extends Context.Tag("@ctxo/gateway/ModelClient")<ModelClient, Service>() {}

/** A layer's output with its model client (if it has one) wrapped by `f` (measured, traced). */
export const wrapClient =
  (f: (client: Service) => Service) =>
  <A, E, R>(layer: Layer.Layer<A, E, R>): Layer.Layer<A, E, R> =>
    Layer.map(layer, (context) =>
      Option.match(Context.getOption(context as Context.Context<ModelClient>, ModelClient), {
        onNone: () => context,
        onSome: (client) =>
          Context.add(context as Context.Context<ModelClient>, ModelClient, f(client)) as Context.Context<A>
      })
    )

/** The headers a client's retry logic reads: `retry-after`, `retry-after-ms` and `x-ratelimit-*`. */
export const rateLimitHeaders = (
  headers: { forEach: (f: (value: string, key: string) => void) => void } | undefined
): Record<string, string> | undefined => {
  if (headers === undefined) return undefined
  const out: Record<string, string> = {}
  headers.forEach((value, key) => {
    const k = key.toLowerCase()
    if (k === "retry-after" || k === "retry-after-ms" || k.startsWith("x-ratelimit-")) out[k] = value
  })
  return Object.keys(out).length === 0 ? undefined : out
}

const toUpstreamError = (e: unknown): UpstreamError => {
  if (e instanceof UpstreamError) return e
  const reason = e instanceof Error ? e.message : String(e)
  if (e instanceof SyntaxError)
    return new UpstreamError({ kind: "protocol", reason: `the upstream sent malformed JSON: ${reason}` })
  return new UpstreamError({ kind: "network", reason })
}

/**
 * The `error` a body or a streamed chunk carries (`{ error: { message, type, code, param } }`, or
 * any other value said as it came), as an `UpstreamError` of kind `status`; `undefined` when it
 * carries none. `base` adds what the response says besides (its status, its rate-limit headers).
 */
const errorIn = (
  value: unknown,
  fallback: string,
  base: Partial<Pick<UpstreamError, "status" | "retryAfter" | "headers">> = {}
): UpstreamError | undefined => {
  const error = (value as { error?: unknown } | null)?.error
  if (error === undefined || error === null || error === false) return undefined
  const e = (typeof error === "object" ? error : {}) as {
    message?: unknown
    code?: unknown
    type?: unknown
    param?: unknown
  }
  return new UpstreamError({
    kind: "status",
    ...base,
    ...(typeof e.code === "string" ? { code: e.code } : {}),
    ...(typeof e.type === "string" ? { type: e.type } : {}),
    ...(typeof e.param === "string" ? { param: e.param } : {}),
    reason:
      typeof e.message === "string" && e.message !== ""
        ? e.message
        : typeof error === "string" && error !== ""
          ? error
          : fallback
  })
}

/** An upstream's error answer: its status, its body's `error` (else the body itself), its headers. */
const statusError = (status: number, headers: IncomingHttpHeaders, text: string): UpstreamError => {
  const retryAfter = headerOf(headers, "retry-after")
  const limits = rateLimitHeaders({
    forEach: (f) => {
      for (const [key, value] of Object.entries(headers))
        if (value !== undefined) f(Array.isArray(value) ? value.join(", ") : value, key)
    }
  })
  const base = {
    status,
    ...(retryAfter === undefined ? {} : { retryAfter }),
    ...(limits === undefined ? {} : { headers: limits })
  }
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    parsed = undefined
  }
  const reason = text.trim() === "" ? `status code ${status} (no body)` : text.trim().slice(0, 200)
  return errorIn(parsed, reason, base) ?? new UpstreamError({ kind: "status", ...base, reason })
}

const headerOf = (headers: IncomingHttpHeaders, name: string) => {
  const value = headers[name]
  return Array.isArray(value) ? value[0] : value
}

/** How long an upstream call may take: to its first byte, between two chunks, and in all. */
export interface Deadlines {
  readonly totalMs: number
  readonly firstByteMs: number
  readonly idleMs: number
}

/** What a call received of the response: its status and headers, then its body as it comes. */
interface Head {
  readonly status: number
  readonly headers: IncomingHttpHeaders
}

/** Past this many bytes received and not yet read, the upstream is paused (its deadlines too). */
const HIGH_WATER = 1 << 20

/**
 * One request to the upstream, its answer read as it comes through undici's dispatch handler (no
 * stream object and no promise per chunk), within its deadlines kept by one timer: until the first
 * byte of the body, the first-byte deadline; after it, the idle deadline from the last data
 * received; always the total. A deadline that passes aborts the request and fails the call with a
 * `timeout`. `close` aborts it unless its body was read to its end (then its connection is kept).
 */
const exchange = (
  dispatcher: Dispatcher | Promise<Dispatcher>,
  url: URL,
  headers: Readonly<Record<string, string>>,
  body: string,
  d: Deadlines
) => {
  const start = Date.now()
  let controller: Dispatcher.DispatchController | undefined
  let failure: UpstreamError | undefined
  let head: Head | undefined
  let received = false
  let ended = false
  let paused = false
  let buffered = 0
  const chunks: Array<Buffer> = []
  let waiting:
    | { resolve: (value: Head | Buffer | undefined) => void; reject: (e: UpstreamError) => void }
    | undefined
  let waitingFor: "head" | "body" = "head"

  const settle = () => {
    if (waiting === undefined) return
    const w = waiting
    if (failure !== undefined) {
      waiting = undefined
      return w.reject(failure)
    }
    if (waitingFor === "head") {
      if (head === undefined) return
      waiting = undefined
      return w.resolve(head)
    }
    if (chunks.length > 0) {
      waiting = undefined
      return w.resolve(takeChunks())
    }
    if (ended) {
      waiting = undefined
      w.resolve(undefined)
    }
  }
  const takeChunks = () => {
    const out = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)
    chunks.length = 0
    buffered = 0
    if (paused && controller !== undefined) {
      paused = false
      controller.resume()
      arm()
    }
    return out
  }

  // The deadlines: one timer, set again when data comes.
  let timer: ReturnType<typeof setTimeout> | undefined
  const totalAt = start + d.totalMs
  const arm = () => {
    if (timer !== undefined) clearTimeout(timer)
    timer = undefined
    if (ended || paused || failure !== undefined) return
    const now = Date.now()
    const phaseAt = received ? now + d.idleMs : start + d.firstByteMs
    const reason =
      totalAt <= phaseAt
        ? `timed out: no whole answer from the upstream within ${d.totalMs} ms`
        : received
          ? `timed out: no data from the upstream for ${d.idleMs} ms`
          : `timed out: no first byte from the upstream within ${d.firstByteMs} ms`
    timer = setTimeout(
      () => fail(new UpstreamError({ kind: "timeout", reason })),
      Math.min(totalAt, phaseAt) - now
    )
  }
  const fail = (error: UpstreamError) => {
    if (failure !== undefined || ended) return
    failure = error
    if (timer !== undefined) clearTimeout(timer)
    controller?.abort(error)
    settle()
  }

  const handler: Dispatcher.DispatchHandler = {
    onRequestStart: (c) => {
      controller = c
      if (failure !== undefined) c.abort(failure)
    },
    onResponseStart: (_c, status, responseHeaders) => {
      if (status < 200 && status >= 100) return
      head = { status, headers: responseHeaders }
      settle()
    },
    onResponseData: (c, chunk) => {
      if (failure !== undefined) return
      received = true
      chunks.push(chunk)
      buffered += chunk.length
      if (buffered > HIGH_WATER) {
        paused = true
        c.pause()
      }
      arm()
      settle()
    },
    onResponseEnd: () => {
      ended = true
      if (timer !== undefined) clearTimeout(timer)
      settle()
    },
    onResponseError: (_c, error) => {
      if (failure === undefined) failure = toUpstreamError(error)
      if (timer !== undefined) clearTimeout(timer)
      settle()
    }
  }
  arm()
  const dispatch = (to: Dispatcher) => {
    to.dispatch(
      { origin: url.origin, path: `${url.pathname}${url.search}`, method: "POST", headers, body },
      handler
    )
  }
  // The pool while undici loads (the process's first call): the request goes out once it has, unless
  // the call failed meanwhile (a deadline, a stop).
  if (dispatcher instanceof Promise)
    dispatcher.then(
      (to) => {
        if (failure !== undefined) return
        try {
          dispatch(to)
        } catch (error) {
          fail(toUpstreamError(error))
        }
      },
      (error: unknown) => fail(toUpstreamError(error))
    )
  else dispatch(dispatcher)
  const wait = <A extends Head | Buffer | undefined>(what: "head" | "body") =>
    new Promise<A>((resolve, reject) => {
      waitingFor = what
      waiting = { resolve: resolve as (value: Head | Buffer | undefined) => void, reject }
      settle()
    })
  return {
    /** The response's status and headers. */
    head: (): Promise<Head> =>
      failure !== undefined
        ? Promise.reject(failure)
        : head !== undefined
          ? Promise.resolve(head)
          : wait("head"),
    /** The body received since the last read, joined; `undefined` once it ended. */
    read: (): Promise<Buffer | undefined> =>
      failure !== undefined
        ? Promise.reject(failure)
        : chunks.length > 0
          ? Promise.resolve(takeChunks())
          : ended
            ? Promise.resolve(undefined)
            : wait("body"),
    /** The rest of the body, as text. */
    readAll: async (): Promise<string> => {
      const parts: Array<Buffer> = []
      for (;;) {
        const part = await (failure !== undefined
          ? Promise.reject(failure)
          : chunks.length > 0
            ? Promise.resolve(takeChunks())
            : ended
              ? Promise.resolve(undefined)
              : wait<Buffer | undefined>("body"))
        if (part === undefined) break
        parts.push(part)
      }
      return parts.length === 1 ? parts[0]!.toString("utf8") : Buffer.concat(parts).toString("utf8")
    },
    /** Stops the call: aborts the request unless its body ended (its connection is then kept). */
    close: () => {
      if (ended || failure !== undefined) return
      fail(
        new UpstreamError({
          kind: "network",
          reason: "the call was stopped before the upstream answered whole"
        })
      )
    }
  }
}

/** A promise of the model client's as an Effect (it rejects with an `UpstreamError`). */
const awaited = <A>(run: () => Promise<A>): Effect.Effect<A, UpstreamError> =>
  Effect.async((resume) => {
    run().then(
      (value) => resume(Effect.succeed(value)),
      (e: unknown) => resume(Effect.fail(toUpstreamError(e)))
    )
  })

const protocolError = (reason: string) => new UpstreamError({ kind: "protocol", reason })

/** A parsed non-streaming answer that is a chat completion with something in it, else why not. */
const checkCompletion = (answer: unknown): string | undefined => {
  if (typeof answer !== "object" || answer === null || Array.isArray(answer))
    return "the answer is not a JSON object"
  const choices = (answer as { choices?: unknown }).choices
  if (!Array.isArray(choices) || choices.length === 0) return "the answer has no choices"
  const choice = choices[0] as {
    finish_reason?: unknown
    message?: { content?: unknown; tool_calls?: unknown }
  } | null
  if (typeof choice !== "object" || choice === null || typeof choice.message !== "object")
    return "the answer's first choice has no message"
  const content = choice.message?.content
  const calls = choice.message?.tool_calls
  if (
    typeof choice.finish_reason !== "string" &&
    (typeof content !== "string" || content === "") &&
    (!Array.isArray(calls) || calls.length === 0)
  )
    return "the answer has no finish reason, content or tool call"
  return undefined
}

/** Where one upstream is: its OpenAI-compatible base URL and its key ("none" when it takes none). */
export interface Endpoint {
  readonly baseURL: string
  readonly apiKey: string
}

/**
 * The text each answer came from, as the upstream sent it (a streamed chunk: its event's data; a
 * completion: its body): a proxy passes it on as it is, with no second `JSON.stringify`.
 */
const sentAs = new WeakMap<object, string>()
/** The text the upstream sent for an answer or a streamed chunk (`undefined` for one made here). */
export const sentTextOf = (chunk: object): string | undefined => sentAs.get(chunk)

/**
 * Splits a byte stream of Server-Sent Events into each event's data (its `data:` lines joined),
 * as text arrives: `push` returns the events completed so far.
 */
const sseSplitter = () => {
  const decoder = new TextDecoder()
  let buffer = ""
  /** An event's data: its `data:` lines joined (`undefined` when it has none). */
  const dataOf = (event: string) => {
    const data: Array<string> = []
    for (const line of event.split(/\r\n|\r|\n/))
      if (line.startsWith("data:")) data.push(line.slice(line.charCodeAt(5) === 32 ? 6 : 5))
    return data.length === 0 ? undefined : data.join("\n")
  }
  return {
    push: (bytes: Uint8Array): Array<string> => {
      buffer += decoder.decode(bytes, { stream: true })
      const out: Array<string> = []
      for (;;) {
        // A blank line ends an event (CRLF, LF or CR line ends).
        const end = /(\r\n|\r(?!\n)|\n)(\r\n|\r(?!\n)|\n)/.exec(buffer)
        if (end === null) break
        const data = dataOf(buffer.slice(0, end.index))
        buffer = buffer.slice(end.index + end[0].length)
        if (data !== undefined) out.push(data)
      }
      return out
    },
    /** The data of what is left when the stream ends (an event with no blank line after it). */
    rest: (): string | undefined => dataOf(buffer + decoder.decode())
  }
}

/**
 * A completion request's body, `{ ...body, stream }`, character for character what
 * `JSON.stringify` makes of it. A message the compiler rendered from history (the same frozen
 * object every compile) is written from the JSON the compiler keeps with it (`openAIMessageJson`):
 * a session's turn serializes only what is new in its history, where the whole history was
 * serialized again every turn. A body with no such message (a proxied client's) is one
 * `JSON.stringify`, as before.
 */
export const requestBody = (body: RawBody, stream: boolean): string => {
  const whole: Record<string, unknown> = { ...body, stream }
  const messages = body.messages
  if (!Array.isArray(messages) || !messages.some((m) => openAIMessageJson(m) !== undefined))
    return JSON.stringify(whole)
  let text = "{"
  for (const key of Object.keys(whole)) {
    const separator = text === "{" ? "" : ","
    if (key !== "messages") {
      const value = JSON.stringify(whole[key])
      if (value !== undefined) text += `${separator}${JSON.stringify(key)}:${value}`
      continue
    }
    text += `${separator}"messages":[`
    for (let i = 0; i < messages.length; i++) {
      if (i > 0) text += ","
      const m: unknown = messages[i]
      text += openAIMessageJson(m) ?? JSON.stringify(m) ?? "null"
    }
    text += "]"
  }
  return `${text}}`
}

/**
 * Keep-alive connections to the upstreams (undici's idle timeout, or the server's `Keep-Alive`
 * hint), up to 256 per origin, one pool for the process (as
 * Node's own `fetch` has): a service handed out of its layer keeps working, and idle connections
 * do not hold the process open.
 */
let pool: Dispatcher | undefined
let loading: Promise<Dispatcher> | undefined
/**
 * The pool, or the promise of it while undici loads: undici (a megabyte of the gateway's bundle) is
 * imported at the process's first call, not at its start, which a first compile does not wait for.
 */
const sharedPool = (): Dispatcher | Promise<Dispatcher> => {
  if (pool !== undefined) return pool
  if (loading === undefined) {
    loading = import("undici").then((undici) => {
      // Named under Node's ESM loader; under `default` in the gateway's bundle (undici is CommonJS).
      const { Agent } = "Agent" in undici ? undici : (undici as { readonly default: typeof undici }).default
      pool = new Agent({
        connections: 256,
        // The call's deadlines bound every step; undici's own timers stay out of their way.
        headersTimeout: 0,
        bodyTimeout: 0
      })
      return pool
    })
    // A failed import is tried again by the next call.
    loading.catch(() => {
      loading = undefined
    })
  }
  return loading
}

/**
 * Calls to one OpenAI-compatible upstream over a keep-alive connection pool (undici): the body is
 * sent as the client's JSON, the answer read as bytes, a streamed answer split into its events as
 * they come. No SDK between the gateway and the wire: a proxied call costs what HTTP costs.
 */
export const make = (
  endpoint: Endpoint,
  upstream: string,
  deadlines: Deadlines,
  /** The connection pool, or its promise (default: the process's, made at the first call). */
  dispatcher?: Dispatcher | Promise<Dispatcher>
): Service => {
  const base = endpoint.baseURL.replace(/\/+$/, "")
  const url = new URL(`${base}/chat/completions`)
  // What the openai SDK sent besides the key: its organization and project headers, from the same
  // environment variables.
  const organization = process.env.OPENAI_ORG_ID
  const project = process.env.OPENAI_PROJECT_ID
  const headers = {
    "content-type": "application/json",
    accept: "application/json, text/event-stream",
    "user-agent": "ctxo/0.1.0",
    ...(organization ? { "openai-organization": organization } : {}),
    ...(project ? { "openai-project": project } : {}),
    ...(endpoint.apiKey === "" || endpoint.apiKey === "none"
      ? {}
      : { authorization: `Bearer ${endpoint.apiKey}` })
  }

  /**
   * Sends one completion request: the exchange, whose `headers` fail with the upstream's fields
   * when it answered an error status (its body read whole).
   */
  const send = (body: RawBody, stream: boolean) => {
    const call = exchange(dispatcher ?? sharedPool(), url, headers, requestBody(body, stream), deadlines)
    const started = async (): Promise<Head> => {
      const head = await call.head()
      if (head.status < 200 || head.status >= 300)
        throw statusError(head.status, head.headers, await call.readAll())
      return head
    }
    return { call, started }
  }

  /** One non-streaming completion: its headers, then its body whole, within the deadlines. */
  const completionOf = (body: RawBody) => {
    const { call, started } = send(body, false)
    const answer = (async (): Promise<unknown> => {
      try {
        await started()
        const text = await call.readAll()
        if (text.trim() === "") throw protocolError("the upstream answered 200 with an empty body")
        let answer: unknown
        try {
          answer = JSON.parse(text)
        } catch (e) {
          throw protocolError(
            `the upstream sent malformed JSON (${(e as Error).message}): ${text.slice(0, 120)}`
          )
        }
        const error = errorIn(answer, "the upstream answered an error")
        if (error !== undefined) throw error
        const invalid = checkCompletion(answer)
        if (invalid !== undefined) throw protocolError(invalid)
        sentAs.set(answer as object, text)
        return answer
      } catch (e) {
        throw toUpstreamError(e)
      } finally {
        call.close()
      }
    })()
    return { answer, stop: call.close }
  }

  /**
   * One streaming completion, read as it comes within the deadlines. A stream that ends with no
   * finish reason, content or tool call fails (`protocol`); after `[DONE]` the body is still read to
   * its end (nothing else is taken from it), so its connection is kept.
   */
  const streamOf = (body: RawBody): ChunkReader => {
    const { call, started } = send(body, true)
    let contentType: string | undefined
    const acc = chunkAccumulator()
    const events = sseSplitter()
    let finished = false
    let sawDone = false
    const chunkOf = (data: string) => {
      let chunk: Chunk & Record<string, unknown>
      try {
        chunk = JSON.parse(data) as Chunk & Record<string, unknown>
      } catch (e) {
        throw protocolError(
          `the upstream sent malformed JSON (${(e as Error).message}): ${data.slice(0, 120)}`
        )
      }
      const error = errorIn(chunk, "the upstream sent an error")
      if (error !== undefined) throw error
      acc.add(chunk)
      sentAs.set(chunk, data)
      return chunk
    }
    const next = async (): Promise<ReadonlyArray<Chunk & Record<string, unknown>> | undefined> => {
      try {
        if (contentType === undefined)
          contentType = headerOf((await started()).headers, "content-type") ?? "none"
        for (;;) {
          if (finished) {
            if (acc.isEmpty())
              throw protocolError(
                `the stream ended without a finish reason, content or tool call (content-type ${contentType})`
              )
            return undefined
          }
          const value = await call.read()
          const datas = value === undefined ? [] : events.push(value)
          if (value === undefined) {
            finished = true
            const rest = events.rest()
            if (rest !== undefined) datas.push(rest)
          }
          const chunks: Array<Chunk & Record<string, unknown>> = []
          for (const data of datas) {
            if (sawDone) break
            if (data.trim() === "[DONE]") sawDone = true
            else chunks.push(chunkOf(data))
          }
          if (chunks.length > 0) return chunks
        }
      } catch (e) {
        call.close()
        throw toUpstreamError(e)
      }
    }
    return { next, close: call.close }
  }

  /** The streamed completion as an Effect stream (`complete`'s): closing it (or a failure) aborts the request. */
  const chunksOf = (body: RawBody): Stream.Stream<Chunk & Record<string, unknown>, UpstreamError> =>
    Stream.unwrapScoped(
      Effect.map(
        Effect.acquireRelease(
          Effect.sync(() => streamOf(body)),
          (reader) => Effect.sync(reader.close)
        ),
        (reader) =>
          Stream.repeatEffectOption(
            Effect.flatMap(Effect.mapError(awaited(reader.next), Option.some), (chunks) =>
              chunks === undefined ? Effect.fail(Option.none()) : Effect.succeed(chunks)
            )
          ).pipe(Stream.flattenIterables)
      )
    )

  /** The streamed completion, each chunk to `each`; ending (or failing, or interrupted) closes it. */
  const eachOf = (
    body: RawBody,
    each: (chunk: Record<string, unknown>) => void
  ): Effect.Effect<void, UpstreamError> =>
    Effect.suspend(() => {
      const reader = streamOf(body)
      const rest: Effect.Effect<void, UpstreamError> = Effect.flatMap(awaited(reader.next), (chunks) => {
        if (chunks === undefined) return Effect.void
        for (const chunk of chunks) each(chunk)
        return rest
      })
      return Effect.ensuring(rest, Effect.sync(reader.close))
    })

  return {
    upstream,
    direct: { passthrough: completionOf, stream: streamOf },
    passthroughEach: eachOf,
    passthrough: (body) =>
      Effect.suspend(() => {
        const call = completionOf(body)
        return Effect.onInterrupt(
          awaited(() => call.answer),
          () => Effect.sync(call.stop)
        )
      }),
    complete: (request) =>
      Stream.unwrap(
        Effect.sync(() => {
          const acc = chunkAccumulator()
          const deltas = chunksOf({
            model: request.model,
            messages: request.messages,
            ...(request.tools === undefined || request.tools.length === 0 ? {} : { tools: request.tools }),
            stream_options: { include_usage: true }
          }).pipe(
            Stream.mapConcat((chunk): ReadonlyArray<CompletionEvent> => {
              const text = acc.add(chunk)
              return text === "" ? [] : [{ _tag: "TextDelta", text }]
            })
          )
          return Stream.concat<CompletionEvent, UpstreamError, never, CompletionEvent, never, never>(
            deltas,
            Stream.suspend(() => {
              const { text, toolCalls, usage } = acc.result()
              const done: CompletionEvent = {
                _tag: "Done",
                text,
                toolCalls,
                ...(usage === undefined ? {} : { usage })
              }
              return Stream.succeed(done)
            })
          )
        })
      )
  }
}

/** One named upstream (`CTXO_UPSTREAMS`): where requests whose model has its prefix go. */
export interface NamedUpstream {
  /** The provider prefix it serves (`openai` serves `openai/gpt-4o`). */
  readonly name: string
  readonly baseUrl: string
  readonly apiKey: Option.Option<Redacted.Redacted<string>>
  /** Forward `name/model` as is (an upstream such as OpenRouter whose ids carry the prefix). */
  readonly keepPrefix?: boolean
}

export interface UpstreamOptions {
  readonly apiKey: Option.Option<Redacted.Redacted<string>>
  /** Default with a key: https://api.openai.com/v1. */
  readonly baseUrl: Option.Option<string>
  /** More upstreams by provider prefix (`CTXO_UPSTREAMS`); the single one above stays the default. */
  readonly upstreams?: ReadonlyArray<NamedUpstream>
  /** The local model (no key, no base URL): its port (`CTXO_LOCAL_MODEL_PORT`) and script of replies. */
  readonly localModel?: { readonly port?: number; readonly script?: ReadonlyArray<Reply> }
  /** One call in all (CTXO_UPSTREAM_TIMEOUT_MS). */
  readonly timeoutMs: number
  /** To the first byte of the answer (CTXO_UPSTREAM_FIRST_BYTE_MS); default: `timeoutMs`. */
  readonly firstByteMs?: number
  /** Between two chunks of the answer (CTXO_UPSTREAM_IDLE_MS); default: `timeoutMs`. */
  readonly idleMs?: number
}

/** Provider prefixes of the model registry: `openai/gpt-4o` goes upstream as `gpt-4o`. */
export const PROVIDER_PREFIXES: ReadonlySet<string> = new Set([
  "openai",
  "anthropic",
  "google",
  "meta",
  "mistral",
  "qwen",
  "deepseek"
])

/**
 * Where a model goes and under which name: the upstream named by its prefix (then without it,
 * unless that upstream keeps prefixes), else the default upstream, which gets a registry
 * provider's prefix stripped (`openai/gpt-4o` -> `gpt-4o`, as OpenAI itself names it) and any
 * other name as is (`meta-llama/llama-3.3-70b-instruct` on a vLLM or OpenRouter).
 */
export const routeModel = <T extends { readonly name: string; readonly keepPrefix?: boolean }>(
  model: string,
  named: ReadonlyArray<T>,
  fallback: T
): { readonly target: T; readonly model: string } => {
  const slash = model.indexOf("/")
  if (slash <= 0) return { target: fallback, model }
  const prefix = model.slice(0, slash).toLowerCase()
  const rest = model.slice(slash + 1)
  const target = named.find((u) => u.name.toLowerCase() === prefix)
  if (target !== undefined) return { target, model: target.keepPrefix === true ? model : rest }
  return {
    target: fallback,
    model: fallback.keepPrefix !== true && PROVIDER_PREFIXES.has(prefix) ? rest : model
  }
}

/** Several upstreams behind one service: each request to the one its model routes to. */
export const routed = (
  targets: ReadonlyArray<{ readonly name: string; readonly keepPrefix?: boolean; readonly service: Service }>,
  fallback: { readonly name: string; readonly keepPrefix?: boolean; readonly service: Service }
): Service => {
  const pick = (model: string) => routeModel(model, targets, fallback)
  return {
    upstream:
      targets.length === 0
        ? fallback.service.upstream
        : [fallback, ...targets.filter((t) => t !== fallback)]
            .map((t) => `${t.name}: ${t.service.upstream}`)
            .join(", "),
    passthrough: (body) => {
      const { target, model } = pick(body.model)
      return target.service.passthrough({ ...body, model })
    },
    passthroughEach: (body, each) => {
      const { target, model } = pick(body.model)
      return target.service.passthroughEach({ ...body, model }, each)
    },
    direct: {
      passthrough: (body) => {
        const { target, model } = pick(body.model)
        return target.service.direct.passthrough({ ...body, model })
      },
      stream: (body) => {
        const { target, model } = pick(body.model)
        return target.service.direct.stream({ ...body, model })
      }
    },
    complete: (request) => {
      const { target, model } = pick(request.model)
      return target.service.complete({ ...request, model })
    }
  }
}

/**
 * The configured upstream: with a key, that API (OpenAI by default); with only a base URL, that
 * key-less API; with neither, the local fake one, started and stopped with the layer. Named
 * upstreams (`upstreams`) take the models with their prefix; the rest go to that default one.
 */
export const layer = (options: UpstreamOptions): Layer.Layer<ModelClient> =>
  Layer.scoped(
    ModelClient,
    Effect.gen(function* () {
      const deadlines: Deadlines = {
        totalMs: options.timeoutMs,
        firstByteMs: Math.min(options.firstByteMs ?? options.timeoutMs, options.timeoutMs),
        idleMs: Math.min(options.idleMs ?? options.timeoutMs, options.timeoutMs)
      }
      const named = (options.upstreams ?? []).map((u) => ({
        name: u.name,
        ...(u.keepPrefix === undefined ? {} : { keepPrefix: u.keepPrefix }),
        service: make(
          {
            apiKey: Option.match(u.apiKey, { onNone: () => "none", onSome: Redacted.value }),
            baseURL: u.baseUrl
          },
          u.baseUrl,
          deadlines
        )
      }))
      const single = (service: Service) => routed(named, { name: "default", service })
      if (Option.isSome(options.apiKey)) {
        const baseURL = Option.getOrElse(options.baseUrl, () => "https://api.openai.com/v1")
        return single(make({ apiKey: Redacted.value(options.apiKey.value), baseURL }, baseURL, deadlines))
      }
      if (Option.isSome(options.baseUrl)) {
        const baseURL = options.baseUrl.value
        return single(make({ apiKey: "none", baseURL }, baseURL, deadlines))
      }
      // Named upstreams only: the first is the default.
      if (named.length > 0) return routed(named, named[0]!)
      const local = options.localModel ?? {}
      const fake = yield* Effect.acquireRelease(
        Effect.promise(() =>
          startFakeUpstream({
            ...(local.port === undefined ? {} : { port: local.port }),
            ...(local.script === undefined ? {} : { script: local.script }),
            // Nobody reads them here: kept, they grew the gateway by each request's body.
            keepRequests: false
          })
        ),
        (f) => Effect.promise(() => f.close())
      )
      yield* Effect.logInfo(
        `No upstream API key: answering with the local deterministic model at ${fake.url}${local.script === undefined ? "" : ` (${local.script.length} scripted replies first)`}`
      )
      return single(make({ apiKey: "none", baseURL: fake.url }, `local (${fake.url})`, deadlines))
    })
  )

/** A chat completion request passed through as the client sent it (tools, temperature, ...). */
export type RawBody = Readonly<Record<string, unknown>> & {
  readonly model: string
  readonly messages: ReadonlyArray<Record<string, unknown>>
}
