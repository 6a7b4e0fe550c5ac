/**
 * The OpenAI-compatible endpoints: `/v1/models`, `/v1/compile` (stateless) and
 * `/v1/chat/completions` (session mode and fitting proxy, streaming and not). Errors here use
 * OpenAI's shape, `{ error: { message, type, code, param } }`, so OpenAI clients read them; a
 * request that cannot fit is `context_length_exceeded`, before or after the upstream call.
 */

import { observeUsage, withSessionTurn } from "@ctxo/agent/Agent"
import {
  fitMessages,
  InvalidCompletionRequest,
  inputLimit,
  prepareSessionRequest,
  recordAnswer
} from "@ctxo/agent/Completions"
import {
  type Chunk,
  chunkAccumulator,
  ModelClient,
  type RawBody,
  type UpstreamError
} from "@ctxo/agent/ModelClient"
import { Api } from "@ctxo/api/Api"
import { Unprocessable } from "@ctxo/api/ApiErrors"
import { ModelRegistry } from "@ctxo/budget/ModelRegistry"
import { Tokenizer } from "@ctxo/budget/Tokenizer"
import { compile } from "@ctxo/compiler/Compile"
import { parseManifest } from "@ctxo/compiler/Manifest"
import * as Workspace from "@ctxo/compiler/Workspace"
import { HistoryDocument } from "@ctxo/history/Message"
import { Store } from "@ctxo/store/Store"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Effect, Either, FiberRef, Schema, Stream } from "effect"
import { toApiError, toPreview } from "./ErrorMapping.ts"
import { GatewayConfig } from "./GatewayConfig.ts"
import { CurrentTenant } from "./Tenancy.ts"

const openAIError = (
  status: number,
  message: string,
  type: string,
  code: string | null,
  extra?: Record<string, unknown>
) => HttpServerResponse.unsafeJson({ error: { message, type, code, param: null, ...extra } }, { status })

/** A failure as OpenAI clients expect it. */
const toResponse = (e: { readonly _tag: string; readonly message: string }) => {
  switch (e._tag) {
    case "ContextTooLong":
      return openAIError(400, e.message, "invalid_request_error", "context_length_exceeded")
    case "BudgetExceeded":
      return openAIError(400, e.message, "invalid_request_error", "context_length_exceeded", {
        report: (e as unknown as { report: unknown }).report
      })
    case "UpstreamError": {
      const u = e as UpstreamError
      // The upstream's own overflow keeps its meaning; other failures are the gateway's (502/504).
      if (u.code === "context_length_exceeded")
        return openAIError(400, u.reason, "invalid_request_error", u.code)
      if (u.status !== undefined && u.status < 500)
        return openAIError(u.status, u.reason, "upstream_error", u.code ?? null)
      return openAIError(
        /timed? ?out|no data/i.test(u.reason) ? 504 : 502,
        u.message,
        "upstream_error",
        u.code ?? null
      )
    }
    case "SessionNotFound":
      return openAIError(404, e.message, "invalid_request_error", "session_not_found")
    case "InvalidCompletionRequest":
    case "UnknownModel":
    case "PathRefused":
    case "InvalidSessionId":
      return openAIError(400, e.message, "invalid_request_error", e._tag)
    default:
      return openAIError(500, e.message, "server_error", e._tag)
  }
}

const sse = (data: unknown) => `data: ${JSON.stringify(data)}\n\n`

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

const chatCompletions = Effect.gen(function* () {
  const request = yield* HttpServerRequest.HttpServerRequest
  const raw = yield* request.json.pipe(
    Effect.mapError(() => new InvalidCompletionRequest({ reason: "the body is not JSON" }))
  )
  const body = raw as RawBody & { readonly metadata?: Record<string, unknown>; readonly stream?: boolean }
  if (
    typeof body !== "object" ||
    body === null ||
    typeof body.model !== "string" ||
    !Array.isArray(body.messages)
  )
    return yield* new InvalidCompletionRequest({ reason: "a chat completion needs model and messages" })
  const client = yield* ModelClient
  const registry = yield* ModelRegistry
  const tokenizer = yield* Tokenizer
  const model = yield* registry.resolve(body.model)
  const tenant = yield* FiberRef.get(CurrentTenant)
  const sessionId =
    request.headers["x-ctxo-session"] ??
    (typeof body.metadata?.session_id === "string" ? body.metadata.session_id : undefined)
  const idempotencyKey = request.headers["idempotency-key"]

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
    const forward: RawBody = { ...body, messages: fitted.messages }
    if (body.stream === true)
      return HttpServerResponse.stream(
        Stream.concat(
          client.passthroughStream(forward).pipe(Stream.map(sse)),
          Stream.succeed("data: [DONE]\n\n")
        ).pipe(
          Stream.catchAll((e) =>
            Stream.succeed(
              sse({ error: { message: e.message, type: "upstream_error", code: e.code ?? null } })
            )
          ),
          Stream.encodeText
        ),
        { contentType: "text/event-stream", headers: { "x-ctxo-dropped-turns": String(fitted.dropped) } }
      )
    const answer = yield* client.passthrough(forward)
    return HttpServerResponse.unsafeJson(answer).pipe(
      HttpServerResponse.setHeader("x-ctxo-dropped-turns", String(fitted.dropped))
    )
  }

  const store = yield* Store
  yield* store.getSession(sessionId)
  if (body.stream !== true) {
    return yield* withSessionTurn(
      sessionId,
      Effect.gen(function* () {
        const prepared = yield* prepareSessionRequest({
          sessionId,
          body,
          ...(idempotencyKey ? { idempotencyKey } : {})
        })
        if ("answered" in prepared)
          return HttpServerResponse.unsafeJson(completion(body.model, prepared.answered))
        const answer = (yield* client.passthrough(prepared.forward)) as {
          choices: Array<{
            message: {
              content: string | null
              tool_calls?: Array<{ id: string; function: { name: string; arguments: string } }>
            }
          }>
          usage?: { prompt_tokens: number; completion_tokens: number }
        }
        const message = answer.choices[0]?.message
        yield* recordAnswer({
          sessionId,
          turn: prepared.turn,
          content: message?.content ?? null,
          toolCalls: (message?.tool_calls ?? []).map((c) => ({
            id: c.id,
            name: c.function.name,
            arguments: c.function.arguments
          }))
        })
        if (answer.usage)
          observeUsage(sessionId, answer.usage.prompt_tokens + answer.usage.completion_tokens, tenant)
        return HttpServerResponse.unsafeJson(answer)
      }),
      tenant
    )
  }
  // Streaming: chunks are passed on as they come; the answer is recorded when the stream ends whole.
  const prepared = yield* withSessionTurn(
    sessionId,
    prepareSessionRequest({ sessionId, body, ...(idempotencyKey ? { idempotencyKey } : {}) }),
    tenant
  )
  if ("answered" in prepared)
    return HttpServerResponse.stream(
      Stream.make(
        sse({
          ...completionChunk(body.model),
          choices: [
            { index: 0, delta: { role: "assistant", content: prepared.answered }, finish_reason: null }
          ]
        }),
        sse({ ...completionChunk(body.model), choices: [{ index: 0, delta: {}, finish_reason: "stop" }] }),
        "data: [DONE]\n\n"
      ).pipe(Stream.encodeText),
      { contentType: "text/event-stream" }
    )
  const acc = chunkAccumulator()
  const context = yield* Effect.context<Effect.Effect.Context<ReturnType<typeof recordAnswer>>>()
  const chunks = client
    .passthroughStream({ ...prepared.forward, stream_options: { include_usage: true } })
    .pipe(
      Stream.tap((chunk) => Effect.sync(() => acc.add(chunk as Chunk))),
      Stream.map(sse),
      Stream.concat(
        Stream.fromEffect(
          Effect.gen(function* () {
            const { text, toolCalls: calls, usage } = acc.result()
            yield* withSessionTurn(
              sessionId,
              recordAnswer({
                sessionId,
                turn: prepared.turn,
                content: text === "" ? null : text,
                toolCalls: calls
              }),
              tenant
            )
            if (usage !== undefined) observeUsage(sessionId, usage.inputTokens + usage.outputTokens, tenant)
            return "data: [DONE]\n\n"
          }).pipe(Effect.provide(context))
        )
      ),
      Stream.catchAll((e) =>
        Stream.succeed(
          sse({
            error: { message: e.message, type: "upstream_error", code: "code" in e ? (e.code ?? null) : null }
          })
        )
      ),
      Stream.encodeText
    )
  return HttpServerResponse.stream(chunks, {
    contentType: "text/event-stream",
    headers: { "cache-control": "no-cache" }
  })
})

export const OpenAILive = HttpApiBuilder.group(Api, "openai", (handlers) =>
  handlers
    .handle("models", () =>
      Effect.map(ModelRegistry, (registry) => ({
        object: "list" as const,
        data: registry.list.map((m) => ({
          id: m.id,
          object: "model" as const,
          created: 0,
          owned_by: m.provider,
          context_window: m.contextWindow,
          max_input_tokens: m.maxInput,
          max_output_tokens: m.maxOutput,
          aliases: m.aliases
        }))
      }))
    )
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
            : yield* Schema.decodeUnknown(HistoryDocument)(payload.history).pipe(
                Effect.mapError(
                  (e) => new Unprocessable({ tag: "InvalidHistory", message: `history: ${e.message}` })
                )
              )
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
        Effect.catchAll((e) => Effect.succeed(toResponse(e as { _tag: string; message: string }))),
        Effect.catchAllDefect((d) => Effect.succeed(openAIError(500, String(d), "server_error", null)))
      )
    )
)
