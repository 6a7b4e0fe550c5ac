/**
 * What the gateway measures, per request (the access log line) and per process (`GET /metrics`,
 * Prometheus' text exposition format 0.0.4).
 *
 * Metrics are Effect's (`Metric`, process-wide registry), rendered here:
 *
 * | metric | type | labels |
 * |---|---|---|
 * | `ctxo_http_requests_total` | counter | `method`, `route` (the contract's path, `unmatched` for none), `status` |
 * | `ctxo_http_request_duration_seconds` | histogram | `method`, `route`; a stream's until it ended |
 * | `ctxo_tokens_total` | counter | `model`, `direction` (`in`, `out`): what the upstream reported |
 * | `ctxo_upstream_errors_total` | counter | `status` (the upstream's HTTP status, or `timeout`, `network`, ...) |
 * | `ctxo_compactions_total` | counter | | (the turn engine's)
 * | `ctxo_refusals_total` | counter | | (the turn engine's: inputs that cannot fit)
 *
 * A request's facts (model, session, tokens, upstream status) are gathered in its `RequestStats`
 * (the fiber ref `CurrentRequest`, set by the middleware for the handler and for the response
 * stream) by the model client (`instrumentServices` wraps it) and logged once, when the response
 * is sent or, for a stream, when the stream ended.
 */

import { getHeapSpaceStatistics } from "node:v8"
import { type Service as ModelClientService, type RawBody, wrapClient } from "@ctxo/agent/ModelClient"
import { compactionsTotal, refusalsTotal } from "@ctxo/agent/TurnEngine"
import { Api } from "@ctxo/api/Api"
import * as SessionCache from "@ctxo/store/SessionCache"
import * as HttpApi from "@effect/platform/HttpApi"
import { Effect, FiberRef, Metric, MetricBoundaries, MetricLabel, MetricState, Option, Stream } from "effect"
import * as FindMyWay from "find-my-way-ts"

// --- the metrics

export const httpRequests = Metric.counter("ctxo_http_requests_total", {
  description: "HTTP requests answered, by method, route and status.",
  incremental: true
})
export const httpDuration = Metric.histogram(
  "ctxo_http_request_duration_seconds",
  MetricBoundaries.fromIterable([0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120]),
  "Time from the request to the end of its response (a stream's end, not its headers), by method and route."
)
export const tokens = Metric.counter("ctxo_tokens_total", {
  description: "Tokens the upstream model reported, by model and direction (in: prompt, out: completion).",
  incremental: true
})
export const upstreamErrors = Metric.counter("ctxo_upstream_errors_total", {
  description: "Failed upstream model calls, by the upstream's HTTP status (or timeout, network, protocol).",
  incremental: true
})

// --- a request's facts

export interface RequestStats {
  /** The request's id (`x-request-id`: the client's, or one made for it). */
  requestId: string | undefined
  model: string | undefined
  session: string | undefined
  tokensIn: number
  tokensOut: number
  /** The error's tag (`/api`) or code/type (`/v1`), when the request failed, in its status or its stream. */
  error: string | undefined
  upstreamStatus: string | undefined
  /** Whether the response was a stream (the duration then runs to its end). */
  stream: boolean
}

export const newStats = (requestId?: string): RequestStats => ({
  requestId,
  model: undefined,
  session: undefined,
  tokensIn: 0,
  tokensOut: 0,
  error: undefined,
  upstreamStatus: undefined,
  stream: false
})

/** The facts of the request being served (none outside a request). */
export const CurrentRequest = FiberRef.unsafeMake<RequestStats | undefined>(undefined)

const withStats = (f: (stats: RequestStats) => void) =>
  Effect.map(FiberRef.get(CurrentRequest), (stats) => {
    if (stats !== undefined) f(stats)
  })

/** Tokens the upstream reported for a model: in the request's facts and the counters. */
const tokensNow = (stats: RequestStats | undefined, model: string, input: number, output: number) => {
  if (stats !== undefined) {
    stats.model ??= model
    stats.tokensIn += input
    stats.tokensOut += output
  }
  const labels = tokenLabelsOf(model)
  tokens.unsafeUpdate(input, labels.in)
  tokens.unsafeUpdate(output, labels.out)
}

/**
 * Labels kept by key, the same array each time: a metric updated with labels finds its series by
 * the array itself, where `Metric.tagged` hands it a new array on every update and so a new key,
 * hashed through its text (about 10 us of a proxied call). The keys are routes, statuses and
 * models, a few; bounded anyway (1,024, then made afresh).
 */
const keptBy = <A>() => {
  const kept = new Map<string, A>()
  return (key: string, make: () => A): A => {
    let found = kept.get(key)
    if (found === undefined) {
      found = make()
      if (kept.size >= 1024) kept.clear()
      kept.set(key, found)
    }
    return found
  }
}
type Labels = ReadonlyArray<MetricLabel.MetricLabel>
/** Labels in the order `Metric.tagged` calls, outermost first, would give them (one series either way). */
const labelsOf = (...pairs: ReadonlyArray<readonly [string, string]>): Labels =>
  pairs.map(([key, value]) => MetricLabel.make(key, value))

/** A model's token counter labels. */
const tokenLabels = keptBy<{ readonly in: Labels; readonly out: Labels }>()
const tokenLabelsOf = (model: string) =>
  tokenLabels(model, () => ({
    in: labelsOf(["model", model], ["direction", "in"]),
    out: labelsOf(["model", model], ["direction", "out"])
  }))
const upstreamLabels = keptBy<Labels>()

/** An upstream call failed: its status (or kind) in the request's facts and the counter. */
export const upstreamFailedNow = (
  stats: RequestStats | undefined,
  error: { readonly status?: number | undefined; readonly kind?: unknown }
) => {
  const status =
    error.status !== undefined
      ? String(error.status)
      : typeof error.kind === "string"
        ? error.kind
        : "unknown"
  if (stats !== undefined) {
    stats.upstreamStatus = status
    stats.error ??= "UpstreamError"
  }
  upstreamErrors.unsafeUpdate(
    1,
    upstreamLabels(status, () => labelsOf(["status", status]))
  )
}

/** An upstream answer or chunk: the usage it reports, if any, counted for `model`. */
export const usageSeen = (stats: RequestStats | undefined, model: string, value: unknown) => {
  const usage = usageOf(value)
  if (usage !== undefined) tokensNow(stats, model, usage.input, usage.output)
}

const countTokens = (model: string, input: number, output: number) =>
  Effect.flatMap(FiberRef.get(CurrentRequest), (stats) =>
    Effect.sync(() => tokensNow(stats, model, input, output))
  )

const upstreamFailed = (error: { readonly status?: number | undefined; readonly kind?: unknown }) =>
  Effect.flatMap(FiberRef.get(CurrentRequest), (stats) => Effect.sync(() => upstreamFailedNow(stats, error)))

const usageOf = (value: unknown): { readonly input: number; readonly output: number } | undefined => {
  const usage = (value as { readonly usage?: unknown } | null)?.usage as
    | { readonly prompt_tokens?: unknown; readonly completion_tokens?: unknown }
    | null
    | undefined
  if (typeof usage !== "object" || usage === null) return undefined
  const input = typeof usage.prompt_tokens === "number" ? usage.prompt_tokens : 0
  const output = typeof usage.completion_tokens === "number" ? usage.completion_tokens : 0
  return { input, output }
}

/** The body's `model` (at most 120 characters), or `fallback`. */
export const modelOf = (body: unknown, fallback = "unknown") => {
  const model = (body as { readonly model?: unknown } | null)?.model
  return typeof model === "string" && model !== "" ? model.slice(0, 120) : fallback
}

/** The request's facts and the model of a body passed through, the model noted in the facts. */
const passedThrough = (body: RawBody) =>
  Effect.map(FiberRef.get(CurrentRequest), (stats) => {
    const model = modelOf(body)
    if (stats !== undefined) stats.model ??= model
    return { stats, model }
  })

/** The model client with its calls measured: tokens by model, upstream errors by status. */
export const instrumentClient = (client: ModelClientService): ModelClientService => ({
  ...client,
  complete: (request) =>
    Stream.unwrap(
      Effect.as(
        withStats((s) => {
          s.model ??= request.model
        }),
        client.complete(request).pipe(
          Stream.tap((event) =>
            event._tag === "Done" && event.usage !== undefined
              ? countTokens(request.model, event.usage.inputTokens, event.usage.outputTokens)
              : Effect.void
          ),
          Stream.tapError(upstreamFailed)
        )
      )
    ),
  passthrough: (body) =>
    Effect.flatMap(passedThrough(body), ({ stats, model }) =>
      Effect.tap(client.passthrough(body), (answer) => Effect.sync(() => usageSeen(stats, model, answer)))
    ).pipe(Effect.tapError(upstreamFailed)),
  passthroughEach: (body, each) =>
    Effect.flatMap(passedThrough(body), ({ stats, model }) =>
      client.passthroughEach(body, (chunk) => {
        usageSeen(stats, model, chunk)
        each(chunk)
      })
    ).pipe(Effect.tapError(upstreamFailed))
})

/** A layer's output with its model client (if it has one) measured. */
export const instrumentServices = wrapClient(instrumentClient)

// --- routes as labels: the contract's path templates, never raw URLs

const router = FindMyWay.make<string>()
HttpApi.reflect(Api, {
  onGroup: () => {},
  onEndpoint: ({ endpoint }) => router.on(endpoint.method, endpoint.path, endpoint.path)
})
for (const path of ["/openapi.json", "/docs"] as const) router.on("GET", path, path)

/** The route template a request reaches (`unmatched` for none) and its path parameters. */
export const routeOf = (
  method: string,
  url: string
): { readonly route: string; readonly params: Readonly<Record<string, string | undefined>> } => {
  const found = router.find(method, url) ?? (method === "HEAD" ? router.find("GET", url) : undefined)
  return found === undefined
    ? { route: "unmatched", params: {} }
    : { route: found.handler, params: found.params }
}

/** The session a request names: its path (`:id`), `x-ctxo-session`, or the body's `metadata.session_id`. */
export const sessionOf = (
  params: Readonly<Record<string, string | undefined>>,
  headers: Readonly<Record<string, string | undefined>>,
  body: unknown
): string | undefined => {
  const fromBody = (body as { readonly metadata?: { readonly session_id?: unknown } } | null)?.metadata
    ?.session_id
  const session =
    params.id ?? headers["x-ctxo-session"] ?? (typeof fromBody === "string" ? fromBody : undefined)
  return session?.slice(0, 200)
}

/** The body's `model`, if it is JSON and names one. */
export const requestModelOf = (body: unknown): string | undefined => {
  const model = modelOf(body, "")
  return model === "" ? undefined : model
}

/** An error response's reason: `/api`'s `error.tag`, `/v1`'s `error.code` or `error.type`. */
export const reasonOf = (body: unknown): string | undefined => {
  const error = (body as { readonly error?: Record<string, unknown> } | null)?.error
  if (typeof error !== "object" || error === null) return undefined
  const reason = error.tag ?? error.code ?? error.type
  return typeof reason === "string" ? reason.slice(0, 120) : undefined
}

/** An error reported inside a stream (an SSE frame: `/api`'s `error` event, `/v1`'s `{ "error": ... }`). */
export const streamErrorOf = (frame: string): string | undefined => {
  if (!frame.includes('"error"')) return undefined
  const tagged = /"type":"error","tag":"([^"]{1,120})"/.exec(frame)
  if (tagged !== null) return tagged[1]
  const openAI = /data: (\{"error":.*\})\s*$/m.exec(frame)
  if (openAI === null) return undefined
  try {
    return reasonOf(JSON.parse(openAI[1]!)) ?? "error"
  } catch {
    return "error"
  }
}

// --- the request's end: the access log line and the request metrics

export interface Finished {
  readonly method: string
  readonly url: string
  readonly route: string
  readonly status: number
  readonly requestId: string
  readonly tenant: string | undefined
  readonly durationMs: number
  readonly stats: RequestStats
}

/** The request metrics' labels of a route and status. */
const requestLabels = keptBy<{ readonly requests: Labels; readonly duration: Labels }>()
const labelsOfRequest = (method: string, route: string, status: number) =>
  requestLabels(`${method} ${route} ${status}`, () => ({
    requests: labelsOf(["method", method], ["route", route], ["status", String(status)]),
    duration: labelsOf(["method", method], ["route", route])
  }))

/**
 * A request ended: its metrics counted now, and its access log line (message and annotations) for
 * whoever logs it.
 */
export const requestFinishedNow = (
  done: Finished
): { readonly message: string; readonly annotations: Record<string, unknown> } => {
  const { stats } = done
  const annotations: Record<string, unknown> = {
    requestId: done.requestId,
    method: done.method,
    route: done.route,
    status: done.status,
    durationMs: done.durationMs,
    ...(done.tenant === undefined ? {} : { tenant: done.tenant }),
    ...(stats.session === undefined ? {} : { session: stats.session }),
    ...(stats.model === undefined ? {} : { model: stats.model }),
    ...(stats.tokensIn === 0 && stats.tokensOut === 0
      ? {}
      : { tokensIn: stats.tokensIn, tokensOut: stats.tokensOut }),
    ...(stats.error === undefined ? {} : { error: stats.error }),
    ...(stats.upstreamStatus === undefined ? {} : { upstreamStatus: stats.upstreamStatus }),
    ...(stats.stream ? { stream: true } : {})
  }
  const labels = labelsOfRequest(done.method, done.route, done.status)
  httpRequests.unsafeUpdate(1, labels.requests)
  httpDuration.unsafeUpdate(done.durationMs / 1000, labels.duration)
  return { message: `${done.method} ${done.url} ${done.status}`, annotations }
}

/** One line per request, in the gateway's logger (`CTXO_LOG_FORMAT=json`: one JSON object). */
export const requestFinished = (done: Finished) =>
  Effect.suspend(() => {
    const line = requestFinishedNow(done)
    return Effect.logInfo(line.message).pipe(Effect.annotateLogs(line.annotations))
  })

// --- the Prometheus text format

const escapeLabel = (value: string) => value.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n")
const escapeHelp = (value: string) => value.replace(/\\/g, "\\\\").replace(/\n/g, "\\n")
const sanitizeName = (name: string) => name.replace(/[^a-zA-Z0-9_:]/g, "_")

const labels = (pairs: ReadonlyArray<readonly [string, string]>) =>
  pairs.length === 0 ? "" : `{${pairs.map(([k, v]) => `${sanitizeName(k)}="${escapeLabel(v)}"`).join(",")}}`

const number = (n: number | bigint) =>
  typeof n === "bigint"
    ? n.toString()
    : Number.isNaN(n)
      ? "NaN"
      : n === Number.POSITIVE_INFINITY
        ? "+Inf"
        : n === Number.NEGATIVE_INFINITY
          ? "-Inf"
          : String(n)

/** The registry's `ctxo_*` metrics in the text exposition format 0.0.4. */
export const renderPrometheus = (
  pairs: ReadonlyArray<{
    readonly metricKey: {
      readonly name: string
      readonly description: Option.Option<string>
      readonly tags: ReadonlyArray<{ readonly key: string; readonly value: string }>
    }
    readonly metricState: unknown
  }>
): string => {
  const families = new Map<string, { type: string; help: string; lines: Array<string> }>()
  const sorted = [...pairs]
    .filter((p) => p.metricKey.name.startsWith("ctxo_"))
    .sort((a, b) => (a.metricKey.name < b.metricKey.name ? -1 : a.metricKey.name > b.metricKey.name ? 1 : 0))
  for (const { metricKey, metricState } of sorted) {
    const name = sanitizeName(metricKey.name)
    const tags = [...metricKey.tags]
      .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))
      .map((t) => [t.key, t.value] as const)
    const type = MetricState.isCounterState(metricState)
      ? "counter"
      : MetricState.isGaugeState(metricState)
        ? "gauge"
        : MetricState.isHistogramState(metricState)
          ? "histogram"
          : undefined
    if (type === undefined) continue
    let family = families.get(name)
    if (family === undefined) {
      family = { type, help: Option.getOrElse(metricKey.description, () => name), lines: [] }
      families.set(name, family)
    }
    if (MetricState.isCounterState(metricState))
      family.lines.push(`${name}${labels(tags)} ${number(metricState.count)}`)
    else if (MetricState.isGaugeState(metricState))
      family.lines.push(`${name}${labels(tags)} ${number(metricState.value)}`)
    else if (MetricState.isHistogramState(metricState)) {
      for (const [boundary, count] of metricState.buckets)
        family.lines.push(`${name}_bucket${labels([...tags, ["le", number(boundary)]])} ${number(count)}`)
      family.lines.push(`${name}_sum${labels(tags)} ${number(metricState.sum)}`)
      family.lines.push(`${name}_count${labels(tags)} ${number(metricState.count)}`)
    }
  }
  const out: Array<string> = []
  for (const [name, family] of families)
    out.push(`# HELP ${name} ${escapeHelp(family.help)}`, `# TYPE ${name} ${family.type}`, ...family.lines)
  return `${out.join("\n")}\n`
}

export const CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

/** A V8 heap space as Prometheus' Node.js clients label it (`old_space` is "old"). */
const spaceLabel = (name: string) => name.replace(/_space$/, "")

/**
 * The process's memory now, under the names Prometheus' Node.js clients use: resident set, the
 * JavaScript heap (its size and what is in use), memory outside it (buffers, WASM), and the heap by
 * space (V8's young and old generations, code, large objects): a heap whose old space keeps its
 * size while its use stays level is V8's free room inside pages, not data kept.
 */
export const processMemory = (
  usage: NodeJS.MemoryUsage = process.memoryUsage(),
  spaces: ReadonlyArray<{
    readonly space_name: string
    readonly space_size: number
    readonly space_used_size: number
    readonly space_available_size: number
  }> = getHeapSpaceStatistics()
): string => {
  const bySpace = (of: (s: (typeof spaces)[number]) => number) =>
    spaces.map((s) => [[["space", spaceLabel(s.space_name)]], of(s)] as const)
  return [
    family("process_resident_memory_bytes", "Resident memory size in bytes.", "gauge", usage.rss),
    family(
      "nodejs_heap_size_total_bytes",
      "Process heap size from Node.js in bytes.",
      "gauge",
      usage.heapTotal
    ),
    family(
      "nodejs_heap_size_used_bytes",
      "Process heap size used from Node.js in bytes.",
      "gauge",
      usage.heapUsed
    ),
    family("nodejs_external_memory_bytes", "Node.js external memory size in bytes.", "gauge", usage.external),
    family(
      "nodejs_heap_space_size_total_bytes",
      "Process heap space size total from Node.js in bytes.",
      "gauge",
      bySpace((s) => s.space_size)
    ),
    family(
      "nodejs_heap_space_size_used_bytes",
      "Process heap space size used from Node.js in bytes.",
      "gauge",
      bySpace((s) => s.space_used_size)
    ),
    family(
      "nodejs_heap_space_size_available_bytes",
      "Process heap space size available from Node.js in bytes.",
      "gauge",
      bySpace((s) => s.space_available_size)
    )
  ].join("")
}

/** One family outside the registry in the text format: a value, or values by labels. */
const family = (
  name: string,
  help: string,
  type: "gauge" | "counter",
  samples: number | ReadonlyArray<readonly [ReadonlyArray<readonly [string, string]>, number]>
) => {
  const rows = typeof samples === "number" ? [[[], samples] as const] : samples
  const lines = rows.map(([pairs, value]) => `${name}${labels(pairs)} ${number(value)}\n`).join("")
  return `# HELP ${name} ${escapeHelp(help)}\n# TYPE ${name} ${type}\n${lines}`
}

/** A scrape: every `ctxo_*` metric now (the turn counters listed from zero), then the process's memory. */
export const scrape = Effect.gen(function* () {
  // Listed before their first increment, so a dashboard sees 0 rather than no series.
  yield* Metric.value(compactionsTotal)
  yield* Metric.value(refusalsTotal)
  const cache = yield* Effect.serviceOption(SessionCache.SessionCache)
  return (
    renderPrometheus(yield* Metric.snapshot) +
    processMemory() +
    (Option.isSome(cache) ? sessionCacheMetrics(cache.value.stats()) : "")
  )
})

/** The session cache now: what its sessions weigh against its budget, and how many it let go. */
export const sessionCacheMetrics = (stats: SessionCache.Stats): string =>
  [
    family(
      "ctxo_session_cache_bytes",
      "What the sessions kept between requests weigh (three times their history's text in each holder; the files read and memory.json their own size).",
      "gauge",
      stats.bytes
    ),
    family(
      "ctxo_session_cache_max_bytes",
      "The session cache's budget (CTXO_SESSION_CACHE_MB).",
      "gauge",
      stats.maxBytes
    ),
    family("ctxo_session_cache_sessions", "Sessions kept between requests.", "gauge", stats.sessions),
    family(
      "ctxo_session_cache_evictions_total",
      "Sessions let go for the budget (read again when asked), those new to the cache and not admitted included.",
      "counter",
      stats.evicted
    ),
    family(
      "ctxo_session_cache_rejections_total",
      "Sessions new to the cache let go without being admitted: asked for no more often lately than the session they would have pushed out.",
      "counter",
      stats.rejected
    ),
    family(
      "ctxo_session_cache_entries",
      "Sessions kept between requests, by holder (every tenant's together).",
      "gauge",
      Object.entries(stats.holders).map(([holder, count]) => [[["holder", holder]], count] as const)
    ),
    family(
      "ctxo_session_cache_lookups_total",
      "Lookups of a session's value, by holder and whether it was kept (hit) or is read again (miss).",
      "counter",
      Object.entries(stats.lookups).flatMap(([holder, { hits, misses }]) => [
        [
          [
            ["holder", holder],
            ["result", "hit"]
          ],
          hits
        ] as const,
        [
          [
            ["holder", holder],
            ["result", "miss"]
          ],
          misses
        ] as const
      ])
    )
  ].join("")
