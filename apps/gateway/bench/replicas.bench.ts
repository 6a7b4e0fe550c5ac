/**
 * Session turns per second, side by side in one run: the gateway on the file store (one process,
 * as `pnpm start` runs it), on PostgreSQL with one replica, and on PostgreSQL with two replicas
 * (each client's turns spread over both, round robin), on this machine. Every gateway is its own
 * process running the bundle, answering with its local deterministic model (the same for all), and
 * the database is a new one on the PostgreSQL the tests use (`TestDatabase`), dropped at the end.
 *
 * A round is 8 sessions with one client each, every client sending its turns one after the other
 * (a turn waits for the previous one's answer, as a chat does), `TURNS` turns each; the clients
 * run at once. The first round warms up and is not counted; the median of `CTXO_BENCH_ROUNDS`
 * rounds (default 5) is printed per case, with its ratio to the file store.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { cpSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import * as TestDatabase from "@ctxo/store-pg/TestDatabase"
import { Agent, request } from "undici"
import { ensureBuilt, outfile } from "../build.mjs"
import { freePort } from "../test/spawned.ts"

const rounds = Number(process.env.CTXO_BENCH_ROUNDS ?? 5)
const SESSIONS = 8
const TURNS = 6
const example = fileURLToPath(new URL("../../../fixtures/data", import.meta.url))

const folders: Array<string> = []
const children: Array<ChildProcess> = []
const stopAll = () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL")
  for (const f of folders) rmSync(f, { recursive: true, force: true })
}
process.on("exit", stopAll)

const dispatcher = new Agent({ connections: 64, keepAliveTimeout: 60_000 })

/** A gateway process (the bundle) on `env`; resolves with its URL once it is ready. */
const gateway = async (env: Record<string, string>) => {
  const port = await freePort()
  const dataDir = mkdtempSync(join(tmpdir(), "ctxo-replicas-bench-"))
  folders.push(dataDir)
  cpSync(example, dataDir, { recursive: true })
  const child = spawn(process.execPath, [outfile], {
    env: {
      ...process.env,
      PORT: String(port),
      CTXO_DATA_DIR: dataDir,
      CTXO_UPSTREAM_API_KEY: "",
      CTXO_LOG_FORMAT: "json",
      ...env
    },
    stdio: ["ignore", "ignore", "inherit"]
  })
  children.push(child)
  const base = `http://127.0.0.1:${port}`
  for (let i = 0; i < 600; i++) {
    const ok = await fetch(`${base}/readyz`, { signal: AbortSignal.timeout(2000) }).then(
      (r) => r.ok,
      () => false
    )
    if (ok) return { base, child }
    await new Promise((r) => setTimeout(r, 100))
  }
  throw new Error("a gateway did not start")
}

const post = async (url: string, body: unknown) => {
  const response = await request(url, {
    method: "POST",
    dispatcher,
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body)
  })
  const text = await response.body.text()
  if (response.statusCode >= 300 || (url.endsWith("/chat") && !text.includes("event: done")))
    throw new Error(`${url}: ${response.statusCode} ${text.slice(0, 200)}`)
}

/** One round: every session's client sends its turns in order; the turns per second of the round. */
const round = async (bases: ReadonlyArray<string>, label: string, n: number) => {
  const started = performance.now()
  let request = 0
  await Promise.all(
    Array.from({ length: SESSIONS }, async (_, s) => {
      for (let t = 0; t < TURNS; t++) {
        const base = bases[request++ % bases.length]!
        await post(`${base}/api/sessions/bench-${s}/chat`, { message: `${label} round ${n} turn ${t}` })
      }
    })
  )
  return (SESSIONS * TURNS) / ((performance.now() - started) / 1000)
}

const median = (xs: ReadonlyArray<number>) => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.floor(s.length / 2)]!
}

/** The turns per second of a case: its sessions made, a warm-up round, then `rounds` measured. */
const measure = async (label: string, bases: ReadonlyArray<string>) => {
  for (let s = 0; s < SESSIONS; s++)
    await post(`${bases[0]}/api/sessions`, { id: `bench-${s}`, concept: "bench" })
  await round(bases, label, 0)
  const rates: Array<number> = []
  for (let n = 1; n <= rounds; n++) rates.push(await round(bases, label, n))
  return median(rates)
}

const stop = async (child: ChildProcess) => {
  const exited = new Promise((r) => child.once("exit", r))
  child.kill("SIGTERM")
  await exited
}

await ensureBuilt()
const database = await TestDatabase.create()
try {
  console.log(
    `session turns per second: ${SESSIONS} sessions, one client each, ${TURNS} turns per client per round, median of ${rounds} rounds (PostgreSQL from ${database.source})`
  )
  const files = await gateway({})
  const onFiles = await measure("files", [files.base])
  await stop(files.child)
  const pg = {
    CTXO_DATABASE_URL: database.url,
    CTXO_DATABASE_POOL_SIZE: "6",
    CTXO_DATABASE_LOCK_CONNECTIONS: "8"
  }
  const one = await gateway(pg)
  const onOne = await measure("one", [one.base])
  const two = await gateway(pg)
  // The same database: the second case's sessions are new ones (the first case's are dropped first).
  for (let s = 0; s < SESSIONS; s++)
    await request(`${one.base}/api/sessions/bench-${s}`, { method: "DELETE", dispatcher }).then((r) =>
      r.body.text()
    )
  const onTwo = await measure("two", [one.base, two.base])
  const row = (name: string, rate: number) =>
    console.log(
      `${name.padEnd(32)} ${rate.toFixed(1).padStart(7)} turns/s  ${(rate / onFiles).toFixed(2)}x the file store`
    )
  row("file store, 1 process", onFiles)
  row("PostgreSQL, 1 replica", onOne)
  row("PostgreSQL, 2 replicas", onTwo)
  console.log(`2 replicas against 1 on PostgreSQL: ${(onTwo / onOne).toFixed(2)}x`)
} finally {
  stopAll()
  await dispatcher.close()
  await database.drop()
}
