/**
 * Traces and metrics through OpenTelemetry: one chat gives the span tree a person reading a trace
 * expects (the HTTP request; under it the decode and the turn; under the turn the wait for the
 * session's lock, compaction, the compile with each of its stages, the upstream call with its
 * tokens, each recorded step), every span carrying the request's id; the gateway's metrics reach an
 * OpenTelemetry reader; with OTEL_EXPORTER_OTLP_ENDPOINT the spans and metrics are sent to that
 * collector over OTLP/HTTP, and without it nothing is sent.
 */
import { cpSync, mkdtempSync, rmSync } from "node:fs"
import { createServer, type Server } from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { startFakeUpstream } from "@ctxo/agent/FakeUpstream"
import * as HttpServer from "@effect/platform/HttpServer"
import { AggregationTemporality, MetricReader } from "@opentelemetry/sdk-metrics"
import { InMemorySpanExporter, type ReadableSpan, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base"
import { ConfigProvider, Layer, Logger, LogLevel, ManagedRuntime, Option } from "effect"
import { describe, expect, it } from "vitest"
import * as GatewayConfig from "../src/GatewayConfig.ts"
import { app } from "../src/Server.ts"
import { layerTest } from "../src/ServerTest.ts"
import * as Telemetry from "../src/Telemetry.ts"
import { exampleData } from "./harness.ts"

/** A reader the test collects from when it wants (the gateway's metrics as OpenTelemetry has them). */
class CollectingReader extends MetricReader {
  constructor() {
    super({ aggregationTemporalitySelector: () => AggregationTemporality.CUMULATIVE })
  }
  protected override onForceFlush() {
    return Promise.resolve()
  }
  protected override onShutdown() {
    return Promise.resolve()
  }
}

/** A gateway on a copy of the example data with `telemetry` (and a fake upstream). */
const start = async (telemetry: Layer.Layer<never>) => {
  const dataDir = mkdtempSync(join(tmpdir(), "ctxo-traces-"))
  cpSync(exampleData, dataDir, { recursive: true })
  const upstream = await startFakeUpstream()
  const layer = app.pipe(
    Layer.provide(GatewayConfig.layerTest({ dataDir, upstreamBaseUrl: Option.some(upstream.url) })),
    Layer.provideMerge(layerTest),
    Layer.provide(telemetry),
    Layer.provide(Logger.minimumLogLevel(LogLevel.Warning))
  )
  const runtime = ManagedRuntime.make(layer)
  const address = (await runtime.runPromise(HttpServer.HttpServer)).address
  const baseUrl = address._tag === "TcpAddress" ? `http://127.0.0.1:${address.port}` : ""
  return {
    baseUrl,
    close: async () => {
      await runtime.dispose()
      await upstream.close()
      rmSync(dataDir, { recursive: true, force: true })
    }
  }
}

const chat = async (baseUrl: string, requestId: string) => {
  const response = await fetch(`${baseUrl}/api/sessions/code-agent-auth/chat`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-request-id": requestId },
    body: JSON.stringify({ message: "What does src/auth.ts do?" })
  })
  expect(response.status).toBe(200)
  const text = await response.text()
  expect(text).toContain("event: done")
}

describe("traces", () => {
  it("one chat is one span tree: request, decode, turn, lock, compaction, compile stages, upstream, records", async () => {
    const exporter = new InMemorySpanExporter()
    const reader = new CollectingReader()
    const gw = await start(
      Telemetry.layerWith({ spans: [new SimpleSpanProcessor(exporter)], metrics: [reader] })
    )
    try {
      await chat(gw.baseUrl, "trace-test-1")
      // The stream's end is logged after its last byte: let the last spans end.
      await new Promise((r) => setTimeout(r, 200))
      const spans = exporter
        .getFinishedSpans()
        .filter((s) => s.attributes[Telemetry.REQUEST_ID] === "trace-test-1")
      const byId = new Map(spans.map((s) => [s.spanContext().spanId, s]))
      const parentOf = (s: ReadableSpan) => byId.get(s.parentSpanContext?.spanId ?? "")
      const named = (name: string) => spans.filter((s) => s.name === name)
      const one = (name: string) => {
        const found = named(name)
        expect(
          found.map((s) => s.name),
          name
        ).toEqual([name])
        return found[0]!
      }
      const request = one("http.server POST")
      expect(parentOf(request)).toBeUndefined()
      expect(parentOf(one("Gateway.decode"))).toBe(request)
      const turn = one("TurnEngine.turn")
      expect(parentOf(turn)).toBe(request)
      // The session's manifest names its model.
      expect(turn.attributes).toMatchObject({
        "ctxo.session": "code-agent-auth",
        "ctxo.model": "claude-sonnet-4-5",
        "ctxo.turn": 2
      })
      for (const name of ["Store.lock", "Compaction.compact", "Recorder.startTurn", "Recorder.endTurn"])
        expect(parentOf(one(name)), name).toBe(turn)
      // One compile: the step's, which also checks that the input fits beside what every compile
      // carries (compaction is far from its trigger, so the required layers' compile is not made).
      const compiles = named("Compiler.compile")
      expect(compiles.length).toBe(1)
      for (const compile of compiles) {
        expect(parentOf(compile)).toBe(turn)
        expect(compile.attributes["ctxo.session"]).toBe("code-agent-auth")
        expect(compile.attributes["ctxo.tokens.used"]).toBeGreaterThan(0)
        expect(compile.attributes["ctxo.tokens.available"]).toBeGreaterThan(0)
        const stages = spans.filter((s) => parentOf(s) === compile).map((s) => s.name)
        expect(stages).toEqual(
          expect.arrayContaining([
            "Compiler.resolveSources",
            "Compiler.mergeReferences",
            "Compiler.collect",
            "Compiler.selectBlocks",
            "Compiler.format",
            "Compiler.emit"
          ])
        )
      }
      const upstream = one("ModelClient.complete")
      expect(parentOf(upstream)).toBe(turn)
      expect(String(upstream.attributes["ctxo.model"])).toContain("claude-sonnet-4-5")
      expect(upstream.attributes["ctxo.tokens.in"]).toBeGreaterThan(0)
      expect(upstream.attributes["ctxo.tokens.out"]).toBeGreaterThan(0)
      // Every span of the trace is the request's: none without its id.
      const trace = exporter
        .getFinishedSpans()
        .filter((s) => s.spanContext().traceId === request.spanContext().traceId)
      expect(
        trace.filter((s) => s.attributes[Telemetry.REQUEST_ID] !== "trace-test-1").map((s) => s.name)
      ).toEqual([])
      // The gateway's metrics, as OpenTelemetry reads them.
      const { resourceMetrics } = await reader.collect()
      const names = resourceMetrics.scopeMetrics.flatMap((s) => s.metrics.map((m) => m.descriptor.name))
      expect(names).toEqual(expect.arrayContaining(["ctxo_http_requests_total", "ctxo_tokens_total"]))
    } finally {
      await gw.close()
    }
  })

  it("a /v1/chat/completions request on the lane is a span of its own, a session's turn under it", async () => {
    const exporter = new InMemorySpanExporter()
    const gw = await start(Telemetry.layerWith({ spans: [new SimpleSpanProcessor(exporter)] }))
    try {
      const post = (requestId: string, headers: Record<string, string>, stream: boolean) =>
        fetch(`${gw.baseUrl}/v1/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json", "x-request-id": requestId, ...headers },
          body: JSON.stringify({
            model: "gpt-4o",
            stream,
            ...(stream ? { stream_options: { include_usage: true } } : {}),
            messages: [{ role: "user", content: "Hello there" }]
          })
        }).then(async (r) => {
          expect(r.status).toBe(200)
          await r.text()
        })
      await post("lane-proxy", {}, true)
      await post("lane-session", { "x-ctxo-session": "notebook-physics" }, false)
      await post("lane-session-stream", { "x-ctxo-session": "notebook-physics" }, true)
      await new Promise((r) => setTimeout(r, 200))
      const spans = exporter.getFinishedSpans()
      const requestOf = (id: string) => {
        const found = spans.filter(
          (s) => s.name === "POST /v1/chat/completions" && s.attributes[Telemetry.REQUEST_ID] === id
        )
        expect(found, id).toHaveLength(1)
        return found[0]!
      }
      // The proxied stream: its model and the tokens the upstream reported, ended with the stream.
      const proxied = requestOf("lane-proxy")
      expect(proxied.parentSpanContext?.spanId).toBeUndefined()
      expect(proxied.attributes).toMatchObject({ "ctxo.model": "gpt-4o" })
      expect(proxied.attributes["ctxo.tokens.out"]).toBeGreaterThan(0)
      // The session's turn is a child of its request, in the same trace.
      const request = requestOf("lane-session")
      expect(request.attributes).toMatchObject({
        "ctxo.session": "notebook-physics",
        "http.response.status_code": 200
      })
      const turn = spans.find(
        (s) => s.name === "TurnEngine.turn" && s.attributes[Telemetry.REQUEST_ID] === "lane-session"
      )
      expect(turn?.parentSpanContext?.spanId).toBe(request.spanContext().spanId)
      expect(turn?.spanContext().traceId).toBe(request.spanContext().traceId)
      // A streamed turn's upstream call is a span in its request's trace, with the tokens reported.
      const streamed = requestOf("lane-session-stream")
      const upstream = spans.filter(
        (s) =>
          s.name === "ModelClient.passthroughStream" &&
          s.spanContext().traceId === streamed.spanContext().traceId
      )
      expect(upstream).toHaveLength(1)
      expect(upstream[0]!.attributes).toMatchObject({ "ctxo.model": "gpt-4o" })
      expect(upstream[0]!.attributes["ctxo.tokens.out"]).toBeGreaterThan(0)
    } finally {
      await gw.close()
    }
  })

  it("OTEL_EXPORTER_OTLP_ENDPOINT sends spans and metrics to the collector over OTLP/HTTP; unset, nothing is sent", async () => {
    const received: Array<{ readonly path: string; readonly body: string }> = []
    const collector: Server = createServer((req, res) => {
      const chunks: Array<Buffer> = []
      req.on("data", (c: Buffer) => chunks.push(c))
      req.on("end", () => {
        received.push({ path: req.url ?? "", body: Buffer.concat(chunks).toString("utf8") })
        res.writeHead(200, { "content-type": "application/json" }).end("{}")
      })
    })
    await new Promise<void>((r) => collector.listen(0, "127.0.0.1", r))
    const address = collector.address()
    const endpoint = `http://127.0.0.1:${typeof address === "object" && address !== null ? address.port : 0}`
    const configured = (values: ReadonlyArray<readonly [string, string]>) =>
      Telemetry.layer.pipe(Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map(values)))))
    try {
      const silent = await start(configured([]))
      await chat(silent.baseUrl, "otlp-unset")
      await silent.close()
      expect(received).toEqual([])
      const gw = await start(
        configured([
          ["OTEL_EXPORTER_OTLP_ENDPOINT", endpoint],
          ["OTEL_METRIC_EXPORT_INTERVAL", "200"]
        ])
      )
      await chat(gw.baseUrl, "otlp-set")
      await new Promise((r) => setTimeout(r, 500))
      // Closing flushes what is batched.
      await gw.close()
      const traces = received
        .filter((r) => r.path === "/v1/traces")
        .map((r) => r.body)
        .join("\n")
      expect(traces).toContain("TurnEngine.turn")
      expect(traces).toContain("otlp-set")
      expect(
        received.some((r) => r.path === "/v1/metrics" && r.body.includes("ctxo_http_requests_total"))
      ).toBe(true)
    } finally {
      await new Promise((r) => collector.close(r))
    }
  })
})
