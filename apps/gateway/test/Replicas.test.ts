/**
 * Two gateway processes on one PostgreSQL database (`CTXO_DATABASE_URL`), as a deployment runs
 * replicas behind a load balancer: they start together (one migrates and seeds, the other finds it
 * done), 50 chats sent at once to one session, spread over both, run one turn at a time (the turn
 * lock is held across the processes): every message is in the history once, every turn whole and
 * in order. Then one replica is killed with SIGKILL while chats run on both: nothing acknowledged
 * is lost, and a chat the dead replica did not finish is finished by the other when the client
 * sends it again with its idempotency key. The database is the run's own (`TestDatabase`).
 */
import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as TestDatabase from "@ctxo/store-pg/TestDatabase"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ensureBuilt, outfile } from "../build.mjs"
import { freePort } from "./spawned.ts"

let database: TestDatabase.TestDatabase
const children: Array<ChildProcess> = []
const folders: Array<string> = []
beforeAll(async () => {
  // The replicas run the bundle `pnpm start` runs (built again when a source changed).
  await ensureBuilt()
  database = await TestDatabase.create()
})
afterAll(async () => {
  await Promise.all(
    children.map((c) => {
      if (c.exitCode !== null || c.signalCode !== null) return Promise.resolve()
      const exited = new Promise((r) => c.once("exit", r))
      c.kill("SIGKILL")
      return exited
    })
  )
  for (const folder of folders) rmSync(folder, { recursive: true, force: true })
  await database?.drop()
})

/** A gateway process on the test database (its data folder only names its data root). */
const replica = async () => {
  const port = await freePort()
  const dataDir = mkdtempSync(join(tmpdir(), "ctxo-replica-"))
  folders.push(dataDir)
  const child = spawn(process.execPath, [outfile], {
    env: {
      ...process.env,
      PORT: String(port),
      CTXO_DATA_DIR: dataDir,
      CTXO_DATABASE_URL: database.url,
      CTXO_DATABASE_POOL_SIZE: "4",
      CTXO_DATABASE_LOCK_CONNECTIONS: "4",
      CTXO_UPSTREAM_API_KEY: "",
      CTXO_LOG_FORMAT: "json"
    },
    stdio: ["ignore", "pipe", "pipe"]
  })
  children.push(child)
  let log = ""
  child.stdout?.on("data", (d) => (log += d))
  child.stderr?.on("data", (d) => (log += d))
  const base = `http://127.0.0.1:${port}`
  for (let i = 0; i < 600; i++) {
    if (child.exitCode !== null) break
    const ok = await fetch(`${base}/readyz`, { signal: AbortSignal.timeout(2000) }).then(
      (r) => r.ok,
      () => false
    )
    if (ok) return { child, base, log: () => log }
    await new Promise((r) => setTimeout(r, 100))
  }
  throw new Error(`the replica did not start:\n${log}`)
}

/** One chat: whether it was acknowledged (its stream ended with `done`). */
const chat = async (base: string, sessionId: string, message: string, key: string) => {
  const response = await fetch(`${base}/api/sessions/${sessionId}/chat`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ message, idempotencyKey: key })
  }).catch(() => undefined)
  const text = response === undefined ? "" : await response.text().catch(() => "")
  return text.includes("event: done")
}

interface Message {
  readonly role: string
  readonly parts: ReadonlyArray<{ readonly _tag: string; readonly text?: string }>
  readonly meta: { readonly turn: number; readonly kind?: string; readonly inputKey?: string }
}

/** The session's history as a replica reads it. */
const historyOf = async (base: string, sessionId: string) => {
  const response = await fetch(`${base}/api/sessions/${sessionId}/file?path=messages.json`)
  expect(response.status).toBe(200)
  const file = (await response.json()) as { readonly content: string }
  return (JSON.parse(file.content) as { readonly messages: ReadonlyArray<Message> }).messages
}

/** Every turn whole (its input first, its answer last, nothing of another turn between) and numbered in order. */
const expectWholeTurns = (messages: ReadonlyArray<Message>) => {
  const turns: Array<{ turn: number; messages: Array<Message> }> = []
  for (const m of messages) {
    const last = turns.at(-1)
    if (last?.turn === m.meta.turn) last.messages.push(m)
    else turns.push({ turn: m.meta.turn, messages: [m] })
  }
  expect(turns.map((t) => t.turn)).toEqual(turns.map((_, i) => i + 1))
  for (const t of turns) {
    expect(t.messages[0]!.meta.kind, `turn ${t.turn} starts with its input`).toBe("input")
    expect(t.messages.at(-1)!.meta.kind, `turn ${t.turn} ends with its answer`).toBe("final")
    expect(t.messages.filter((m) => m.meta.kind === "input")).toHaveLength(1)
    expect(t.messages.filter((m) => m.meta.kind === "final")).toHaveLength(1)
  }
  return turns
}

const inputs = (messages: ReadonlyArray<Message>) =>
  messages.filter((m) => m.meta.kind === "input").map((m) => m.parts.map((p) => p.text ?? "").join(""))

describe("two replicas on one database", () => {
  it("run 50 concurrent chats of one session one turn at a time, and lose nothing acknowledged when one is killed", async () => {
    const [a, b] = await Promise.all([replica(), replica()])
    // Started together: the example data was seeded once, not twice.
    const sessions = (await (await fetch(`${b.base}/api/sessions`)).json()) as ReadonlyArray<{ id: string }>
    expect(sessions.map((s) => s.id).sort()).toEqual(["code-agent-auth", "notebook-physics"])
    const created = await fetch(`${a.base}/api/sessions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ id: "shared", concept: "two replicas" })
    })
    expect(created.status).toBe(201)

    // 50 chats at once, every other one to each replica.
    const first = Array.from({ length: 50 }, (_, i) => `message ${i}`)
    const done = await Promise.all(
      first.map((m, i) => chat(i % 2 === 0 ? a.base : b.base, "shared", m, `k-${i}`))
    )
    expect(done.every(Boolean)).toBe(true)
    const before = await historyOf(a.base, "shared")
    expect(inputs(before).sort()).toEqual([...first].sort())
    expect(expectWholeTurns(before)).toHaveLength(50)
    // The other replica reads the same history.
    expect(await historyOf(b.base, "shared")).toEqual(before)

    // Chats on both replicas; replica A is killed once some are acknowledged.
    const second = Array.from({ length: 30 }, (_, i) => `after ${i}`)
    const acknowledged = new Set<string>()
    const running = second.map(async (m, i) => {
      const ok = await chat(i % 2 === 0 ? a.base : b.base, "shared", m, `k2-${i}`)
      if (ok) acknowledged.add(m)
      return ok
    })
    const deadline = Date.now() + 20_000
    while (acknowledged.size < 6 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10))
    const exited = new Promise((r) => a.child.once("exit", r))
    a.child.kill("SIGKILL")
    await exited
    const results = await Promise.all(running)
    expect(acknowledged.size).toBeGreaterThanOrEqual(6)
    // Some of A's chats were cut off: the client sends them again, to the replica that is left.
    const cut = second.filter((_, i) => !results[i])
    expect(cut.length).toBeGreaterThan(0)
    for (const m of cut) expect(await chat(b.base, "shared", m, `k2-${second.indexOf(m)}`)).toBe(true)
    const after = await historyOf(b.base, "shared")
    // Nothing acknowledged is lost, nothing is there twice, every turn is whole.
    expect(inputs(after).sort()).toEqual([...first, ...second].sort())
    for (const m of acknowledged) expect(inputs(after)).toContain(m)
    expect(expectWholeTurns(after)).toHaveLength(80)
    expect(after.slice(0, before.length)).toEqual(before)
  })
})
