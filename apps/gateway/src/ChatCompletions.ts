/**
 * `POST /v1/chat/completions`, whoever serves it: the gateway's plain node:http lane (`Lane`) for
 * the route as clients write it, the HttpApi handler (`OpenAIHttp`) for every other spelling the
 * router takes. Both hand the body's text here and write the `Answer` they get back.
 *
 * - Proxy (no session): the client's own messages, fitted to the model's window (the oldest whole
 *   turns dropped, `x-ctxo-dropped-turns`), forwarded as they are. No Effect runs on this path: the
 *   model client's promise calls (`ModelClient.direct`), the upstream's text passed on unparsed
 *   (a streamed chunk as its event's data, an answer as its body).
 * - Session mode (`X-Ctxo-Session` or `metadata.session_id`): the turn engine records what the
 *   client sent as new (its user message, or the results of the tool calls the model made) and
 *   compiles the session's context for each step, holding the session's lock until the answer is
 *   recorded (streaming included).
 *
 * Errors are OpenAI's shape (`{ error: { message, type, code, param } }`) with the status every
 * endpoint gives them (`ErrorMapping`), bounded like every error the gateway sends. A stream's
 * status waits for its first frame: a failure before it is that error's status; after it, one
 * `data: {"error": ...}` frame ends the stream (the openai SDK raises it as an `APIError`).
 */

import { contentText, fitMessages, inputLimit } from "@ctxo/agent/Completions"
import {
  type Chunk,
  chunkAccumulator,
  ModelClient,
  type RawBody,
  sentTextOf,
  UpstreamError
} from "@ctxo/agent/ModelClient"
import { type Driver, type ModelStep, TurnEngine } from "@ctxo/agent/TurnEngine"
import { ChatCompletionRequest } from "@ctxo/api/ChatCompletion"
import { ModelRegistry } from "@ctxo/budget/ModelRegistry"
import { Tokenizer } from "@ctxo/budget/Tokenizer"
import type { CompileResult } from "@ctxo/compiler/Compile"
import type { ToolSpec } from "@ctxo/compiler/ToolSelection"
import type { RawToolResult } from "@ctxo/history/ToolResultCompressor"
import { Store } from "@ctxo/store/Store"
import {
  Cause,
  Context,
  Effect,
  Either,
  Exit,
  Fiber,
  FiberRef,
  FiberRefs,
  Layer,
  Option,
  Runtime,
  Schema,
  type Tracer
} from "effect"
import {
  boundErrorBody,
  type DomainError,
  fromParseError,
  InvalidRequestBody,
  toOpenAIError
} from "./ErrorMapping.ts"
import { GatewayConfig } from "./GatewayConfig.ts"
import * as Metrics from "./Metrics.ts"
import { REQUEST_ID } from "./Telemetry.ts"
import { CurrentTenant } from "./Tenancy.ts"

/** A chat completion's answer, before a transport writes it. */
export type Answer =
  | {
      readonly _tag: "Json"
      readonly status: number
      readonly headers: Readonly<Record<string, string>>
      readonly text: string
    }
  | {
      /** Server-Sent Events, 200: `first` is out already; `next` gives the frames that follow. */
      readonly _tag: "Stream"
      readonly headers: Readonly<Record<string, string>>
      readonly first: string
      /** The next frames (one string, maybe several events); `undefined` once the stream ended. */
      readonly next: () => Promise<string | undefined>
      /** The client went away: the upstream call, or the session's turn, is stopped. */
      readonly cancel: () => void
    }

export interface CompletionRequest {
  /** The request's headers (lower-case names). */
  readonly headers: Readonly<Record<string, string | string[] | undefined>>
  /** The body's text, JSON (its size, type and nesting checked by whoever read it). */
  readonly text: string
  readonly tenant: string
  /** The request's facts for the access log: model, session, tokens, upstream status, error. */
  readonly stats: Metrics.RequestStats
  /** Registers what stops the request's work (the upstream call, the turn) when its client goes away. */
  readonly onGone: (stop: () => void) => void
}

export interface Service {
  readonly answer: (request: CompletionRequest) => Promise<Answer>
}

export class ChatCompletions extends Context.Tag("@ctxo/gateway/ChatCompletions")<
  ChatCompletions,
  Service
>() {}

const SSE_HEADERS = { "content-type": "text/event-stream", "cache-control": "no-cache" }
const JSON_TYPE = "application/json"
const DONE = "data: [DONE]\n\n"

const sse = (data: unknown) => `data: ${JSON.stringify(data)}\n\n`
/** An upstream chunk passed on as the upstream sent it (no second `JSON.stringify`). */
const passedOn = (chunk: object) => {
  const sent = sentTextOf(chunk)
  // Data the upstream spread over several lines goes out as one line again.
  return sent === undefined || /[\r\n]/.test(sent) ? sse(chunk) : `data: ${sent}\n\n`
}

const header = (headers: CompletionRequest["headers"], name: string): string | undefined => {
  const value = headers[name]
  return Array.isArray(value) ? value[0] : value
}

/** `x-ctxo-record: false` (or 0, no): compile and forward, record nothing. */
const recordsNothing = (value: string | undefined) =>
  value !== undefined && /^(false|0|no|off)$/i.test(value.trim())

/** Parts of a message content that are not text (images, audio, files): session mode keeps text only. */
const nonTextParts = (content: unknown) =>
  Array.isArray(content)
    ? content.filter((p) => typeof p !== "object" || p === null || (p as { type?: unknown }).type !== "text")
        .length
    : 0

/** A completion of the answer already recorded for a turn (a retry of a finished one). */
const replayedCompletion = (model: string, content: string) => ({
  id: `ctxo-replayed-${Date.now().toString(36)}`,
  object: "chat.completion",
  created: Math.floor(Date.now() / 1000),
  model,
  choices: [{ index: 0, finish_reason: "stop", message: { role: "assistant", content } }]
})
const replayedChunk = (model: string) => ({
  id: `ctxo-replayed-${Date.now().toString(36)}`,
  object: "chat.completion.chunk",
  created: Math.floor(Date.now() / 1000),
  model
})

/** `x-ctxo-*` headers of a compiled context: tokens used and available, cut turns, prefix hash. */
const compiledHeaders = (compiled: CompileResult | undefined): Record<string, string> => {
  if (compiled === undefined) return {}
  const report = compiled.report
  let cut = 0
  for (const u of report.units) if (u.status !== "included" && u.source.includes("history")) cut++
  const used =
    report.total ?? report.units.filter((u) => u.status === "included").reduce((n, u) => n + u.tokens, 0)
  return {
    "x-ctxo-model": compiled.model,
    "x-ctxo-tokens-used": String(used),
    "x-ctxo-tokens-available": String(report.available),
    "x-ctxo-cut-turns": String(cut),
    "x-ctxo-prefix-hash": compiled.prefix.hash
  }
}

/** The client's function tools (`tools[].function` with a name), as the compile counts them. */
const functionToolsOf = (tools: unknown): ReadonlyArray<ToolSpec> =>
  Array.isArray(tools)
    ? tools.filter(
        (t): t is ToolSpec =>
          typeof t === "object" &&
          t !== null &&
          (t as { type?: unknown }).type === "function" &&
          typeof (t as { function?: { name?: unknown } }).function?.name === "string"
      )
    : []

/** A tool message's content as the tool result the turn records (JSON when it parses). */
const toolResultOf = (content: unknown): RawToolResult => {
  const text = contentText(content)
  try {
    return { status: "success", data: JSON.parse(text) as unknown }
  } catch {
    return { status: "success", data: text }
  }
}

/** A non-streamed completion as the step the turn records. */
const stepOfCompletion = (answer: unknown): ModelStep => {
  const a = answer as {
    choices?: Array<{
      message?: {
        content?: string | null
        tool_calls?: Array<{ id: string; function: { name: string; arguments: string } }>
      }
    }>
    usage?: { prompt_tokens?: number; completion_tokens?: number }
  }
  const message = a.choices?.[0]?.message
  return {
    text: message?.content ?? "",
    toolCalls: (message?.tool_calls ?? []).map((c) => ({
      id: c.id,
      name: c.function.name,
      arguments: c.function.arguments
    })),
    ...(a.usage === undefined
      ? {}
      : { usage: { inputTokens: a.usage.prompt_tokens ?? 0, outputTokens: a.usage.completion_tokens ?? 0 } })
  }
}

const decodeBody = Schema.decodeUnknownEither(ChatCompletionRequest)
type Body = RawBody & ChatCompletionRequest

/** The body as the contract defines it (`ChatCompletionRequest`), else a 400 naming the field. */
const parseBody = (text: string): Either.Either<Body, InvalidRequestBody> => {
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    return Either.left(new InvalidRequestBody({ message: "The body is not valid JSON", param: null }))
  }
  return Either.mapLeft(decodeBody(parsed), fromParseError) as Either.Either<Body, InvalidRequestBody>
}

/** Frames offered by a producer and taken by a transport, in order, with an end. */
const frameQueue = () => {
  const items: Array<string | null> = []
  let waiting: ((item: string | null) => void) | undefined
  return {
    offer: (item: string | null) => {
      if (waiting === undefined) items.push(item)
      else {
        const w = waiting
        waiting = undefined
        w(item)
      }
    },
    take: (): Promise<string | null> =>
      items.length > 0 ? Promise.resolve(items.shift()!) : new Promise((resolve) => (waiting = resolve))
  }
}

/** Where a session-mode stream's headers come from, once its first frame is there. */
interface StreamOut {
  headers: () => Record<string, string>
}

type Services = ModelClient | ModelRegistry | Tokenizer | TurnEngine | Store | GatewayConfig

export const make = Effect.gen(function* () {
  const runtime = yield* Effect.runtime<Services>()
  const context = runtime.context
  const client = Context.get(context, ModelClient)
  const registry = Context.get(context, ModelRegistry)
  const tokenizer = Context.get(context, Tokenizer)
  const config = Context.get(context, GatewayConfig)
  const roots = [config.dataDir]

  const errorAnswer = (e: DomainError, stats: Metrics.RequestStats): Answer => {
    const { status, headers, body } = toOpenAIError(e)
    stats.error ??= Metrics.reasonOf(body) ?? `HTTP ${status}`
    return {
      _tag: "Json",
      status,
      headers: { ...headers, "content-type": JSON_TYPE },
      text: JSON.stringify(boundErrorBody(body, roots))
    }
  }
  /** A failure after the stream's first frame: one error frame, which the client raises. */
  const errorFrame = (e: DomainError, stats: Metrics.RequestStats) => {
    const { body } = toOpenAIError(e)
    stats.error ??= Metrics.reasonOf(body) ?? "error"
    return sse(boundErrorBody(body, roots))
  }
  const serverError = (stats: Metrics.RequestStats): Answer => {
    stats.error ??= "server_error"
    return {
      _tag: "Json",
      status: 500,
      headers: { "content-type": JSON_TYPE },
      text: JSON.stringify({
        error: {
          message: "The gateway failed on this request",
          type: "server_error",
          code: null,
          param: null
        }
      })
    }
  }
  const upstreamErrorOf = (e: unknown) =>
    e instanceof UpstreamError ? e : new UpstreamError({ kind: "network", reason: String(e) })

  // --- proxy: promises only

  /** A model by name, as the registry resolves it (a plain lookup: run at once, no fiber). */
  const resolveModel = (name: string) => Effect.runSyncExit(registry.resolve(name))

  const proxy = async (
    body: Body,
    stats: Metrics.RequestStats,
    onGone: CompletionRequest["onGone"]
  ): Promise<Answer> => {
    const resolved = resolveModel(body.model)
    if (Exit.isFailure(resolved)) {
      const failure = Cause.failureOption(resolved.cause)
      if (Option.isNone(failure)) throw Cause.squash(resolved.cause)
      return errorAnswer(failure.value, stats)
    }
    const model = resolved.value
    const counter = tokenizer.counterNow(model)
    const fitted = fitMessages({
      messages: body.messages,
      counter,
      limit: inputLimit(model, body),
      model: model.id,
      ...(Array.isArray(body.tools) ? { tools: body.tools as ReadonlyArray<Record<string, unknown>> } : {})
    })
    if (Either.isLeft(fitted)) return errorAnswer(fitted.left, stats)
    const forward = fitted.right.dropped === 0 ? body : { ...body, messages: fitted.right.messages }
    const headers = { "x-ctxo-dropped-turns": String(fitted.right.dropped) }
    const modelName = Metrics.modelOf(body)
    stats.model ??= modelName
    if (body.stream !== true) {
      let answer: unknown
      try {
        const call = client.direct.passthrough(forward)
        onGone(call.stop)
        answer = await call.answer
      } catch (e) {
        const error = upstreamErrorOf(e)
        Metrics.upstreamFailedNow(stats, error)
        return errorAnswer(error, stats)
      }
      Metrics.usageSeen(stats, modelName, answer)
      return {
        _tag: "Json",
        status: 200,
        headers: { ...headers, "content-type": JSON_TYPE },
        text: sentTextOf(answer as object) ?? JSON.stringify(answer)
      }
    }
    const reader = client.direct.stream(forward)
    onGone(reader.close)
    let first: ReadonlyArray<Chunk & Record<string, unknown>> | undefined
    try {
      first = await reader.next()
    } catch (e) {
      const error = upstreamErrorOf(e)
      Metrics.upstreamFailedNow(stats, error)
      return errorAnswer(error, stats)
    }
    const framesOf = (chunks: ReadonlyArray<Chunk & Record<string, unknown>>) => {
      let out = ""
      for (const chunk of chunks) {
        Metrics.usageSeen(stats, modelName, chunk)
        out += passedOn(chunk)
      }
      return out
    }
    let ended = first === undefined
    const next = async (): Promise<string | undefined> => {
      if (ended) return undefined
      try {
        const chunks = await reader.next()
        if (chunks !== undefined) return framesOf(chunks)
        ended = true
        return DONE
      } catch (e) {
        ended = true
        const error = upstreamErrorOf(e)
        Metrics.upstreamFailedNow(stats, error)
        return errorFrame(error, stats)
      } finally {
        if (ended) reader.close()
      }
    }
    if (first === undefined) reader.close()
    return {
      _tag: "Stream",
      headers: { ...SSE_HEADERS, ...headers },
      first: first === undefined ? DONE : framesOf(first),
      next,
      cancel: reader.close
    }
  }

  // --- session mode: the turn engine

  /**
   * The answer of a session-mode request, produced by an Effect run in the gateway's runtime, with
   * the request's tenant, facts and log annotations. JSON: its result; a stream: its frames as the
   * turn offers them, the status decided by the first.
   */
  const session = (
    body: Body,
    sessionId: string,
    request: CompletionRequest,
    parent: Tracer.AnySpan | undefined
  ): Promise<Answer> => {
    const { stats } = request
    const frames = frameQueue()
    const out: StreamOut = { headers: () => ({}) }
    let streaming = false
    const program = sessionTurn(body, sessionId, request.headers, out, frames.offer).pipe(
      Effect.locally(CurrentTenant, request.tenant),
      Effect.locally(Metrics.CurrentRequest, stats),
      Effect.annotateLogs({ requestId: stats.requestId, tenant: request.tenant }),
      Effect.annotateSpans(REQUEST_ID, stats.requestId),
      (effect) => (parent === undefined ? effect : Effect.withParentSpan(effect, parent))
    )
    return new Promise<Answer>((resolve) => {
      const fiber = Runtime.runFork(runtime)(program)
      const stop = () => void Runtime.runFork(runtime)(Fiber.interrupt(fiber))
      request.onGone(stop)
      fiber.addObserver((exit) => {
        if (Exit.isSuccess(exit)) {
          if (exit.value !== undefined) return resolve(exit.value)
          frames.offer(DONE)
        } else if (!Cause.isInterruptedOnly(exit.cause)) {
          const failure = Cause.failureOption(exit.cause)
          if (Option.isSome(failure)) {
            if (!streaming) return resolve(errorAnswer(failure.value, stats))
            frames.offer(errorFrame(failure.value, stats))
          } else {
            Runtime.runFork(runtime)(Effect.logError("chat completion failed", exit.cause))
            if (!streaming) return resolve(serverError(stats))
          }
        }
        frames.offer(null)
      })
      // A stream answers once its first frame is there (before it, the turn may still fail).
      void frames.take().then((first) => {
        if (first === null) return
        streaming = true
        resolve({
          _tag: "Stream",
          headers: { ...SSE_HEADERS, ...out.headers() },
          first,
          next: () => frames.take().then((frame) => frame ?? undefined),
          // The client gone: the turn ends (a turn's whole tool step still finishes, see the engine).
          cancel: stop
        })
      })
    })
  }

  /**
   * One session-mode request as the turn engine runs it: the JSON answer, or `undefined` for a
   * stream (its frames went to `offer`, its headers to `out`).
   */
  const sessionTurn = (
    body: Body,
    sessionId: string,
    requestHeaders: CompletionRequest["headers"],
    out: StreamOut,
    offerNow: (frame: string) => void
  ): Effect.Effect<Answer | undefined, DomainError, Services> =>
    Effect.gen(() => turnRequest(body, sessionId, requestHeaders, out, offerNow))
  /**
   * `sessionTurn`'s work: a generator made once, not per request (V8 keeps what a generator function
   * made per call closes over, here the request, until a full collection: docs/hot-path.md, the nineteenth round).
   */
  function* turnRequest(
    body: Body,
    sessionId: string,
    requestHeaders: CompletionRequest["headers"],
    out: StreamOut,
    offerNow: (frame: string) => void
  ) {
    const store = yield* Store
    const engine = yield* TurnEngine
    const modelClient = yield* ModelClient
    const idempotencyKey = header(requestHeaders, "idempotency-key")
    /** The thinking-map node the new user message is about: it joins that node's conversation. */
    const node = header(requestHeaders, "x-ctxo-node")
    yield* registry.resolve(body.model)
    yield* store.getSession(sessionId)
    const {
      messages: _messages,
      metadata: _metadata,
      stream: _stream,
      stream_options: _options,
      ...params
    } = body
    const forwardOf = (
      compiled: CompileResult,
      extra: ReadonlyArray<Record<string, unknown>> = []
    ): RawBody => ({
      ...params,
      model: body.model,
      messages: [...(compiled.format === "openai" ? compiled.request.messages : []), ...extra]
    })
    const trailing: Array<Record<string, unknown>> = []
    for (let i = body.messages.length - 1; i >= 0 && body.messages[i]!.role === "tool"; i--)
      trailing.unshift(body.messages[i]! as Record<string, unknown>)
    let lastUserAt = body.messages.length - 1
    while (lastUserAt >= 0 && body.messages[lastUserAt]!.role !== "user") lastUserAt--
    const lastUser = lastUserAt === -1 ? undefined : body.messages[lastUserAt]
    if (trailing.length === 0 && lastUser === undefined)
      return yield* new InvalidRequestBody({ message: "messages has no user message", param: "messages" })
    const record = !recordsNothing(header(requestHeaders, "x-ctxo-record"))

    // What of the client's messages the session does not take: said in headers and the log.
    const used = !record ? body.messages.length - lastUserAt : trailing.length > 0 ? trailing.length : 1
    const ignored = body.messages.length - used
    const reduced = trailing.length > 0 || lastUser === undefined ? 0 : nonTextParts(lastUser.content)
    const noted: Record<string, string> = {
      ...(ignored > 0 ? { "x-ctxo-ignored-messages": String(ignored) } : {}),
      ...(reduced > 0 ? { "x-ctxo-reduced-parts": String(reduced) } : {}),
      ...(record ? {} : { "x-ctxo-recorded": "false" })
    }
    if (ignored > 0)
      yield* Effect.logWarning(
        `session ${sessionId}: ${ignored} of ${body.messages.length} messages ignored (session mode takes only the new user message or the tool results; the session's own history is used)`
      )
    if (reduced > 0)
      yield* Effect.logWarning(`session ${sessionId}: ${reduced} non-text content parts reduced to text`)

    if (!record) {
      // What the turn engine would send for this input (as the preview shows it), forwarded;
      // nothing is recorded. A dry run of a turn: refused like one when the session is not active.
      const compiled = yield* engine.preview({
        sessionId,
        dryRun: true,
        clientTools: functionToolsOf(body.tools),
        defaultModel: config.model,
        model: body.model,
        format: "openai",
        input: contentText(lastUser?.content ?? "")
      })
      const forward = forwardOf(
        compiled,
        body.messages.slice(lastUserAt + 1) as ReadonlyArray<Record<string, unknown>>
      )
      const headers = { ...noted, ...compiledHeaders(compiled) }
      if (body.stream !== true) return json(yield* modelClient.passthrough(forward), headers)
      out.headers = () => headers
      yield* modelClient.passthroughEach(forward, (chunk) => offerNow(passedOn(chunk)))
      return undefined
    }

    // The client's tools go as it sent them, counted in the compile's budget.
    const clientTools = functionToolsOf(body.tools)
    const options = {
      defaultModel: config.model,
      maxSteps: config.maxSteps,
      format: "openai" as const,
      ...(clientTools.length === 0 ? {} : { clientTools })
    }
    const runWith = <E>(driver: Driver<E>) =>
      trailing.length > 0
        ? engine.continueTurn(
            {
              sessionId,
              model: body.model,
              results: trailing.map((m) => ({
                callId: String(m.tool_call_id),
                result: toolResultOf(m.content)
              }))
            },
            driver,
            options
          )
        : engine.turn(
            {
              sessionId,
              input: contentText(lastUser!.content),
              model: body.model,
              ...(idempotencyKey ? { idempotencyKey } : {}),
              ...(node ? { node } : {})
            },
            driver,
            options
          )
    // What the last step compiled, for the `x-ctxo-*` headers.
    let step: { turn: number; compiled: CompileResult } | undefined
    const headersOf = (turn: number | undefined): Record<string, string> => ({
      ...noted,
      ...((turn ?? step?.turn) === undefined ? {} : { "x-ctxo-turn": String(turn ?? step?.turn) }),
      ...compiledHeaders(step?.compiled)
    })

    if (body.stream !== true) {
      let raw: unknown
      const outcome = yield* runWith<UpstreamError>({
        model: (compiled, context) =>
          Effect.map(modelClient.passthrough(forwardOf(compiled)), (answer) => {
            step = { turn: context.turn, compiled }
            raw = answer
            return stepOfCompletion(answer)
          })
      })
      if (outcome._tag === "Answered" && outcome.replayed)
        return json(replayedCompletion(body.model, outcome.text), headersOf(outcome.turn))
      return json(raw, headersOf(outcome.turn))
    }
    // Streaming: chunks are passed on as they come, while the turn (holding the session's lock)
    // runs; the answer is recorded when the stream ends whole.
    let replayedTurn: number | undefined
    out.headers = () => headersOf(replayedTurn)
    const outcome = yield* runWith<UpstreamError>({
      model: (compiled, context) =>
        Effect.suspend(() => {
          step = { turn: context.turn, compiled }
          const acc = chunkAccumulator()
          return Effect.map(
            modelClient.passthroughEach(
              { ...forwardOf(compiled), stream_options: { include_usage: true } },
              (chunk) => {
                acc.add(chunk as Chunk)
                offerNow(passedOn(chunk))
              }
            ),
            () => {
              const { text, toolCalls, usage } = acc.result()
              return { text, toolCalls, ...(usage === undefined ? {} : { usage }) }
            }
          )
        })
    })
    if (outcome._tag === "Answered" && outcome.replayed) {
      replayedTurn = outcome.turn
      offerNow(
        sse({
          ...replayedChunk(body.model),
          choices: [{ index: 0, delta: { role: "assistant", content: outcome.text }, finish_reason: null }]
        })
      )
      offerNow(
        sse({ ...replayedChunk(body.model), choices: [{ index: 0, delta: {}, finish_reason: "stop" }] })
      )
    }
    return undefined
  }

  const json = (answer: unknown, headers: Record<string, string>): Answer => ({
    _tag: "Json",
    status: 200,
    headers: { ...headers, "content-type": JSON_TYPE },
    text: sentTextOf(answer as object) ?? JSON.stringify(answer)
  })

  const untraced = async (
    request: CompletionRequest,
    parent: Tracer.AnySpan | undefined
  ): Promise<Answer> => {
    const { stats } = request
    const parsed = parseBody(request.text)
    if (Either.isLeft(parsed)) return errorAnswer(parsed.left, stats)
    const body = parsed.right
    stats.model ??= Metrics.requestModelOf(body)
    const sessionId =
      header(request.headers, "x-ctxo-session") ??
      (typeof body.metadata?.session_id === "string" ? body.metadata.session_id : undefined)
    stats.session ??= sessionId?.slice(0, 200)
    try {
      return sessionId === undefined
        ? await proxy(body, stats, request.onGone)
        : await session(body, sessionId, request, parent)
    } catch (e) {
      Runtime.runFork(runtime)(Effect.logError("chat completion failed", e))
      return serverError(stats)
    }
  }

  // With a tracer (OTEL_EXPORTER_OTLP_ENDPOINT): each request a span of its own (the lane runs no
  // HTTP server span), a session's turn under it, ended when the answer is out (a stream: at its
  // last frame, or when the client went away), with the request's facts. Without one: no span.
  const tracing = FiberRefs.getOrDefault(runtime.fiberRefs, FiberRef.currentTracerEnabled)
  const traced = (request: CompletionRequest) =>
    new Promise<Answer>((resolve, reject) => {
      const { stats } = request
      Runtime.runFork(runtime)(
        Effect.useSpan(
          "POST /v1/chat/completions",
          { kind: "server", captureStackTrace: false, attributes: { [REQUEST_ID]: stats.requestId ?? "" } },
          (span) =>
            Effect.async<void>((resume) => {
              let ended = false
              const end = () => {
                if (ended) return
                ended = true
                for (const [key, value] of [
                  ["ctxo.session", stats.session],
                  ["ctxo.model", stats.model],
                  ["ctxo.tokens.in", stats.tokensIn],
                  ["ctxo.tokens.out", stats.tokensOut],
                  ["ctxo.error", stats.error],
                  ["ctxo.upstream_status", stats.upstreamStatus]
                ] as const)
                  if (value !== undefined) span.attribute(key, value)
                resume(Effect.void)
              }
              void untraced(request, span).then(
                (answer) => {
                  if (answer._tag === "Json") {
                    span.attribute("http.response.status_code", answer.status)
                    resolve(answer)
                    return end()
                  }
                  resolve({
                    ...answer,
                    next: () =>
                      answer.next().then((frame) => {
                        if (frame === undefined) end()
                        return frame
                      }),
                    cancel: () => {
                      answer.cancel()
                      end()
                    }
                  })
                },
                (e: unknown) => {
                  // As the untraced call fails: the lane answers it; the span ends with it.
                  reject(e)
                  end()
                }
              )
            })
        )
      )
    })

  return {
    answer: (request) => (tracing ? traced(request) : untraced(request, undefined))
  } satisfies Service
})

export const layer: Layer.Layer<ChatCompletions, never, Services> = Layer.effect(ChatCompletions, make)
