/**
 * What the gateway adds to a model call, side by side in one run. Every server is a process of its
 * own, as in a deployment: the fake upstream (an OpenAI-compatible model answering at once), the
 * floor (a bare Node pass-through proxy: node:http in, an undici pool out, no parsing), and the
 * gateway as `pnpm start` runs it. This process only sends requests (an undici keep-alive pool).
 *
 * Rows, JSON and streaming:
 * - direct: the request to the upstream itself (the baseline);
 * - floor, gateway proxy (no session): latency added over direct (p50 and p99 over direct's p50, as
 *   in every row: `addedOver`), the gateway's against the floor's, and requests per second with 8
 *   and 64 in flight against direct and against the floor's (the three in turn, round after round:
 *   the median of each round's ratio);
 * - gateway session (a warm session of 200 turns; input recorded, context compiled, answer
 *   recorded): latency added over direct, and over the same request (the session's compiled one,
 *   a few hundred messages) sent direct, as a client holding its own history would send it. Timed
 *   after `STEADY` turns of another session, as the other rows after `STEADY` untimed calls: a
 *   gateway that runs for days has its session code optimized, where one that served 200 turns in
 *   its life still compiles it (V8's optimizing compiler and the collector then take about as much
 *   of the second CPU as the turn takes of the first). That session's turns at the same length
 *   are timed too and printed beside (in the JSON row, the process's first session's: what the
 *   row measured before; the streamed row runs after the JSON row's turns);
 * - memory: the gateway's RSS after 10,000 mixed requests over 1,000 sessions against after the
 *   first 1,000;
 * - cold start: spawning the gateway (`pnpm start`, built) until its first compile is answered;
 *   `ctxo compile` on the example data end to end (the bin, `pnpm ctxo`'s launcher, and the
 *   sources through tsx).
 *
 * `CTXO_BENCH_ROUNDS` (default 5) scales the number of requests; under 5 the memory row runs a
 * fifth of its requests and sessions (a smoke run says so).
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import { cpSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { availableParallelism, tmpdir } from "node:os"
import { join } from "node:path"
import { createInterface } from "node:readline"
import { fileURLToPath } from "node:url"
import { Agent, request } from "undici"
import { ensureBuilt as ensureCliBuilt } from "../../cli/build.mjs"
import { ensureBuilt } from "../build.mjs"
import { freePort } from "../test/spawned.ts"

const rounds = Number(process.env.CTXO_BENCH_ROUNDS ?? 5)
const sequential = rounds * 40
/** Requests of one throughput run, and how many rounds of runs (direct, floor, gateway in turn). */
const concurrentTotal = 400
const throughputRounds = Math.max(3, rounds)
const gatewayDir = fileURLToPath(new URL("..", import.meta.url))
const repoRoot = fileURLToPath(new URL("../../..", import.meta.url))

const folders: Array<string> = []
const children: Array<ChildProcess> = []
process.on("exit", () => {
  for (const c of children) if (c.exitCode === null) c.kill("SIGKILL")
  for (const f of folders) rmSync(f, { recursive: true, force: true })
})
const dataRoot = () => {
  const dir = mkdtempSync(join(tmpdir(), "ctxo-gateway-bench-"))
  folders.push(dir)
  cpSync(join(repoRoot, "fixtures/data"), dir, { recursive: true })
  return dir
}

/**
 * A child process running a TypeScript file of this package, with its `ready <url>` line and the
 * `<name> <value>` lines it printed before it.
 */
const startScript = (file: string, env: Record<string, string> = {}) =>
  new Promise<{ child: ChildProcess; url: string; said: ReadonlyMap<string, string> }>((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx/esm", file], {
      cwd: gatewayDir,
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "inherit"]
    })
    children.push(child)
    child.once("exit", (code) => reject(new Error(`${file} exited (${code}) before it was ready`)))
    const said = new Map<string, string>()
    createInterface({ input: child.stdout! }).on("line", (line) => {
      const space = line.indexOf(" ")
      if (space > 0) said.set(line.slice(0, space), line.slice(space + 1))
      if (line.startsWith("ready ")) resolve({ child, url: line.slice(6), said })
    })
  })

const dispatcher = new Agent({ connections: 128, keepAliveTimeout: 60_000 })

/** The gateway as `pnpm start` runs it (its bundle), on a copy of the example data; resolves when it answers. */
const startGateway = async (upstream: string) => {
  const port = await freePort()
  const started = performance.now()
  const child = spawn(process.execPath, ["start.mjs"], {
    cwd: gatewayDir,
    env: {
      ...process.env,
      PORT: String(port),
      CTXO_DATA_DIR: dataRoot(),
      CTXO_UPSTREAM_BASE_URL: upstream,
      CTXO_UPSTREAM_API_KEY: "",
      CTXO_LOG_FORMAT: "json"
    },
    stdio: ["ignore", "ignore", "inherit"]
  })
  children.push(child)
  const base = `http://127.0.0.1:${port}`
  for (;;) {
    if (child.exitCode !== null) throw new Error(`the gateway exited (${child.exitCode})`)
    const ok = await request(`${base}/readyz`, { dispatcher }).then(
      async (r) => {
        await r.body.text()
        return r.statusCode === 200
      },
      () => false
    )
    if (ok) break
    await new Promise((r) => setTimeout(r, 10))
  }
  const ready = performance.now() - started
  const preview = await request(`${base}/api/sessions/code-agent-auth/context-preview`, { dispatcher })
  await preview.body.text()
  if (preview.statusCode !== 200) throw new Error(`first compile answered ${preview.statusCode}`)
  return { child, base, ready, firstCompile: performance.now() - started }
}

const stop = (child: ChildProcess) =>
  new Promise<void>((resolve) => {
    if (child.exitCode !== null) return resolve()
    child.once("exit", () => resolve())
    child.kill("SIGTERM")
  })

const body = (stream: boolean, text = "What is a token budget?") =>
  JSON.stringify({ model: "gpt-4o", stream, messages: [{ role: "user", content: text }] })

const call = async (base: string, stream: boolean, session?: string, text?: string) => {
  const r = await request(`${base}/chat/completions`, {
    method: "POST",
    dispatcher,
    headers: { "content-type": "application/json", ...(session ? { "x-ctxo-session": session } : {}) },
    body: body(stream, text)
  })
  const answer = await r.body.text()
  if (r.statusCode !== 200) throw new Error(`${r.statusCode} ${answer.slice(0, 200)}`)
}

/** Untimed calls before a steady-state row (V8 optimizes the gateway's code over the first hundreds). */
const STEADY = 500
const quantile = (sorted: ReadonlyArray<number>, q: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!
/**
 * `count` timed calls after `warm` untimed ones. The rows of a server that runs for days (direct,
 * the floor, the gateway's proxy and session) are timed once each server's code is optimized:
 * `STEADY` calls first (the session row: `STEADY` turns). How a server starts is the cold-start
 * row's.
 */
const latencies = async (count: number, f: () => Promise<void>, warm = 20) => {
  for (let i = 0; i < warm; i++) await f()
  const out: Array<number> = []
  for (let i = 0; i < count; i++) {
    const start = performance.now()
    await f()
    out.push(performance.now() - start)
  }
  return out.sort((a, b) => a - b)
}
const throughput = async (inFlight: number, f: () => Promise<void>) => {
  let next = 0
  const start = performance.now()
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next++ < concurrentTotal) await f()
    })
  )
  return concurrentTotal / ((performance.now() - start) / 1000)
}
const ms = (n: number) => `${n.toFixed(2)} ms`
const rssOf = (pid: number) => {
  const line = readFileSync(`/proc/${pid}/status`, "utf8")
    .split("\n")
    .find((l) => l.startsWith("VmRSS:"))
  return Number(line?.match(/\d+/)?.[0] ?? 0) / 1024
}

// Built once before anything is timed (`pnpm start` builds when the sources changed).
if (await ensureBuilt()) console.log("gateway bench: the gateway's bundle was built first")
const upstream = await startScript("bench/upstream.ts")
const floor = await startScript("bench/floor.ts", { UPSTREAM_URL: upstream.url })
const gateway = await startGateway(upstream.url)
const v1 = `${gateway.base}/v1`
console.log(
  `gateway bench: ${sequential} sequential requests per case for latency, ${concurrentTotal} for each throughput run, ${throughputRounds} rounds of them; ${availableParallelism()} CPUs, Node ${process.version}`
)

const createSession = async (base: string, id: string) => {
  const r = await request(`${base}/api/sessions`, {
    method: "POST",
    dispatcher,
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ id, concept: "benchmark" })
  })
  await r.body.text()
  if (r.statusCode >= 300) throw new Error(`creating session ${id}: ${r.statusCode}`)
}

/**
 * What `lat` adds over `base`: at p50 the medians' difference; at p99 `lat`'s p99 over `base`'s
 * median (the slowest requests against a typical one: the difference of two p99s, each the second
 * slowest of 200 or the slowest of 50 requests, came out below zero whenever the baseline met a
 * slow moment of the machine the other did not).
 */
const addedOver = (lat: ReadonlyArray<number>, base: ReadonlyArray<number>) => ({
  p50: quantile(lat, 0.5) - quantile(base, 0.5),
  p99: quantile(lat, 0.99) - quantile(base, 0.5)
})

/** The median of a list of numbers. */
const median = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

for (const stream of [false, true]) {
  const kind = stream ? "stream" : "json  "
  const direct = await latencies(sequential, () => call(upstream.url, stream), STEADY)
  const added = (lat: ReadonlyArray<number>) => addedOver(lat, direct)
  const floorLat = await latencies(sequential, () => call(floor.url, stream), STEADY)
  const proxyLat = await latencies(sequential, () => call(v1, stream), STEADY)
  // Throughput: the three servers in turn, round after round, so that each round's ratios compare
  // runs a second apart (this machine's speed drifts by 2x over minutes); the median of the rounds.
  const targets = [upstream.url, floor.url, v1] as const
  const rates = new Map<string, Array<ReadonlyArray<number>>>(
    targets.map((t) => [t, [] as Array<ReadonlyArray<number>>])
  )
  for (let r = 0; r < throughputRounds; r++)
    for (const target of targets)
      rates
        .get(target)!
        .push([
          await throughput(8, () => call(target, stream)),
          await throughput(64, () => call(target, stream))
        ])
  /** The median over the rounds of `of`'s rate against `to`'s, with `inFlight` 8 (0) or 64 (1). */
  const ratio = (of: string, to: string, i: 0 | 1) =>
    median(rates.get(of)!.map((rps, r) => rps[i]! / rates.get(to)![r]![i]!))
  const directRps = [0, 1].map((i) => median(rates.get(upstream.url)!.map((rps) => rps[i]!)))
  console.log(
    `${kind} direct (upstream itself)        p50 ${ms(quantile(direct, 0.5))}, p99 ${ms(quantile(direct, 0.99))}; ${directRps[0]!.toFixed(0)} req/s with 8 in flight, ${directRps[1]!.toFixed(0)} with 64 (median of ${throughputRounds} rounds)`
  )
  const floorAdded = added(floorLat)
  console.log(
    `${kind} ${"floor (bare Node proxy)".padEnd(32)} added p50 ${ms(floorAdded.p50)}, p99 ${ms(floorAdded.p99)}; 8 in flight ${ratio(floor.url, upstream.url, 0).toFixed(2)}x direct, 64 in flight ${ratio(floor.url, upstream.url, 1).toFixed(2)}x direct`
  )
  const proxyAdded = added(proxyLat)
  console.log(
    `${kind} ${"gateway proxy (no session)".padEnd(32)} added p50 ${ms(proxyAdded.p50)} (${(proxyAdded.p50 / Math.max(floorAdded.p50, 0.001)).toFixed(1)}x the floor's), p99 ${ms(proxyAdded.p99)}; 8 in flight ${ratio(v1, upstream.url, 0).toFixed(2)}x direct (${ratio(v1, floor.url, 0).toFixed(2)}x the floor's), 64 in flight ${ratio(v1, upstream.url, 1).toFixed(2)}x direct (${ratio(v1, floor.url, 1).toFixed(2)}x the floor's)`
  )
  // The session code optimized first: a session of its own, `STEADY` turns, untimed but for the
  // same turns as below (in the JSON row, the process's first session's: what the row measured
  // before it warmed the code). Then a warm session of 200 turns, each measured request one more.
  const warmup = `bench-${stream ? "stream" : "json"}-code`
  await createSession(gateway.base, warmup)
  let warmTurn = 0
  const warmupTurn = () => call(v1, stream, warmup, `Turn ${warmTurn++}: what is a token budget?`)
  for (let i = 0; i < 200; i++) await warmupTurn()
  const timed = Math.max(20, rounds * 10)
  const warmupAtLength = added(await latencies(timed, warmupTurn))
  while (warmTurn < STEADY) await warmupTurn()
  // Gone before the row is timed: its history and caches do not weigh on the timed session's.
  const removed = await request(`${gateway.base}/api/sessions/${warmup}`, { method: "DELETE", dispatcher })
  await removed.body.text()
  if (removed.statusCode >= 300) throw new Error(`deleting session ${warmup}: ${removed.statusCode}`)
  const session = `bench-${stream ? "stream" : "json"}`
  await createSession(gateway.base, session)
  for (let i = 0; i < 200; i++) await call(v1, stream, session, `Turn ${i}: what is a token budget?`)
  let turn = 200
  /** When each turn was sent and its answer read whole (the monotonic clock the upstream notes on). */
  const stamps: Array<readonly [number, number]> = []
  const now = () => Number(process.hrtime.bigint()) / 1e6
  const lat = await latencies(timed, async () => {
    const sent = now()
    await call(v1, stream, session, `Turn ${turn++}: what is a token budget?`)
    stamps.push([sent, now()])
  })
  const a = added(lat)
  // Where the timed turns were when the upstream had read them (one upstream call a turn, the
  // turns one after another: the upstream's last reads are theirs).
  const split = await (async () => {
    try {
      const r = await request(upstream.said.get("reads") ?? "", { dispatcher })
      const text = await r.body.text()
      if (r.statusCode !== 200) return `; the upstream's reads could not be read (${r.statusCode})`
      const upstreamHad = (JSON.parse(text) as Array<number>).slice(-timed)
      const turnsTimed = stamps.slice(-timed)
      if (
        upstreamHad.length !== timed ||
        !turnsTimed.every(([sent, read], i) => sent <= upstreamHad[i]! && upstreamHad[i]! <= read)
      )
        return "; the upstream's reads did not match the turns"
      return `; the upstream had read and parsed the request ${ms(median(turnsTimed.map(([sent], i) => upstreamHad[i]! - sent)))} after the client sent it, the client had the answer ${ms(median(turnsTimed.map(([, read], i) => read - upstreamHad[i]!)))} after that (the upstream's work included; p50 each)`
    } catch (e) {
      return `; the upstream's reads could not be read (${e instanceof Error ? e.message : String(e)})`
    }
  })()
  // The same request straight to the upstream: what a client that sends the session's whole
  // history itself waits (the upstream reads and parses the longer body too, ctxo or not).
  const preview = await request(
    `${gateway.base}/api/sessions/${session}/context-preview?model=gpt-4o&query=${encodeURIComponent(`Turn ${turn}: what is a token budget?`)}`,
    { dispatcher }
  )
  const { request: compiled } = (await preview.body.json()) as {
    request: { messages: ReadonlyArray<unknown> }
  }
  const sameBody = JSON.stringify({ model: "gpt-4o", stream, messages: compiled.messages })
  const same = await latencies(Math.max(20, rounds * 10), async () => {
    const r = await request(`${upstream.url}/chat/completions`, {
      method: "POST",
      dispatcher,
      headers: { "content-type": "application/json" },
      body: sameBody
    })
    await r.body.text()
  })
  const overSame = addedOver(lat, same)
  console.log(
    `${kind} gateway session (200 turns, warm)  added p50 ${ms(a.p50)}, p99 ${ms(a.p99)} (record, compile, forward, record; ${turn} turns at the end; after ${warmTurn} turns of another session, deleted since; its turns 220-${219 + timed}, ${stream ? "after the JSON rows' turns" : "the process's first, the code less optimized"}, added p50 ${ms(warmupAtLength.p50)}, p99 ${ms(warmupAtLength.p99)}); over the same request sent direct (${compiled.messages.length} messages, ${(sameBody.length / 1024).toFixed(0)} KB, p50 ${ms(quantile(same, 0.5))}): p50 ${ms(overSame.p50)}, p99 ${ms(overSame.p99)}${split}`
  )
}

// Memory: mixed requests over many sessions on a fresh gateway.
{
  const smoke = rounds < 5
  const total = smoke ? 2_000 : 10_000
  const sessions = total / 10
  const fresh = await startGateway(upstream.url)
  const base = `${fresh.base}/v1`
  for (let s = 0; s < sessions; s++) await createSession(fresh.base, `m-${s}`)
  let next = 0
  const mixed = async (until: number) =>
    Promise.all(
      Array.from({ length: 8 }, async () => {
        while (next < until) {
          const i = next++
          const stream = i % 2 === 1
          await (i % 4 < 2 ? call(base, stream, `m-${i % sessions}`, `Question ${i}`) : call(base, stream))
        }
      })
    )
  /** The gateway's JavaScript heap (size and in use) and its session cache, from its /metrics. */
  const heapOf = async () => {
    const r = await request(`${fresh.base}/metrics`, { dispatcher })
    const text = await r.body.text()
    const value = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, "m").exec(text)?.[1] ?? 0)
    const gauge = (name: string) => value(name) / 1048576
    const lookups = (result: string) =>
      value(`ctxo_session_cache_lookups_total\\{holder="store history state",result="${result}"\\}`)
    return {
      total: gauge("nodejs_heap_size_total_bytes"),
      used: gauge("nodejs_heap_size_used_bytes"),
      old: `old space ${gauge('nodejs_heap_space_size_total_bytes\\{space="old"\\}').toFixed(0)} MB (${gauge('nodejs_heap_space_size_used_bytes\\{space="old"\\}').toFixed(0)} in use)`,
      cache: `session cache ${gauge("ctxo_session_cache_bytes").toFixed(1)} of ${gauge("ctxo_session_cache_max_bytes").toFixed(0)} MB, ${value("ctxo_session_cache_sessions")} sessions, ${value("ctxo_session_cache_evictions_total")} evicted (${value("ctxo_session_cache_rejections_total")} never admitted), the store's lookups ${lookups("hit")} found and ${lookups("miss")} read again`
    }
  }
  await mixed(total / 10)
  const first = rssOf(fresh.child.pid!)
  const firstHeap = await heapOf()
  await mixed(total)
  const last = rssOf(fresh.child.pid!)
  const lastHeap = await heapOf()
  console.log(
    `memory: RSS ${first.toFixed(0)} MB after ${total / 10} requests, ${last.toFixed(0)} MB after ${total} (${((last / first - 1) * 100).toFixed(1)}%); JS heap ${firstHeap.total.toFixed(0)} MB (${firstHeap.used.toFixed(0)} in use; ${firstHeap.old}) then ${lastHeap.total.toFixed(0)} MB (${lastHeap.used.toFixed(0)} in use; ${lastHeap.old}); ${firstHeap.cache}, then ${lastHeap.cache}; ${total} mixed requests over ${sessions} sessions, half in sessions${smoke ? "; smoke run: a fifth of 10,000 over 1,000" : ""}`
  )
  await stop(fresh.child)
}

// Cold start.
{
  const runs = 3
  const gatewayTimes: Array<{ ready: number; firstCompile: number }> = []
  for (let i = 0; i < runs; i++) {
    const g = await startGateway(upstream.url)
    gatewayTimes.push({ ready: g.ready, firstCompile: g.firstCompile })
    await stop(g.child)
  }
  console.log(
    `cold start: gateway ready ${ms(median(gatewayTimes.map((t) => t.ready)))}, first compile answered ${ms(median(gatewayTimes.map((t) => t.firstCompile)))} (median of ${runs})`
  )
  const data = dataRoot()
  const cli = join(repoRoot, "apps/cli/dist/ctxo.js")
  const timeCli = (args: ReadonlyArray<string>) =>
    median(
      Array.from({ length: runs }, () => {
        const start = performance.now()
        execFileSync(process.execPath, [...args, "compile", "--data", data, "--session", "code-agent-auth"], {
          cwd: repoRoot,
          stdio: "ignore"
        })
        return performance.now() - start
      })
    )
  await ensureCliBuilt()
  console.log(
    `cold start: ctxo compile on the example data ${ms(timeCli([cli]))} (the bin, dist/ctxo.js), ${ms(timeCli(["apps/cli/start.mjs"]))} (pnpm ctxo's launcher), ${ms(timeCli(["--import", "tsx/esm", "apps/cli/src/main.ts"]))} (from the sources through tsx) (median of ${runs})`
  )
}

await stop(gateway.child)
await stop(floor.child)
await stop(upstream.child)
await dispatcher.close()
