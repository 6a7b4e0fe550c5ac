/**
 * Traces and metrics through OpenTelemetry (`@effect/opentelemetry`): when
 * `OTEL_EXPORTER_OTLP_ENDPOINT` is set, the spans of every request (the HTTP request, a turn's
 * stages: decode, the session's lock, compaction, each compile stage, the upstream call, each
 * recorded step) go to `<endpoint>/v1/traces` and the gateway's metrics (the same as `GET /metrics`)
 * to `<endpoint>/v1/metrics`, both over OTLP/HTTP; when it is not set nothing is exported, no
 * exporter is made and the tracer is off (no span is made). Every span carries `ctxo.request_id` (the request's `x-request-id`), as every
 * log line of a request carries `requestId`.
 *
 * | variable | default | what |
 * |---|---|---|
 * | OTEL_EXPORTER_OTLP_ENDPOINT | (none: no export) | the collector's base URL, e.g. http://127.0.0.1:4318 |
 * | OTEL_SERVICE_NAME | ctxo-gateway | the service the spans and metrics are of |
 * | OTEL_METRIC_EXPORT_INTERVAL | 60000 | milliseconds between two metric exports |
 */

import { type Service as ModelClientService, wrapClient } from "@ctxo/agent/ModelClient"
import { annotateSpan, tracing, withSpan } from "@ctxo/store/Spans"
import { Config, Effect, Layer, Option, Stream } from "effect"
import type { OtelOptions } from "./internal/Otel.ts"

/** The attribute every span of a request carries: its `x-request-id`. */
export const REQUEST_ID = "ctxo.request_id"

/**
 * Spans to `processors` and (when given) the metrics to `readers`. The OpenTelemetry SDK and
 * `@effect/opentelemetry` (`internal/Otel.ts`) are loaded when this layer is built, so a gateway
 * without a collector does not parse them at start.
 */
export const layerWith = (options: OtelOptions): Layer.Layer<never> =>
  Layer.unwrapEffect(
    Effect.promise(() => import("./internal/Otel.ts")).pipe(Effect.map((otel) => otel.layerWith(options)))
  )

/** What `OTEL_EXPORTER_OTLP_ENDPOINT` asks for: OTLP/HTTP exporters, or nothing. */
export const layer: Layer.Layer<never, never> = Layer.unwrapEffect(
  Effect.gen(function* () {
    const endpoint = yield* Config.option(Config.string("OTEL_EXPORTER_OTLP_ENDPOINT"))
    const interval = yield* Config.integer("OTEL_METRIC_EXPORT_INTERVAL").pipe(Config.withDefault(60_000))
    // No collector: no span is made at all (Effect's own tracer would still make each one).
    if (Option.isNone(endpoint) || endpoint.value.trim() === "") return Layer.setTracerEnabled(false)
    const otel = yield* Effect.promise(() => import("./internal/Otel.ts"))
    return otel.layerWith(otel.exportersTo(endpoint.value.trim().replace(/\/+$/, ""), interval))
  }).pipe(Effect.orDie)
)

const usageOf = (value: unknown) => {
  const usage = (value as { readonly usage?: { prompt_tokens?: unknown; completion_tokens?: unknown } })
    ?.usage
  return typeof usage?.prompt_tokens === "number" && typeof usage.completion_tokens === "number"
    ? { "ctxo.tokens.in": usage.prompt_tokens, "ctxo.tokens.out": usage.completion_tokens }
    : undefined
}

/** `stream` as it is when tracing is off; else as `traced` makes it. */
const whenTracing = <A, E, R>(
  stream: Stream.Stream<A, E, R>,
  traced: (s: Stream.Stream<A, E, R>) => Stream.Stream<A, E, R>
) => Stream.unwrap(Effect.map(tracing, (on) => (on ? traced(stream) : stream)))

/**
 * The model client with each upstream call a span: the model, and the tokens the upstream reported.
 * When tracing is off, the calls go straight to the client.
 */
export const traceClient = (client: ModelClientService): ModelClientService => ({
  ...client,
  complete: (request) =>
    whenTracing(client.complete(request), (stream) =>
      stream.pipe(
        Stream.tap((event) =>
          event._tag === "Done" && event.usage !== undefined
            ? annotateSpan({
                "ctxo.tokens.in": event.usage.inputTokens,
                "ctxo.tokens.out": event.usage.outputTokens
              })
            : Effect.void
        ),
        Stream.withSpan("ModelClient.complete", {
          kind: "client",
          attributes: { "ctxo.model": request.model, "ctxo.upstream": client.upstream },
          captureStackTrace: false
        })
      )
    ),
  passthrough: (body) =>
    client.passthrough(body).pipe(
      Effect.tap((answer) => {
        const usage = usageOf(answer)
        return usage === undefined ? Effect.void : annotateSpan(usage)
      }),
      withSpan("ModelClient.passthrough", {
        kind: "client",
        attributes: { "ctxo.model": String(body.model ?? ""), "ctxo.upstream": client.upstream }
      })
    ),
  passthroughEach: (body, each) =>
    Effect.flatMap(tracing, (on) => {
      if (!on) return client.passthroughEach(body, each)
      let usage: ReturnType<typeof usageOf>
      return client
        .passthroughEach(body, (chunk) => {
          usage = usageOf(chunk) ?? usage
          each(chunk)
        })
        .pipe(
          Effect.tap(() => (usage === undefined ? Effect.void : annotateSpan(usage))),
          withSpan("ModelClient.passthroughStream", {
            kind: "client",
            attributes: { "ctxo.model": String(body.model ?? ""), "ctxo.upstream": client.upstream }
          })
        )
    })
})

/** A layer's output with its model client (if it has one) traced. */
export const traceServices = wrapClient(traceClient)
