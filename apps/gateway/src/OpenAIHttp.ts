/**
 * The OpenAI-compatible endpoints: `/v1/models`, `/v1/compile` (stateless) and
 * `/v1/chat/completions` (session mode and fitting proxy, streaming and not). Errors here use
 * OpenAI's shape, `{ error: { message, type, code, param } }`, so OpenAI clients read them; a
 * request that cannot fit is `context_length_exceeded`, before or after the upstream call.
 */

import { Api } from "@ctxo/api/Api"
import { Unprocessable } from "@ctxo/api/ApiErrors"
import { UnknownModel } from "@ctxo/budget/BudgetErrors"
import { type ModelInfo, ModelRegistry } from "@ctxo/budget/ModelRegistry"
import { compile } from "@ctxo/compiler/Compile"
import { parseManifest } from "@ctxo/compiler/Manifest"
import * as Workspace from "@ctxo/compiler/Workspace"
import { decodeHistoryJson } from "@ctxo/history/HistoryFormat"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Effect, Either, Exit, FiberRef, Option, Stream } from "effect"
import { ChatCompletions } from "./ChatCompletions.ts"
import { toApiError, toPreview } from "./ErrorMapping.ts"
import { GatewayConfig } from "./GatewayConfig.ts"
import * as Metrics from "./Metrics.ts"
import { CurrentTenant } from "./Tenancy.ts"

/**
 * `POST /v1/chat/completions` for every spelling of the route the router takes but the one the
 * gateway's lane serves (`Lane`): the same answer (`ChatCompletions`), written as an HTTP response
 * of the Effect app. The client gone (this fiber interrupted) stops the call or the turn.
 */
const chatCompletions = Effect.gen(function* () {
  const request = yield* HttpServerRequest.HttpServerRequest
  const completions = yield* ChatCompletions
  const stats = (yield* FiberRef.get(Metrics.CurrentRequest)) ?? Metrics.newStats()
  const tenant = yield* FiberRef.get(CurrentTenant)
  const text = yield* Effect.orElseSucceed(request.text, () => "")
  const stops: Array<() => void> = []
  const answer = yield* Effect.promise(() =>
    completions.answer({
      headers: request.headers,
      text,
      tenant,
      stats,
      onGone: (stop) => void stops.push(stop)
    })
  ).pipe(
    Effect.onInterrupt(() =>
      Effect.sync(() => {
        for (const stop of stops) stop()
      })
    )
  )
  if (answer._tag === "Json")
    return HttpServerResponse.text(answer.text, {
      status: answer.status,
      headers: answer.headers,
      contentType: answer.headers["content-type"] ?? "application/json"
    })
  const { "content-type": contentType, ...headers } = answer.headers
  const frames = Stream.concat(
    Stream.succeed(answer.first),
    Stream.repeatEffectOption(
      Effect.flatMap(Effect.promise(answer.next), (frame) =>
        frame === undefined ? Effect.fail(Option.none()) : Effect.succeed(frame)
      )
    )
  ).pipe(Stream.ensuringWith((exit) => Effect.sync(() => Exit.isInterrupted(exit) && answer.cancel())))
  return HttpServerResponse.stream(frames.pipe(Stream.encodeText), {
    headers,
    contentType: contentType ?? "text/event-stream"
  })
})

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
    .handleRaw("chatCompletions", () => chatCompletions)
)
