/**
 * The OpenAI-compatible endpoints: `/v1/models`, `/v1/compile` (stateless) and
 * `/v1/chat/completions` (session mode and fitting proxy, streaming and not). Errors here use
 * OpenAI's shape, `{ error: { message, type, code, param } }`, so OpenAI clients read them; a
 * request that cannot fit is `context_length_exceeded`, before or after the upstream call.
 */

import { contentText, fitMessages, inputLimit } from "@ctxo/agent/Completions"
import {
  type Chunk,
  chunkAccumulator,
  ModelClient,
  type RawBody,
  sentTextOf,
  type UpstreamError
} from "@ctxo/agent/ModelClient"
import { type Driver, type ModelStep, TurnEngine } from "@ctxo/agent/TurnEngine"
import { Api } from "@ctxo/api/Api"
import { Unprocessable } from "@ctxo/api/ApiErrors"
import { ChatCompletionRequest } from "@ctxo/api/ChatCompletion"
import { UnknownModel } from "@ctxo/budget/BudgetErrors"
import { type ModelInfo, ModelRegistry } from "@ctxo/budget/ModelRegistry"
import { Tokenizer } from "@ctxo/budget/Tokenizer"
import type { CompileResult } from "@ctxo/compiler/Compile"
import { compile } from "@ctxo/compiler/Compile"
import { parseManifest } from "@ctxo/compiler/Manifest"
import type { ToolSpec } from "@ctxo/compiler/ToolSelection"
import * as Workspace from "@ctxo/compiler/Workspace"
import { decodeHistoryJson } from "@ctxo/history/HistoryFormat"
import type { RawToolResult } from "@ctxo/history/ToolResultCompressor"
import { Store } from "@ctxo/store/Store"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Effect, Either, Fiber, Queue, Stream } from "effect"
import {
  type DomainError,
  fromParseError,
  InvalidRequestBody,
  toApiError,
  toOpenAIError,
  toPreview
} from "./ErrorMapping.ts"
import { GatewayConfig } from "./GatewayConfig.ts"

const openAIError = (status: number, message: string, type: string, code: string | null) =>
  HttpServerResponse.unsafeJson({ error: { message, type, code, param: null } }, { status })

/**
 * A failure as OpenAI clients expect it, with the status every endpoint gives it (`ErrorMapping`)
 * and the upstream's rate-limit headers (`retry-after`, `x-ratelimit-*`), so the SDK's retry waits.
 */
const toResponse = (e: DomainError) => {
  const { status, headers, body } = toOpenAIError(e)
  return HttpServerResponse.unsafeJson(body, { status, headers })
}

const sse = (data: unknown) => `data: ${JSON.stringify(data)}\n\n`
/** An upstream chunk passed on as the upstream sent it (no second `JSON.stringify`). */
const passedOn = (chunk: object) => {
  const sent = sentTextOf(chunk)
  // Data the upstream spread over several lines goes out as one line again.
  return sent === undefined || /[\r\n]/.test(sent) ? sse(chunk) : `data: ${sent}\n\n`
}

/** A completion of the answer already recorded for a turn (a retry of a finished one). */
const completion = (model: string, content: string) => ({
  id: `ctxo-replayed-${Date.now().toString(36)}`,
  object: "chat.completion",
  created: Math.floor(Date.now() / 1000),
  model,
  choices: [{ index: 0, finish_reason: "stop", message: { role: "assistant", content } }]
})
const completionChunk = (model: string) => ({
  id: `ctxo-replayed-${Date.now().toString(36)}`,
  object: "chat.completion.chunk",
  created: Math.floor(Date.now() / 1000),
  model
})

type Item = string | { readonly failed: DomainError } | null

/**
 * A streamed answer whose status waits for its first frame: `produce` offers Server-Sent Events
 * frames in the background. A failure before the first frame (an upstream 429, a reused
 * idempotency key, an input that cannot fit) is that error's HTTP status, as OpenAI answers it;
 * after it, one `data: {"error": {...}}` frame ends the stream, which the openai SDK raises as an
 * `APIError` with the message, type and code. A client that goes away interrupts `produce`.
 */
const streamed = <R>(
  produce: (offer: (frame: string) => Effect.Effect<void>) => Effect.Effect<void, DomainError, R>,
  headers: () => Record<string, string>
) =>
  Effect.gen(function* () {
    const queue = yield* Queue.unbounded<Item>()
    const fiber = yield* produce((frame) => Effect.asVoid(Queue.offer(queue, frame))).pipe(
      Effect.zipRight(Queue.offer(queue, "data: [DONE]\n\n")),
      Effect.catchAll((e) => Queue.offer(queue, { failed: e })),
      Effect.tapDefect((d) => Effect.logError("chat completion failed", d)),
      Effect.ensuring(Queue.offer(queue, null)),
      Effect.forkDaemon
    )
    const first = yield* Queue.take(queue).pipe(Effect.onInterrupt(() => Fiber.interrupt(fiber)))
    if (first === null) return openAIError(500, "The gateway failed on this request", "server_error", null)
    if (typeof first === "object") return toResponse(first.failed)
    const chunks = Stream.concat(Stream.succeed(first), Stream.fromQueue(queue)).pipe(
      Stream.takeWhile((x): x is Exclude<Item, null> => x !== null),
      Stream.map((x) => (typeof x === "string" ? x : sse(toOpenAIError(x.failed).body))),
      // The client gone: the producer ends (a turn's whole tool step still finishes, see the engine).
      Stream.ensuring(Fiber.interrupt(fiber))
    )
    return HttpServerResponse.stream(chunks.pipe(Stream.encodeText), {
      contentType: "text/event-stream",
      headers: { "cache-control": "no-cache", ...headers() }
    })
  })

/** `x-ctxo-*` headers of a compiled context: tokens used and available, cut turns, prefix hash. */
const compiledHeaders = (compiled: CompileResult | undefined): Record<string, string> => {
  if (compiled === undefined) return {}
  const report = compiled.report
  const cut = report.units.filter((u) => /history/.test(u.source) && u.status !== "included").length
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

/** Parts of a message content that are not text (images, audio, files): session mode keeps text only. */
const nonTextParts = (content: unknown) =>
  Array.isArray(content)
    ? content.filter((p) => typeof p !== "object" || p === null || (p as { type?: unknown }).type !== "text")
        .length
    : 0

/** `x-ctxo-record: false` (or 0, no): compile and forward, record nothing. */
const recordsNothing = (header: string | undefined) =>
  header !== undefined && /^(false|0|no|off)$/i.test(header.trim())

const chatCompletions = Effect.gen(function* () {
  const request = yield* HttpServerRequest.HttpServerRequest
  // The body as the contract defines it (`ChatCompletionRequest`): a 400 naming the field otherwise.
  const body: RawBody & ChatCompletionRequest = yield* HttpServerRequest.schemaBodyJson(
    ChatCompletionRequest
  ).pipe(
    Effect.mapError((e) =>
      e._tag === "ParseError"
        ? fromParseError(e)
        : new InvalidRequestBody({ message: "The body is not valid JSON", param: null })
    )
  )
  const client = yield* ModelClient
  const registry = yield* ModelRegistry
  const tokenizer = yield* Tokenizer
  const model = yield* registry.resolve(body.model)
  const sessionId =
    request.headers["x-ctxo-session"] ??
    (typeof body.metadata?.session_id === "string" ? body.metadata.session_id : undefined)
  const idempotencyKey = request.headers["idempotency-key"]
  /** The thinking-map node the new user message is about (session mode): it joins that node's conversation. */
  const node = request.headers["x-ctxo-node"]
  /** A body forwarded as it is (no turn recorded): the upstream's answer, streamed or not. */
  const passOn = (forward: RawBody, headers: Record<string, string>) =>
    body.stream === true
      ? streamed(
          (offer) =>
            client.passthroughStream(forward).pipe(Stream.runForEach((chunk) => offer(passedOn(chunk)))),
          () => headers
        )
      : Effect.map(client.passthrough(forward), (answer) =>
          HttpServerResponse.unsafeJson(answer, { headers })
        )

  if (sessionId === undefined) {
    // Proxy: the client's own messages, fitted to the window.
    const counter = yield* tokenizer.counter(model)
    const fitted = yield* fitMessages({
      messages: body.messages,
      counter,
      limit: inputLimit(model, body),
      model: model.id,
      ...(Array.isArray(body.tools) ? { tools: body.tools as ReadonlyArray<Record<string, unknown>> } : {})
    })
    return yield* passOn(
      { ...body, messages: fitted.messages },
      { "x-ctxo-dropped-turns": String(fitted.dropped) }
    )
  }

  // Session mode: the turn engine records what the client sent as new (its user message, or the
  // results of the tool calls the model made) and compiles the session's context for each step,
  // holding the session's lock until the answer is recorded (streaming included).
  const store = yield* Store
  const engine = yield* TurnEngine
  const config = yield* GatewayConfig
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
  const record = !recordsNothing(request.headers["x-ctxo-record"])

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
    // What the turn engine would send for this input (as the preview shows it), forwarded; nothing
    // is recorded. A dry run of a turn: refused like one when the session is not active.
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
    return yield* passOn(forward, { ...noted, ...compiledHeaders(compiled) })
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
        Effect.map(client.passthrough(forwardOf(compiled)), (answer) => {
          step = { turn: context.turn, compiled }
          raw = answer
          return stepOfCompletion(answer)
        })
    })
    if (outcome._tag === "Answered" && outcome.replayed)
      return HttpServerResponse.unsafeJson(completion(body.model, outcome.text), {
        headers: headersOf(outcome.turn)
      })
    return HttpServerResponse.unsafeJson(raw, { headers: headersOf(outcome.turn) })
  }
  // Streaming: chunks are passed on as they come, while the turn (holding the session's lock) runs;
  // the answer is recorded when the stream ends whole. The status waits for the turn's first chunk.
  let replayedTurn: number | undefined
  return yield* streamed(
    (offer) =>
      runWith<UpstreamError>({
        model: (compiled, context) =>
          Effect.gen(function* () {
            step = { turn: context.turn, compiled }
            const acc = chunkAccumulator()
            yield* client
              .passthroughStream({ ...forwardOf(compiled), stream_options: { include_usage: true } })
              .pipe(
                Stream.runForEach((chunk) =>
                  Effect.zipRight(
                    Effect.sync(() => acc.add(chunk as Chunk)),
                    offer(passedOn(chunk))
                  )
                )
              )
            const { text, toolCalls, usage } = acc.result()
            return { text, toolCalls, ...(usage === undefined ? {} : { usage }) }
          })
      }).pipe(
        Effect.flatMap((outcome) => {
          if (!(outcome._tag === "Answered" && outcome.replayed)) return Effect.void
          replayedTurn = outcome.turn
          return Effect.zipRight(
            offer(
              sse({
                ...completionChunk(body.model),
                choices: [
                  { index: 0, delta: { role: "assistant", content: outcome.text }, finish_reason: null }
                ]
              })
            ),
            offer(
              sse({
                ...completionChunk(body.model),
                choices: [{ index: 0, delta: {}, finish_reason: "stop" }]
              })
            )
          )
        })
      ),
    () => headersOf(replayedTurn)
  )
})

/** A tool message's content as the tool result the turn records (JSON when it parses). */
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

const modelOf = (m: ModelInfo) => ({
  id: m.id,
  object: "model" as const,
  created: 0,
  owned_by: m.provider,
  context_window: m.contextWindow,
  max_input_tokens: m.maxInput,
  max_output_tokens: m.maxOutput,
  aliases: m.aliases
})

/**
 * One model by id (`openai/gpt-4o`), bare name or alias, as the registry resolves them, but never
 * through the fallback model: an unknown one is 404 `model_not_found`, as OpenAI answers it.
 */
const retrieveModel = (id: string) =>
  Effect.gen(function* () {
    const registry = yield* ModelRegistry
    const resolved = yield* registry.resolve(id).pipe(
      Effect.flatMap((m) =>
        m.fallback === undefined
          ? Effect.succeed(m)
          : Effect.fail(new UnknownModel({ model: id, suggestions: [] }))
      ),
      Effect.mapError(toApiError)
    )
    return modelOf(resolved)
  })

export const OpenAILive = HttpApiBuilder.group(Api, "openai", (handlers) =>
  handlers
    .handle("models", () =>
      Effect.map(ModelRegistry, (registry) => ({
        object: "list" as const,
        data: registry.list.map(modelOf)
      }))
    )
    .handle("model", ({ path }) => retrieveModel(path.id))
    .handle("qualifiedModel", ({ path }) => retrieveModel(`${path.provider}/${path.name}`))
    .handle("compile", ({ payload }) =>
      Effect.gen(function* () {
        const config = yield* GatewayConfig
        const manifest = yield* Either.match(
          parseManifest(JSON.stringify(payload.manifest ?? {}), "manifest"),
          {
            onLeft: (e) => Effect.fail(toApiError(e)),
            onRight: Effect.succeed
          }
        )
        const history =
          payload.history === undefined
            ? undefined
            : yield* Either.match(decodeHistoryJson(payload.history, "history"), {
                // One sentence naming the JSON path inside the body's history.
                onLeft: (e) =>
                  Effect.fail(
                    new Unprocessable({
                      tag: "InvalidHistory",
                      message: `history: ${e.reason}`,
                      details: { param: "history" }
                    })
                  ),
                onRight: Effect.succeed
              })
        const workspace = Workspace.layerMemory({
          global: payload.globalFiles ?? {},
          sessions: { stateless: payload.files ?? {} }
        })
        const result = yield* compile({
          sessionId: "stateless",
          manifest,
          defaultModel: config.model,
          ...(history === undefined ? {} : { history }),
          ...(payload.query === undefined ? {} : { query: payload.query }),
          ...(payload.model === undefined ? {} : { model: payload.model }),
          ...(payload.format === undefined ? {} : { format: payload.format })
        }).pipe(Effect.provide(workspace), Effect.mapError(toApiError))
        return toPreview(result)
      })
    )
    .handleRaw("chatCompletions", () =>
      chatCompletions.pipe(
        Effect.catchAll((e) => Effect.succeed(toResponse(e))),
        Effect.catchAllDefect((d) =>
          Effect.as(
            Effect.logError("chat completion failed", d),
            openAIError(500, "The gateway failed on this request", "server_error", null)
          )
        )
      )
    )
)
