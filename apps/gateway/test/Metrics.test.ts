import { cpSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { type FakeUpstream, startFakeUpstream } from "@ctxo/agent/FakeUpstream"
import * as HttpServer from "@effect/platform/HttpServer"
import { Layer, Logger, ManagedRuntime, MetricState, Option, Redacted } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as GatewayConfig from "../src/GatewayConfig.ts"
import { renderPrometheus } from "../src/Metrics.ts"
import { app } from "../src/Server.ts"
import { layerTest } from "../src/ServerTest.ts"
import { exampleData } from "./harness.ts"

/** A gateway whose log lines are captured as `CTXO_LOG_FORMAT=json` writes them: one JSON object each. */
const start = async (overrides: Partial<GatewayConfig.Settings> = {}) => {
  const dataDir = mkdtempSync(join(tmpdir(), "ctxo-metrics-"))
  cpSync(exampleData, dataDir, { recursive: true })
  const upstream: FakeUpstream = await startFakeUpstream()
  const lines: Array<string> = []
  const capture = Logger.replace(
    Logger.defaultLogger,
    Logger.map(Logger.jsonLogger, (line) => {
      lines.push(line)
    })
  )
  const layer = app.pipe(
    Layer.provide(
      GatewayConfig.layerTest({ dataDir, upstreamBaseUrl: Option.some(upstream.url), ...overrides })
    ),
    Layer.provideMerge(layerTest),
    Layer.provide(capture)
  )
  const runtime = ManagedRuntime.make(layer)
  const address = (await runtime.runPromise(HttpServer.HttpServer)).address
  const baseUrl = address._tag === "TcpAddress" ? `http://127.0.0.1:${address.port}` : ""
  return {
    baseUrl,
    upstream,
    lines,
    close: async () => {
      await runtime.dispose()
      await upstream.close()
      rmSync(dataDir, { recursive: true, force: true })
    }
  }
}

interface LogLine {
  readonly message: unknown
  readonly annotations: Record<string, unknown>
}
const accessLogs = (lines: ReadonlyArray<string>): Array<LogLine> =>
  lines
    .map((l) => JSON.parse(l) as LogLine)
    .filter((l) => typeof l.annotations?.route === "string" && typeof l.annotations?.status === "number")
/** The access log line of a response: exactly one carries its `x-request-id`. */
const logOf = (lines: ReadonlyArray<string>, response: Response) => {
  const id = response.headers.get("x-request-id")
  const found = accessLogs(lines).filter((l) => l.annotations.requestId === id)
  expect(found, `one access log line for ${id}`).toHaveLength(1)
  return { message: String(found[0]!.message), ...found[0]!.annotations } as Record<string, unknown>
}

/** `name{labels} value` lines: each sample by its name and labels. */
const LINE =
  /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:\\.|[^"\\])*"(?:,|(?=\})))*\})? (-?\d+(?:\.\d+)?(?:e[+-]?\d+)?|\+Inf|-Inf|NaN)$/
const parse = (text: string) => {
  const samples = new Map<string, number>()
  const types = new Map<string, string>()
  for (const line of text.split("\n")) {
    if (line === "") continue
    if (line.startsWith("# HELP ")) continue
    const type = /^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)$/.exec(line)
    if (type !== null) {
      expect(types.has(type[1]!), `one TYPE line for ${type[1]}`).toBe(false)
      types.set(type[1]!, type[2]!)
      continue
    }
    const sample = LINE.exec(line)
    expect(sample, `a sample line: ${line}`).not.toBeNull()
    samples.set(`${sample![1]}${sample![2] ?? ""}`, Number(sample![3]!.replace("+Inf", "Infinity")))
  }
  return { samples, types }
}
const sum = (samples: Map<string, number>, name: string, ...labels: ReadonlyArray<string>) => {
  let total = 0
  for (const [key, value] of samples)
    if ((key === name || key.startsWith(`${name}{`)) && labels.every((l) => key.includes(l))) total += value
  return total
}

let gw: Awaited<ReturnType<typeof start>>
beforeAll(async () => {
  gw = await start({ upstreamIdleMs: 600 })
})
afterAll(async () => {
  await gw?.close()
})

const scrape = async (headers: Record<string, string> = {}) => {
  const response = await fetch(`${gw.baseUrl}/metrics`, { headers })
  return { response, text: await response.text() }
}
const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${gw.baseUrl}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body)
  })

describe("GET /metrics", () => {
  it("counts requests, latency, tokens, upstream errors and turns, in the Prometheus text format", async () => {
    const before = parse((await scrape()).text).samples

    // A chat (a stream of Server-Sent Events), a /v1 call, a /v1 call the upstream refuses, an error.
    const chat = await post("/api/session/code-agent-auth/chat", { message: "What does src/auth.ts do?" })
    expect(chat.status).toBe(200)
    expect(await chat.text()).toContain("event: done")
    const v1 = await post("/v1/chat/completions", {
      model: "gpt-4o",
      messages: [{ role: "user", content: "Say hello" }]
    })
    expect(v1.status).toBe(200)
    gw.upstream.script({ type: "error", status: 429, retryAfter: "1" })
    const limited = await post("/v1/chat/completions", {
      model: "gpt-4o",
      messages: [{ role: "user", content: "Again" }]
    })
    expect(limited.status).toBe(429)
    await limited.text()
    const missing = await fetch(`${gw.baseUrl}/api/sessions/no-such-session`)
    expect(missing.status).toBe(404)
    // An input that cannot fit an 8k model: the turn is refused (an error event in the stream).
    const refused = await post("/api/session/code-agent-auth/chat", {
      message: "lorem ipsum ".repeat(8000),
      model: "gpt-4"
    })
    expect(await refused.text()).toContain('"tag":"BudgetExceeded"')
    expect(logOf(gw.lines, refused)).toMatchObject({ error: "BudgetExceeded", stream: true })

    const { response, text } = await scrape()
    expect(response.status).toBe(200)
    expect(response.headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8")
    const { samples, types } = parse(text)
    const moved = (name: string, ...labels: ReadonlyArray<string>) =>
      sum(samples, name, ...labels) - sum(before, name, ...labels)

    expect(types.get("ctxo_http_requests_total")).toBe("counter")
    expect(types.get("ctxo_http_request_duration_seconds")).toBe("histogram")
    expect(types.get("ctxo_tokens_total")).toBe("counter")
    expect(types.get("ctxo_upstream_errors_total")).toBe("counter")
    expect(types.get("ctxo_compactions_total")).toBe("counter")
    expect(types.get("ctxo_refusals_total")).toBe("counter")
    // The process's memory, as Prometheus' Node.js clients name it.
    for (const name of [
      "process_resident_memory_bytes",
      "nodejs_heap_size_total_bytes",
      "nodejs_heap_size_used_bytes",
      "nodejs_external_memory_bytes"
    ]) {
      expect([name, types.get(name)]).toEqual([name, "gauge"])
      expect(samples.get(name)).toBeGreaterThan(0)
    }
    expect(samples.get("nodejs_heap_size_used_bytes")).toBeLessThanOrEqual(
      samples.get("nodejs_heap_size_total_bytes")!
    )
    // The heap by space: the old generation's size against what is in use in it (V8's free room
    // inside its pages), as Prometheus' Node.js clients label the spaces.
    for (const name of [
      "nodejs_heap_space_size_total_bytes",
      "nodejs_heap_space_size_used_bytes",
      "nodejs_heap_space_size_available_bytes"
    ])
      expect([name, types.get(name)]).toEqual([name, "gauge"])
    const oldUsed = samples.get('nodejs_heap_space_size_used_bytes{space="old"}')
    expect(oldUsed).toBeGreaterThan(0)
    expect(oldUsed).toBeLessThanOrEqual(samples.get('nodejs_heap_space_size_total_bytes{space="old"}')!)
    // What is kept of the sessions between requests, against its budget (16 MiB by default).
    expect(types.get("ctxo_session_cache_bytes")).toBe("gauge")
    expect(types.get("ctxo_session_cache_evictions_total")).toBe("counter")
    expect(samples.get("ctxo_session_cache_max_bytes")).toBe(16 * 1024 * 1024)
    expect(samples.get("ctxo_session_cache_sessions")).toBeGreaterThanOrEqual(1)
    expect(samples.get("ctxo_session_cache_bytes")).toBeGreaterThan(0)
    expect(samples.get("ctxo_session_cache_evictions_total")).toBe(0)
    expect(types.get("ctxo_session_cache_rejections_total")).toBe("counter")
    expect(samples.get("ctxo_session_cache_rejections_total")).toBe(0)
    // Lookups by holder and result: the session's second turn found what its first kept, and its
    // first read the history the cache did not have yet.
    expect(types.get("ctxo_session_cache_lookups_total")).toBe("counter")
    const lookups = (result: string) =>
      samples.get(`ctxo_session_cache_lookups_total{holder="store history state",result="${result}"}`)
    expect(lookups("hit")).toBeGreaterThan(0)
    expect(lookups("miss")).toBeGreaterThan(0)

    // Routes are the contract's templates, never raw URLs.
    expect(moved("ctxo_http_requests_total", 'route="/api/session/:id/chat"', 'status="200"')).toBe(2)
    expect(moved("ctxo_http_requests_total", 'route="/v1/chat/completions"', 'status="200"')).toBe(1)
    expect(moved("ctxo_http_requests_total", 'route="/v1/chat/completions"', 'status="429"')).toBe(1)
    expect(moved("ctxo_http_requests_total", 'status="404"')).toBe(1)
    expect(text).not.toContain("no-such-session")
    expect(moved("ctxo_http_request_duration_seconds_count", 'route="/api/session/:id/chat"')).toBe(2)
    expect(moved("ctxo_tokens_total", 'direction="in"')).toBeGreaterThan(0)
    expect(moved("ctxo_tokens_total", 'direction="out"')).toBeGreaterThan(0)
    expect(moved("ctxo_tokens_total", 'model="gpt-4o"', 'direction="in"')).toBeGreaterThan(0)
    expect(moved("ctxo_upstream_errors_total", 'status="429"')).toBe(1)
    expect(samples.has("ctxo_compactions_total")).toBe(true)
    expect(moved("ctxo_refusals_total")).toBe(1)

    // Histogram buckets are cumulative and end at +Inf with the count.
    const route = 'method="POST",route="/api/session/:id/chat"'
    expect(samples.get(`ctxo_http_request_duration_seconds_bucket{${route},le="+Inf"}`)).toBe(
      samples.get(`ctxo_http_request_duration_seconds_count{${route}}`)
    )
  })

  it("logs one line per request with model, session, tokens, the error reason, and a stream's whole duration", async () => {
    const chat = await post("/api/session/code-agent-auth/chat", { message: "And src/session.ts?" })
    await chat.text()
    const line = logOf(gw.lines, chat)
    expect(line).toMatchObject({
      message: "POST /api/session/code-agent-auth/chat 200",
      session: "code-agent-auth",
      stream: true,
      route: "/api/session/:id/chat"
    })
    expect(typeof line.model).toBe("string")
    expect(line.tokensIn).toBeGreaterThan(0)
    expect(line.tokensOut).toBeGreaterThan(0)
    expect(typeof line.requestId).toBe("string")
    expect(typeof line.durationMs).toBe("number")

    const missing = await fetch(`${gw.baseUrl}/api/sessions/no-such-session`)
    await missing.text()
    expect(logOf(gw.lines, missing)).toMatchObject({
      message: "GET /api/sessions/no-such-session 404",
      error: "SessionNotFound",
      session: "no-such-session"
    })

    gw.upstream.script({ type: "error", status: 429 })
    const limited = await post("/v1/chat/completions", {
      model: "gpt-4o",
      messages: [{ role: "user", content: "Rate me" }],
      metadata: { note: "proxy" }
    })
    await limited.text()
    const limitedLine = logOf(gw.lines, limited)
    expect(limitedLine).toMatchObject({
      model: "gpt-4o",
      status: 429,
      upstreamStatus: "429",
      route: "/v1/chat/completions"
    })
    expect(typeof limitedLine.error).toBe("string")

    // A stream the upstream stalls after its first chunk ends at the idle deadline (600 ms): the
    // log line says how long the stream ran, not how long its headers took.
    gw.upstream.script({ type: "stall", after: "chunk" })
    const sent = Date.now()
    const stalled = await post("/v1/chat/completions", {
      model: "gpt-4o",
      stream: true,
      messages: [{ role: "user", content: "Stall" }]
    })
    const headersAfter = Date.now() - sent
    await stalled.text()
    const streamed = logOf(gw.lines, stalled)
    expect(streamed).toMatchObject({ stream: true, route: "/v1/chat/completions" })
    expect(streamed.durationMs).toBeGreaterThanOrEqual(550)
    expect(headersAfter).toBeLessThan(Number(streamed.durationMs))
  })

  it("counts a session turn's tokens and its upstream's refusal, streamed or JSON", async () => {
    const created = await post("/api/sessions", { id: "metrics-stream", concept: "metrics" })
    expect(created.status).toBe(201)
    const turn = (content: string, stream = true) =>
      post(
        "/v1/chat/completions",
        { model: "gpt-4o", stream, messages: [{ role: "user", content }] },
        { "x-ctxo-session": "metrics-stream" }
      )
    const before = parse((await scrape()).text).samples
    const streamed = await turn("What is a token budget?")
    expect(streamed.status).toBe(200)
    expect(await streamed.text()).toContain("data: [DONE]")
    const line = logOf(gw.lines, streamed)
    expect(line).toMatchObject({ session: "metrics-stream", stream: true, model: "gpt-4o" })
    expect(line.tokensIn).toBeGreaterThan(0)
    expect(line.tokensOut).toBeGreaterThan(0)
    const json = await turn("And in one answer?", false)
    expect(json.status).toBe(200)
    await json.text()
    const jsonLine = logOf(gw.lines, json)
    expect(jsonLine).toMatchObject({ session: "metrics-stream", model: "gpt-4o" })
    expect(jsonLine.tokensIn).toBeGreaterThan(0)
    expect(jsonLine.tokensOut).toBeGreaterThan(0)
    gw.upstream.script({ type: "error", status: 429, retryAfter: "1" })
    const limited = await turn("Again?")
    expect(limited.status).toBe(429)
    await limited.text()
    expect(logOf(gw.lines, limited)).toMatchObject({ upstreamStatus: "429" })
    const after = parse((await scrape()).text).samples
    const moved = (name: string, ...labels: ReadonlyArray<string>) =>
      sum(after, name, ...labels) - sum(before, name, ...labels)
    expect(moved("ctxo_tokens_total", 'model="gpt-4o"', 'direction="in"')).toBe(
      Number(line.tokensIn) + Number(jsonLine.tokensIn)
    )
    expect(moved("ctxo_tokens_total", 'model="gpt-4o"', 'direction="out"')).toBe(
      Number(line.tokensOut) + Number(jsonLine.tokensOut)
    )
    expect(moved("ctxo_upstream_errors_total", 'status="429"')).toBe(1)
  })

  it("needs the admin key when API keys are configured", async () => {
    const keyed = await start({
      apiKeys: [{ key: "tenant-key-0123456789", tenant: "acme" }],
      adminKey: Option.some(Redacted.make("admin-key-0123456789"))
    })
    try {
      const none = await fetch(`${keyed.baseUrl}/metrics`)
      expect(none.status).toBe(401)
      const tenant = await fetch(`${keyed.baseUrl}/metrics`, {
        headers: { authorization: "Bearer tenant-key-0123456789" }
      })
      expect(tenant.status).toBe(403)
      const admin = await fetch(`${keyed.baseUrl}/metrics`, {
        headers: { authorization: "Bearer admin-key-0123456789" }
      })
      expect(admin.status).toBe(200)
      expect(await admin.text()).toContain("# TYPE ctxo_http_requests_total counter")
    } finally {
      await keyed.close()
    }
  })

  it("escapes label values and renders +Inf", () => {
    const text = renderPrometheus([
      {
        metricKey: {
          name: "ctxo_example_total",
          description: Option.some("An example."),
          tags: [{ key: "model", value: 'a"b\\c\nd' }]
        },
        metricState: MetricState.counter(2)
      }
    ])
    expect(text).toBe(
      '# HELP ctxo_example_total An example.\n# TYPE ctxo_example_total counter\nctxo_example_total{model="a\\"b\\\\c\\nd"} 2\n'
    )
  })
})
