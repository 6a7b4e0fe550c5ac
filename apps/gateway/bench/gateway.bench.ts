/**
 * What the gateway adds to a model call, side by side in one run against the same fake upstream
 * (an OpenAI-compatible server in this process that answers at once):
 *   baseline:  POST /v1/chat/completions to the fake upstream directly;
 *   proxy:     the same request through the gateway without a session (fitted, forwarded);
 *   session:   through the gateway with X-Ctxo-Session (record the input, compile the session's
 *              context, forward, record the answer);
 * each non-streaming and streaming. Reports p50 and p99 latency added over the baseline, and
 * requests per second with 8 in flight, on this machine.
 */
import { cpSync, mkdtempSync, rmSync } from "node:fs"
import { availableParallelism, tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { startFakeUpstream } from "@ctxo/agent/FakeUpstream"
import * as HttpServer from "@effect/platform/HttpServer"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { Layer, Logger, LogLevel, ManagedRuntime, Option } from "effect"
import * as GatewayConfig from "../src/GatewayConfig.ts"
import { app } from "../src/Server.ts"

const rounds = Number(process.env.CTXO_BENCH_ROUNDS ?? 5)
const sequential = rounds * 40
const concurrentTotal = rounds * 40
const inFlight = 8

const dataDir = mkdtempSync(join(tmpdir(), "ctxo-gateway-bench-"))
// Removed however the run ends (done, failed, or process.exit).
process.on("exit", () => rmSync(dataDir, { recursive: true, force: true }))
cpSync(fileURLToPath(new URL("../../../fixtures/data", import.meta.url)), dataDir, { recursive: true })
const upstream = await startFakeUpstream()
const runtime = ManagedRuntime.make(
  app.pipe(
    Layer.provide(GatewayConfig.layerTest({ dataDir, upstreamBaseUrl: Option.some(upstream.url) })),
    Layer.provideMerge(NodeHttpServer.layerTest),
    Layer.provide(Logger.minimumLogLevel(LogLevel.Warning))
  )
)
const address = (await runtime.runPromise(HttpServer.HttpServer)).address
const gateway = `http://127.0.0.1:${address._tag === "TcpAddress" ? address.port : 0}/v1`

const body = (stream: boolean) =>
  JSON.stringify({
    model: "gpt-4o",
    stream,
    messages: [
      { role: "system", content: "Be brief." },
      { role: "user", content: "What is a token budget?" }
    ]
  })
const call = async (base: string, stream: boolean, session?: string) => {
  const response = await fetch(`${base}/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...(session ? { "x-ctxo-session": session } : {}) },
    body: body(stream)
  })
  const text = await response.text()
  if (!response.ok) throw new Error(`${response.status} ${text.slice(0, 200)}`)
}
const quantile = (sorted: ReadonlyArray<number>, q: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!
const latencies = async (f: () => Promise<void>) => {
  for (let i = 0; i < 10; i++) await f()
  const out: Array<number> = []
  for (let i = 0; i < sequential; i++) {
    const start = performance.now()
    await f()
    out.push(performance.now() - start)
  }
  return out.sort((a, b) => a - b)
}
const throughput = async (f: () => Promise<void>) => {
  let next = 0
  const start = performance.now()
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next++ < concurrentTotal) await f()
    })
  )
  return concurrentTotal / ((performance.now() - start) / 1000)
}

await fetch(`${gateway.replace(/\/v1$/, "")}/api/sessions`, {
  method: "POST",
  headers: { "content-type": "application/json" },
  body: JSON.stringify({ id: "bench", concept: "benchmark" })
})
const cases = [
  { name: "baseline (upstream directly)", run: (s: boolean) => () => call(upstream.url, s) },
  { name: "gateway proxy (no session)", run: (s: boolean) => () => call(gateway, s) },
  { name: "gateway session (compile + record)", run: (s: boolean) => () => call(gateway, s, "bench") }
]
console.log(
  `${sequential} sequential requests per case for latency, ${concurrentTotal} with ${inFlight} in flight for throughput; ${availableParallelism()} CPUs`
)
for (const stream of [false, true]) {
  const base = await latencies(cases[0]!.run(stream))
  const baseRps = await throughput(cases[0]!.run(stream))
  for (const c of cases) {
    const first = c === cases[0]
    const lat = first ? base : await latencies(c.run(stream))
    const rps = first ? baseRps : await throughput(c.run(stream))
    const added = first
      ? ""
      : `, added p50 ${(quantile(lat, 0.5) - quantile(base, 0.5)).toFixed(2)} ms, p99 ${(quantile(lat, 0.99) - quantile(base, 0.99)).toFixed(2)} ms`
    console.log(
      `${stream ? "stream" : "json  "} ${c.name.padEnd(36)} p50 ${quantile(lat, 0.5).toFixed(2)} ms, p99 ${quantile(lat, 0.99).toFixed(2)} ms${added}; ${rps.toFixed(0)} req/s (${(rps / baseRps).toFixed(2)}x the baseline)`
    )
  }
}
await runtime.dispose()
await upstream.close()
