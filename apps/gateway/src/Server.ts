/**
 * The gateway as layers: the HTTP server on the contract's handlers, with `/openapi.json` and the
 * interactive docs at `/docs`, over the services it wires (store, history, compiler workspace,
 * budget, summarizer, model client), all rooted at the configured data directory.
 *
 * Before a handler runs, the middleware decides on the route the router will match (`Routes`):
 * who may call it (health: anyone; `/admin`: the admin key; the rest: a tenant's key), then the
 * body's edges (`RequestBody`: a JSON content type or 415, the size limit or 413 also for chunked
 * bodies, the nesting limit or 400). Every response carries `x-request-id` (the client's, or a new
 * one); every error response, the framework's included, leaves in one shape (`/api`:
 * `{ "error": { "tag", "message", "details" } }`, `/v1`: OpenAI's) bounded by `boundErrorBody`.
 * Every request is logged once (`Metrics.requestFinished`: route, status, model, session, tokens,
 * the error's reason; a stream when it ended) and counted for `GET /metrics` (the admin key's).
 */
import type { ListenOptions } from "node:net"
import { resolve } from "node:path"
import * as Controller from "@ctxo/agent/Controller"
import * as KnowledgeIndex from "@ctxo/agent/KnowledgeIndex"
import * as Memory from "@ctxo/agent/Memory"
import * as ModelClient from "@ctxo/agent/ModelClient"
import * as SessionEvents from "@ctxo/agent/SessionEvents"
import * as TurnEngine from "@ctxo/agent/TurnEngine"
import * as ModelRegistry from "@ctxo/budget/ModelRegistry"
import * as Tokenizer from "@ctxo/budget/Tokenizer"
import * as Compile from "@ctxo/compiler/Compile"
import * as CompileCache from "@ctxo/compiler/CompileCache"
import * as Summarizer from "@ctxo/history/Summarizer"
import * as Embedder from "@ctxo/retrieval/Embedder"
import * as SessionCache from "@ctxo/store/SessionCache"
import { annotateSpan } from "@ctxo/store/Spans"
import * as FileSystem from "@effect/platform/FileSystem"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpApp from "@effect/platform/HttpApp"
import * as HttpIncomingMessage from "@effect/platform/HttpIncomingMessage"
import * as HttpServer from "@effect/platform/HttpServer"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as NodeHttpServerRequest from "@effect/platform-node/NodeHttpServerRequest"
import { Config, Effect, Layer, Option, Stream } from "effect"
import { authorize, busyRefusal, newRequestId, refusalBody } from "./Admission.ts"
import * as ChatCompletions from "./ChatCompletions.ts"
import * as Docs from "./Docs.ts"
import {
  boundErrorBody,
  clip,
  describeIssues,
  gatewayToOpenAI,
  type Issue,
  MAX_VALUE
} from "./ErrorMapping.ts"
import { GatewayConfig } from "./GatewayConfig.ts"
import { ApiLive } from "./Http.ts"
import * as Lane from "./Lane.ts"
import * as Metrics from "./Metrics.ts"
import * as RequestBody from "./RequestBody.ts"
import * as Routes from "./Routes.ts"
import * as Shutdown from "./Shutdown.ts"
import * as StoreBackend from "./StoreBackend.ts"
import * as Telemetry from "./Telemetry.ts"
import * as Tenancy from "./Tenancy.ts"
import * as TenantServices from "./TenantServices.ts"
import * as Web from "./Web.ts"

const refusalResponse = (route: Routes.Route, refusal: RequestBody.Refusal) =>
  HttpServerResponse.unsafeJson(refusalBody(route, refusal), {
    status: refusal.status,
    ...(refusal.headers === undefined ? {} : { headers: refusal.headers })
  })

const frameworkError = (status: number, request: HttpServerRequest.HttpServerRequest) =>
  status === 404
    ? { tag: "RouteNotFound", message: `No route ${request.method} ${clip(request.url, MAX_VALUE)}` }
    : status === 400
      ? { tag: "InvalidRequest", message: "The request body is not valid JSON" }
      : status === 413
        ? { tag: "PayloadTooLarge", message: "The body is over the size limit" }
        : { tag: "HttpError", message: `HTTP ${status}` }

/**
 * Any error response in the route's shape, bounded: the framework's (an unknown route, a body that
 * does not decode) get the gateway's shape, `/v1` routes get OpenAI's, and no body leaves with an
 * absolute path, a stack, a long submitted value or over 2 KB.
 */
const normalizeError = (
  response: HttpServerResponse.HttpServerResponse,
  request: HttpServerRequest.HttpServerRequest,
  route: Routes.Route,
  roots: ReadonlyArray<string>
) => {
  if (response.status < 400) return response
  const body = response.body
  let error: Record<string, unknown>
  if (body._tag === "Empty") error = frameworkError(response.status, request)
  else if (body._tag === "Uint8Array") {
    let parsed: Record<string, unknown>
    try {
      parsed = JSON.parse(new TextDecoder().decode(body.body)) as Record<string, unknown>
    } catch {
      return response
    }
    if (typeof parsed !== "object" || parsed === null) return response
    if (typeof parsed.error === "object" && parsed.error !== null)
      error = parsed.error as Record<string, unknown>
    else if (parsed._tag === "HttpApiDecodeError") {
      // The contract's decoding of a path, query, header or body: one sentence naming the field.
      const { message, param } = describeIssues((parsed.issues ?? []) as ReadonlyArray<Issue>)
      error = { tag: "InvalidRequest", message, details: { param } }
    } else if (typeof parsed._tag === "string") {
      const { _tag, message, ...details } = parsed
      error = { tag: _tag, message: typeof message === "string" ? message : _tag, details }
    } else return response
  } else return response
  // `/v1` speaks OpenAI's shape; an error already in it (it has `type`) stays as it is.
  const shaped =
    route.openAI && typeof error.tag === "string" && error.type === undefined
      ? gatewayToOpenAI(response.status, error)
      : { error }
  return HttpServerResponse.unsafeJson(boundErrorBody(shaped, roots)).pipe(
    HttpServerResponse.setStatus(response.status),
    HttpServerResponse.setHeaders(response.headers)
  )
}

/** `/metrics` is for the admin key, like `/admin/*` (open when no keys are configured). */
const metricsForAdmin = (route: Routes.Route): Routes.Route =>
  route.group === "metrics" ? { ...route, audience: "admin" } : route

/** An error response's reason for the access log: `/api`'s tag, `/v1`'s code or type. */
const errorReason = (response: HttpServerResponse.HttpServerResponse) =>
  response.body._tag === "Uint8Array"
    ? Metrics.reasonOf(parsedOrUndefined(new TextDecoder().decode(response.body.body)))
    : undefined

const parsedOrUndefined = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

/**
 * The request with its body already read: handlers decode `text`, never the socket again. A proxy,
 * so whatever the server marks on the request (that it was answered) lands on the request itself.
 */
const withBody = (
  request: HttpServerRequest.HttpServerRequest,
  bytes: Uint8Array,
  text: string
): HttpServerRequest.HttpServerRequest => {
  // Any JSON media type (`application/vnd.x+json`) is decoded as JSON by the handlers.
  const headers = { ...request.headers, "content-type": "application/json" }
  const overrides: Record<PropertyKey, () => unknown> = {
    headers: () => headers,
    text: () => Effect.succeed(text),
    arrayBuffer: () =>
      Effect.succeed(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength)),
    stream: () => Stream.succeed(bytes)
  }
  return new Proxy(request, {
    get: (target, property, receiver) =>
      Object.hasOwn(overrides, property) ? overrides[property]!() : Reflect.get(target, property, receiver)
  })
}

export const middleware =
  (settings: { readonly maxBodyBytes: number; readonly dataRoot: string }, access: Tenancy.Access) =>
  <E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<E, R> =>
    Effect.gen(function* () {
      const { maxBodyBytes } = settings
      const request = yield* HttpServerRequest.HttpServerRequest
      const id = request.headers["x-request-id"] ?? newRequestId()
      // The request's own span (the HTTP server's) carries its id, like every span under it.
      yield* annotateSpan({ [Telemetry.REQUEST_ID]: id })
      const route = metricsForAdmin(Routes.routeOf(request.method, request.url))
      const roots = [settings.dataRoot]
      // The access log's facts: the route's template, the session it names, and what the handler
      // and the model client add (model, tokens, upstream status) through `Metrics.CurrentRequest`.
      const stats = Metrics.newStats(id)
      const matched = Metrics.routeOf(request.method, request.url)
      stats.session = Metrics.sessionOf(matched.params, request.headers, undefined)
      let requestModel: string | undefined
      let tenantOfRequest: string | undefined
      // Applied to whatever response goes out: the handlers' and the framework's (as a pre-response
      // handler) and this middleware's own refusals (`refuse`), once.
      const started = Date.now()
      let finished: HttpServerResponse.HttpServerResponse | undefined
      const finish = (
        req: HttpServerRequest.HttpServerRequest,
        response: HttpServerResponse.HttpServerResponse
      ): Effect.Effect<HttpServerResponse.HttpServerResponse> => {
        // A refusal (`refuse`) passes here twice: as the middleware's answer and as the response.
        if (finished !== undefined) return Effect.succeed(response)
        const out = normalizeError(response, req, route, roots).pipe(
          HttpServerResponse.setHeader("x-request-id", id)
        )
        finished = out
        if (out.status >= 400) stats.error ??= errorReason(out) ?? `HTTP ${out.status}`
        stats.model ??= requestModel
        const logged = () =>
          Metrics.requestFinished({
            method: req.method,
            url: req.url,
            route: matched.route,
            status: out.status,
            requestId: id,
            tenant: tenantOfRequest,
            durationMs: Date.now() - started,
            stats
          })
        // A stream is logged when it ends (completes, fails or the client leaves), with its duration.
        if (out.body._tag === "Stream") {
          stats.stream = true
          const body = out.body
          const decoder = new TextDecoder()
          const measured = Stream.unwrapScoped(
            Effect.as(
              Effect.locallyScoped(Metrics.CurrentRequest, stats),
              body.stream.pipe(
                Stream.tap((chunk) =>
                  Effect.sync(() => {
                    const reason = Metrics.streamErrorOf(decoder.decode(chunk, { stream: true }))
                    if (reason !== undefined) stats.error ??= reason
                  })
                )
              )
            )
          ).pipe(Stream.ensuring(Effect.suspend(logged)))
          finished = HttpServerResponse.stream(measured, {
            status: out.status,
            headers: out.headers,
            cookies: out.cookies,
            contentType: body.contentType,
            ...(body.contentLength === undefined ? {} : { contentLength: body.contentLength })
          })
          return Effect.succeed(finished)
        }
        return Effect.as(logged(), out)
      }
      const refuse = (refusal: RequestBody.Refusal) => finish(request, refusalResponse(route, refusal))
      yield* HttpApp.appendPreResponseHandler(finish)
      const declared = RequestBody.declaredRefusal(request.headers, maxBodyBytes)
      if (declared !== undefined) return yield* refuse(declared)
      // Who is asking, decided on the route the router will match, never on the raw path.
      const caller = authorize(request.headers, route, access)
      if ("refused" in caller) return yield* refuse(caller.refused)
      const { tenant, admin } = caller
      tenantOfRequest = tenant
      // A body is JSON or nothing: a cross-site form (text/plain, multipart) cannot post.
      let served = request
      const source = NodeHttpServerRequest.toIncomingMessage(request)
      if (RequestBody.hasBody(request.headers) && typeof source?.on === "function") {
        const read = yield* Effect.promise(() => RequestBody.readJsonBody(source, maxBodyBytes))
        if ("status" in read) return yield* refuse(read)
        served = withBody(request, read.bytes, read.text)
        // The model and session a chat body names, for the access log (the handler decodes it).
        if (matched.route.includes("chat")) {
          const parsed = parsedOrUndefined(read.text)
          requestModel = Metrics.requestModelOf(parsed)
          stats.session ??= Metrics.sessionOf({}, {}, parsed)
        }
      }
      // A tenant's requests in flight, up to its limit (with keys: one gateway, many tenants).
      const busy = access.admit(tenant)
      if (busy !== undefined) return yield* refuse(busyRefusal(tenant, busy, access))
      return yield* app.pipe(
        HttpIncomingMessage.withMaxBodySize(Option.some(FileSystem.Size(maxBodyBytes))),
        Effect.provideService(HttpServerRequest.HttpServerRequest, served),
        Effect.locally(Tenancy.CurrentTenant, tenant),
        Effect.locally(Tenancy.CallerIsAdmin, admin),
        Effect.locally(Metrics.CurrentRequest, stats),
        Effect.annotateLogs({ requestId: id, tenant }),
        // Every span of the request carries its id (the request's own span too).
        Effect.annotateSpans(Telemetry.REQUEST_ID, id),
        Effect.ensuring(Effect.sync(() => access.release(tenant)))
      )
    })

/**
 * The services behind the handlers, rooted at the data directory: the turn engine over the given
 * compiler and compactor, the session controller and its event bus.
 */
export const servicesWith = (seams: Layer.Layer<TurnEngine.ContextCompiler | TurnEngine.HistoryCompactor>) =>
  Layer.unwrapEffect(
    Effect.gen(function* () {
      const config = yield* GatewayConfig
      const summarizer = Option.isSome(config.upstreamApiKey)
        ? Summarizer.layerOpenAIConfig
        : Summarizer.layerDeterministic
      const base = Layer.mergeAll(
        // One session cache for the process: every tenant's stores and the engine keep sessions in it.
        Layer.provideMerge(
          TenantServices.layer,
          SessionCache.layer(
            config.sessionCacheBytes === undefined ? {} : { maxBytes: config.sessionCacheBytes }
          )
        ),
        ModelRegistry.layerConfig([]),
        Tokenizer.layer(),
        // One compile cache for the process: its entries answer by content, so tenants share it.
        CompileCache.layer,
        Layer.succeed(
          Compile.CompileDefaults,
          config.budgetShares === undefined ? {} : { shares: config.budgetShares }
        ),
        summarizer,
        ModelClient.layer({
          apiKey: config.upstreamApiKey,
          baseUrl: config.upstreamBaseUrl,
          ...(config.upstreams === undefined ? {} : { upstreams: config.upstreams }),
          localModel: {
            ...(config.localModelPort === undefined ? {} : { port: config.localModelPort }),
            ...(config.localModelScript === undefined ? {} : { script: config.localModelScript })
          },
          timeoutMs: config.upstreamTimeoutMs,
          firstByteMs: config.upstreamFirstByteMs,
          idleMs: config.upstreamIdleMs
        })
      ).pipe(Layer.provide(NodeContext.layer))
      // Memory levels over the request's tenant store; their lifetimes from the config.
      const memory = Memory.layer({
        ...Memory.defaultSettings,
        ...(config.memory === undefined ? {} : { ttl: config.memory.ttl })
      })
      const access = yield* Tenancy.Tenancy
      const tenants = access.enabled ? access.tenants : [Tenancy.DEFAULT_TENANT]
      const tenantOfScope = (scope: string) => tenants.find((t) => access.rootOf(t) === scope)
      // The bus's memory subscriber (a session that ends is persisted to L4) runs each event
      // against the store of the event's tenant; the timer asks every tenant's root to persist.
      const persistence = Layer.scopedDiscard(
        Effect.gen(function* () {
          yield* Memory.persistOnEvents((scope, effect) => {
            const tenant = tenantOfScope(scope)
            return tenant === undefined
              ? Effect.dieMessage(`memory: no tenant has the data root ${scope}`)
              : Effect.locally(effect, Tenancy.CurrentTenant, tenant)
          })
          const every = config.memory?.persistMs ?? 600_000
          if (every > 0) yield* Memory.persistTimer(Effect.succeed(tenants.map(access.rootOf)), every)
        })
      )
      // One event bus for the process (its subscribers see every tenant's sessions, told apart by
      // each event's `scope`); the controller publishes on it.
      // Each data root's knowledge index (hybrid with embeddings when CTXO_EMBEDDING_MODEL is set).
      const embedding = yield* Config.option(Config.string("CTXO_EMBEDDING_MODEL"))
      const knowledge = Option.isNone(embedding)
        ? KnowledgeIndex.layer()
        : Layer.unwrapEffect(
            Effect.map(Embedder.Embedder, (embedder) => KnowledgeIndex.layer({ embedder }))
          ).pipe(Layer.provide(Embedder.layerOpenAIConfig))
      return Layer.provideMerge(
        Layer.mergeAll(TurnEngine.layer, Controller.layer, persistence),
        Layer.provideMerge(Layer.merge(memory, knowledge), Layer.mergeAll(base, seams, SessionEvents.layer))
      )
    })
  ).pipe(Layer.orDie)

export const services = servicesWith(TurnEngine.seamsLive)

/**
 * The HTTP app (routes, docs, OpenAPI, and the lane for chat completions when the server has a
 * slot for it) over the services, with the turn engine's compiler and compactor given (the eval
 * gate passes broken ones); no server yet (`server`, `ServerTest.layerTest`).
 */
export const appWith = (seams: Layer.Layer<TurnEngine.ContextCompiler | TurnEngine.HistoryCompactor>) =>
  Layer.unwrapEffect(
    Effect.gen(function* () {
      const config = yield* GatewayConfig
      const access = yield* Tenancy.Tenancy
      const routes = HttpApiBuilder.serve(
        middleware({ maxBodyBytes: config.maxBodyBytes, dataRoot: resolve(config.dataDir) }, access)
      ).pipe(
        Layer.provide(Docs.layer),
        Layer.provide(Web.layerAt(config.webDir ?? Web.defaultWebDir)),
        Layer.provide(ApiLive)
      )
      return Layer.merge(routes, Lane.layer).pipe(
        // The model client measured: tokens by model and upstream errors, in /metrics and the access log.
        Layer.provide(
          Layer.provideMerge(
            ChatCompletions.layer,
            Metrics.instrumentServices(Telemetry.traceServices(servicesWith(seams)))
          )
        ),
        Layer.provide(Shutdown.layer),
        HttpServer.withLogAddress
      )
    })
  ).pipe(Layer.provide(Tenancy.layer))

/** The HTTP app with the live compiler and compactor. */
export const app = appWith(TurnEngine.seamsLive)

/** The HTTP server on `options`, its requests offered to the app's lane first (`Lane`). */
export const listening = (options: ListenOptions) =>
  Layer.unwrapEffect(
    Effect.sync(() => {
      const slot = Lane.emptySlot()
      return Layer.merge(
        Layer.succeed(Lane.LaneSlot, slot),
        NodeHttpServer.layer(() => Lane.laneServer(slot), options)
      )
    })
  )

/**
 * The gateway listening on HOST:PORT, its tenants' stores from the configured backend (the data
 * folder, or PostgreSQL, migrated and seeded before the port opens, so no request waits on it).
 */
export const server = Layer.unwrapEffect(
  Effect.map(GatewayConfig, (config) =>
    app.pipe(Layer.provide(listening({ port: config.port, host: config.host })))
  )
).pipe(Layer.provide(StoreBackend.layer))
