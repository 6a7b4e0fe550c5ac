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
import * as OtelMetrics from "@effect/opentelemetry/Metrics"
import * as Resource from "@effect/opentelemetry/Resource"
import * as Tracer from "@effect/opentelemetry/Tracer"
import { OTLPMetricExporter } from "@opentelemetry/exporter-metrics-otlp-http"
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http"
import { type MetricReader, PeriodicExportingMetricReader } from "@opentelemetry/sdk-metrics"
import { BasicTracerProvider, BatchSpanProcessor, type SpanProcessor } from "@opentelemetry/sdk-trace-base"
import { Config, Effect, Layer, Option, Stream } from "effect"

/** The attribute every span of a request carries: its `x-request-id`. */
export const REQUEST_ID = "ctxo.request_id"

const resource = Resource.layerFromEnv(
  Resource.configToAttributes({ serviceName: "ctxo-gateway", serviceVersion: "0.1.0" })
)

/** Spans to `processors` and (when given) the metrics to `readers`. */
export const layerWith = (options: {
  readonly spans: ReadonlyArray<SpanProcessor>
  readonly metrics?: ReadonlyArray<MetricReader>
}): Layer.Layer<never> => {
  const provider = Layer.scoped(
    Tracer.OtelTracerProvider,
    Effect.flatMap(Resource.Resource, (r) =>
      Effect.acquireRelease(
        Effect.sync(() => new BasicTracerProvider({ resource: r, spanProcessors: [...options.spans] })),
        (p) =>
          Effect.promise(() => p.forceFlush().then(() => p.shutdown())).pipe(
            Effect.interruptible,
            Effect.timeoutOption("3 seconds")
          )
      )
    )
  )
  const tracing = Tracer.layer.pipe(Layer.provide(provider))
  const readers = options.metrics ?? []
  const metrics =
    readers.length === 0
      ? Layer.empty
      : OtelMetrics.layer(() => readers as [MetricReader, ...Array<MetricReader>], {
          shutdownTimeout: "3 seconds"
        })
  return Layer.mergeAll(tracing, metrics).pipe(Layer.provide(resource))
}

/** What `OTEL_EXPORTER_OTLP_ENDPOINT` asks for: OTLP/HTTP exporters, or nothing. */
export const layer: Layer.Layer<never, never> = Layer.unwrapEffect(
  Effect.gen(function* () {
    const endpoint = yield* Config.option(Config.string("OTEL_EXPORTER_OTLP_ENDPOINT"))
    const interval = yield* Config.integer("OTEL_METRIC_EXPORT_INTERVAL").pipe(Config.withDefault(60_000))
    // No collector: no span is made at all (Effect's own tracer would still make each one).
    if (Option.isNone(endpoint) || endpoint.value.trim() === "") return Layer.setTracerEnabled(false)
    const base = endpoint.value.trim().replace(/\/+$/, "")
    return layerWith({
      spans: [new BatchSpanProcessor(new OTLPTraceExporter({ url: `${base}/v1/traces` }))],
      metrics: [
        new PeriodicExportingMetricReader({
          exporter: new OTLPMetricExporter({ url: `${base}/v1/metrics` }),
          exportIntervalMillis: interval
        })
      ]
    })
  }).pipe(Effect.orDie)
)

const usageOf = (value: unknown) => {
  const usage = (value as { readonly usage?: { prompt_tokens?: unknown; completion_tokens?: unknown } })
    ?.usage
  return typeof usage?.prompt_tokens === "number" && typeof usage.completion_tokens === "number"
    ? { "ctxo.tokens.in": usage.prompt_tokens, "ctxo.tokens.out": usage.completion_tokens }
    : undefined
}

/** The model client with each upstream call a span: the model, and the tokens the upstream reported. */
export const traceClient = (client: ModelClientService): ModelClientService => ({
  ...client,
  complete: (request) =>
    client.complete(request).pipe(
      Stream.tap((event) =>
        event._tag === "Done" && event.usage !== undefined
          ? Effect.annotateCurrentSpan({
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
    ),
  passthrough: (body) =>
    client.passthrough(body).pipe(
      Effect.tap((answer) => {
        const usage = usageOf(answer)
        return usage === undefined ? Effect.void : Effect.annotateCurrentSpan(usage)
      }),
      Effect.withSpan("ModelClient.passthrough", {
        kind: "client",
        attributes: { "ctxo.model": String(body.model ?? ""), "ctxo.upstream": client.upstream },
        captureStackTrace: false
      })
    ),
  passthroughStream: (body) =>
    client.passthroughStream(body).pipe(
      Stream.tap((chunk) => {
        const usage = usageOf(chunk)
        return usage === undefined ? Effect.void : Effect.annotateCurrentSpan(usage)
      }),
      Stream.withSpan("ModelClient.passthroughStream", {
        kind: "client",
        attributes: { "ctxo.model": String(body.model ?? ""), "ctxo.upstream": client.upstream },
        captureStackTrace: false
      })
    )
})

/** A layer's output with its model client (if it has one) traced. */
export const traceServices = wrapClient(traceClient)
