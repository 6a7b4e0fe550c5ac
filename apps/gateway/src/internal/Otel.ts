/**
 * The OpenTelemetry side of `Telemetry`: `@effect/opentelemetry`'s tracer and metrics over the SDK's
 * processors and readers, and the OTLP/HTTP exporters. Loaded only when a collector is configured
 * (or a test asks for spans).
 */
import * as OtelMetrics from "@effect/opentelemetry/Metrics"
import * as Resource from "@effect/opentelemetry/Resource"
import * as Tracer from "@effect/opentelemetry/Tracer"
import { OTLPMetricExporter } from "@opentelemetry/exporter-metrics-otlp-http"
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http"
import { type MetricReader, PeriodicExportingMetricReader } from "@opentelemetry/sdk-metrics"
import { BasicTracerProvider, BatchSpanProcessor, type SpanProcessor } from "@opentelemetry/sdk-trace-base"
import { Effect, Layer } from "effect"

export interface OtelOptions {
  readonly spans: ReadonlyArray<SpanProcessor>
  readonly metrics?: ReadonlyArray<MetricReader>
}

const resource = Resource.layerFromEnv(
  Resource.configToAttributes({ serviceName: "ctxo-gateway", serviceVersion: "0.1.0" })
)

/** Spans to `processors` and (when given) the metrics to `readers`. */
export const layerWith = (options: OtelOptions): Layer.Layer<never> => {
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

/** OTLP/HTTP exporters to a collector at `base`: spans in batches, metrics every `interval` ms. */
export const exportersTo = (base: string, interval: number): OtelOptions => ({
  spans: [new BatchSpanProcessor(new OTLPTraceExporter({ url: `${base}/v1/traces` }))],
  metrics: [
    new PeriodicExportingMetricReader({
      exporter: new OTLPMetricExporter({ url: `${base}/v1/metrics` }),
      exportIntervalMillis: interval
    })
  ]
})
