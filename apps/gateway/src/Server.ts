/**
 * The gateway as layers: the HTTP server on the contract's handlers, with `/openapi.json` and the
 * interactive docs at `/docs`, over the services it wires (store, history, compiler workspace,
 * budget, summarizer, model client), all rooted at the configured data directory.
 *
 * Every response carries `x-request-id` (the client's, or a new one); errors the framework raises
 * (an invalid body, an unknown route, a body over the limit) get the same JSON shape as the
 * handlers' errors: `{ "error": { "tag", "message", "details" } }`.
 */
import { createServer } from "node:http"
import * as ModelClient from "@ctxo/agent/ModelClient"
import * as ModelRegistry from "@ctxo/budget/ModelRegistry"
import * as Tokenizer from "@ctxo/budget/Tokenizer"
import * as Summarizer from "@ctxo/history/Summarizer"
import * as FileSystem from "@effect/platform/FileSystem"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpApiScalar from "@effect/platform/HttpApiScalar"
import * as HttpApp from "@effect/platform/HttpApp"
import * as HttpIncomingMessage from "@effect/platform/HttpIncomingMessage"
import * as HttpServer from "@effect/platform/HttpServer"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { Effect, Layer, Option } from "effect"
import { GatewayConfig } from "./GatewayConfig.ts"
import { ApiLive } from "./Http.ts"
import * as Shutdown from "./Shutdown.ts"
import * as Tenancy from "./Tenancy.ts"
import * as TenantServices from "./TenantServices.ts"

let requestCounter = 0
const newRequestId = () => `req-${Date.now().toString(36)}-${(requestCounter++).toString(36)}`

const errorBody = (tag: string, message: string, details?: unknown) =>
  HttpServerResponse.unsafeJson({ error: { tag, message, ...(details === undefined ? {} : { details }) } })

/** Framework errors in the gateway's error shape (handler errors already have it). */
const normalizeError = (
  response: HttpServerResponse.HttpServerResponse,
  request: HttpServerRequest.HttpServerRequest
) => {
  if (response.status < 400) return response
  const body = response.body
  if (body._tag === "Empty") {
    const [tag, message] =
      response.status === 404
        ? ["RouteNotFound", `No route ${request.method} ${request.url}`]
        : response.status === 400
          ? ["InvalidRequest", "The request body is not valid JSON"]
          : ["HttpError", `HTTP ${response.status}`]
    return errorBody(tag, message).pipe(
      HttpServerResponse.setStatus(response.status),
      HttpServerResponse.setHeaders(response.headers)
    )
  }
  if (body._tag !== "Uint8Array") return response
  let parsed: Record<string, unknown>
  try {
    parsed = JSON.parse(new TextDecoder().decode(body.body)) as Record<string, unknown>
  } catch {
    return response
  }
  if ("error" in parsed || typeof parsed._tag !== "string") return response
  const { _tag, message, ...details } = parsed
  const tag = _tag === "HttpApiDecodeError" ? "InvalidRequest" : _tag
  return errorBody(tag, typeof message === "string" ? message : String(_tag), details).pipe(
    HttpServerResponse.setStatus(response.status),
    HttpServerResponse.setHeaders(response.headers)
  )
}

const inFlight = new Map<string, number>()

/** The caller's key: `Authorization: Bearer <key>` (what OpenAI clients send) or `x-api-key`. */
const keyOf = (request: HttpServerRequest.HttpServerRequest) =>
  /^Bearer\s+(.+)$/i.exec(request.headers.authorization ?? "")?.[1]?.trim() ?? request.headers["x-api-key"]

export const middleware =
  (maxBodyBytes: number, access: Tenancy.Access) =>
  <E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<E, R> =>
    Effect.gen(function* () {
      const request = yield* HttpServerRequest.HttpServerRequest
      const id = request.headers["x-request-id"] ?? newRequestId()
      // Applied to whatever response goes out, the handlers' and the framework's alike.
      const started = Date.now()
      yield* HttpApp.appendPreResponseHandler((req, response) => {
        const out = normalizeError(response, req).pipe(HttpServerResponse.setHeader("x-request-id", id))
        return Effect.as(
          Effect.logInfo(`${req.method} ${req.url} ${out.status}`).pipe(
            Effect.annotateLogs({ requestId: id, status: out.status, durationMs: Date.now() - started })
          ),
          out
        )
      })
      // A declared length over the limit is refused before the body is read (Node discards the
      // rest); a chunked body is cut at the limit while it is read.
      if (Number(request.headers["content-length"] ?? 0) > maxBodyBytes)
        return errorBody(
          "PayloadTooLarge",
          `The body is over the limit of ${maxBodyBytes} bytes (CTXO_MAX_BODY_BYTES)`
        ).pipe(HttpServerResponse.setStatus(413))
      // Who is asking: with keys configured, every endpoint but health needs one.
      let tenant = Tenancy.DEFAULT_TENANT
      const path = request.url.split("?")[0] ?? ""
      if (access.enabled && path !== "/healthz" && path !== "/readyz") {
        const key = keyOf(request)
        const admin = key !== undefined && access.isAdmin(key)
        const keyTenant = key === undefined ? Option.none() : access.tenantOf(key)
        if (path.startsWith("/admin/")) {
          if (!admin)
            return Option.isSome(keyTenant)
              ? errorBody("Forbidden", "This key has no right to the management endpoints").pipe(
                  HttpServerResponse.setStatus(403)
                )
              : errorBody("Unauthorized", "A valid admin key is required (Authorization: Bearer <key>)").pipe(
                  HttpServerResponse.setStatus(401)
                )
        } else if (Option.isNone(keyTenant)) {
          return admin
            ? errorBody("Forbidden", "The admin key manages tenants; it reads no tenant's data").pipe(
                HttpServerResponse.setStatus(403)
              )
            : errorBody(
                "Unauthorized",
                key === undefined
                  ? "An API key is required (Authorization: Bearer <key>)"
                  : "The API key is not valid"
              ).pipe(HttpServerResponse.setStatus(401))
        } else tenant = keyTenant.value
      }
      // A tenant's requests in flight, up to its limit (with keys: one gateway, many tenants).
      const busy = inFlight.get(tenant) ?? 0
      if (access.enabled && busy >= access.maxConcurrent)
        return errorBody(
          "TooManyRequests",
          `Tenant ${tenant} has ${busy} requests in flight (limit ${access.maxConcurrent})`
        ).pipe(HttpServerResponse.setStatus(429), HttpServerResponse.setHeader("retry-after", "1"))
      inFlight.set(tenant, busy + 1)
      return yield* app.pipe(
        HttpIncomingMessage.withMaxBodySize(Option.some(FileSystem.Size(maxBodyBytes))),
        Effect.locally(Tenancy.CurrentTenant, tenant),
        Effect.annotateLogs({ requestId: id, tenant }),
        Effect.ensuring(Effect.sync(() => inFlight.set(tenant, (inFlight.get(tenant) ?? 1) - 1)))
      )
    })

/** The services behind the handlers, rooted at the data directory. */
export const services = Layer.unwrapEffect(
  Effect.gen(function* () {
    const config = yield* GatewayConfig
    const summarizer = Option.isSome(config.upstreamApiKey)
      ? Summarizer.layerOpenAIConfig
      : Summarizer.layerDeterministic
    return Layer.mergeAll(
      TenantServices.layer,
      ModelRegistry.layerConfig([]),
      Tokenizer.layer(),
      summarizer,
      ModelClient.layer({
        apiKey: config.upstreamApiKey,
        baseUrl: config.upstreamBaseUrl,
        timeoutMs: config.upstreamTimeoutMs
      })
    ).pipe(Layer.provide(NodeContext.layer))
  })
).pipe(Layer.orDie)

/** The HTTP app (routes, docs, OpenAPI) over the services; no server yet (tests add one). */
export const app = Layer.unwrapEffect(
  Effect.gen(function* () {
    const config = yield* GatewayConfig
    const access = yield* Tenancy.Tenancy
    return HttpApiBuilder.serve(middleware(config.maxBodyBytes, access)).pipe(
      Layer.provide(HttpApiScalar.layer({ path: "/docs" })),
      Layer.provide(HttpApiBuilder.middlewareOpenApi({ path: "/openapi.json" })),
      Layer.provide(ApiLive),
      Layer.provide(services),
      Layer.provide(Shutdown.layer),
      HttpServer.withLogAddress
    )
  })
).pipe(Layer.provide(Tenancy.layer))

/** The gateway listening on HOST:PORT. */
export const server = Layer.unwrapEffect(
  Effect.map(GatewayConfig, (config) =>
    app.pipe(Layer.provide(NodeHttpServer.layer(createServer, { port: config.port, host: config.host })))
  )
)
