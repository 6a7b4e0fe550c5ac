import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync
} from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as SessionCache from "../src/SessionCache.ts"
import * as Store from "../src/Store.ts"

const temps: Array<string> = []
const tempDir = (prefix: string) => {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  temps.push(dir)
  return dir
}
afterAll(() => {
  for (const dir of temps) rmSync(dir, { recursive: true, force: true })
})

const withStore = <A, E>(f: (store: Store.Service, root: string) => Effect.Effect<A, E>) => {
  const root = tempDir("ctxo-store-")
  return Effect.runPromise(Effect.flatMap(Store.make(root), (store) => f(store, root)))
}
const flip = <A, E>(effect: Effect.Effect<A, E>) => Effect.flip(effect)

describe("Store", () => {
  it("creates, lists, reads and deletes thin session records", () =>
    withStore((store, root) =>
      Effect.gen(function* () {
        const a = yield* store.createSession({ id: "physics", concept: "Quantum notes" })
        yield* store.createSession({ concept: "generated id" })
        expect((yield* store.listSessions).map((s) => s.concept)).toEqual(["Quantum notes", "generated id"])
        expect(yield* store.getSession("physics")).toEqual(a)
        expect((yield* flip(store.createSession({ id: "physics", concept: "again" })))._tag).toBe(
          "SessionExists"
        )
        yield* store.deleteSession("physics")
        expect((yield* flip(store.getSession("physics")))._tag).toBe("SessionNotFound")
        expect(readdirSync(root).sort()).toEqual(expect.not.arrayContaining(["physics"]))
        expect(JSON.parse(readFileSync(join(root, "sessions.json"), "utf8"))).toHaveLength(1)
      })
    ))

  it("writes and reads files with versions, line ranges and If-Match", () =>
    withStore((store) =>
      Effect.gen(function* () {
        yield* store.createSession({ id: "s", concept: "" })
        const written = yield* store.writeFile("s", "notes/a.md", "one\ntwo\nthree\n", { ifMatch: "" })
        expect(written.version).toBe(Store.versionOf("one\ntwo\nthree\n"))
        const part = yield* store.readFile("s", "notes/a.md", { startLine: 2, endLine: 3 })
        expect(part).toMatchObject({ content: "two\nthree", startLine: 2, endLine: 3, totalLines: 3 })
        expect((yield* flip(store.readFile("s", "notes/a.md", { startLine: 5 })))._tag).toBe("InvalidRange")
        const edited = yield* store.writeFile("s", "notes/a.md", "TWO", {
          startLine: 2,
          endLine: 2,
          ifMatch: written.version
        })
        expect((yield* store.readFile("s", "notes/a.md")).content).toBe("one\nTWO\nthree\n")
        const stale = yield* flip(store.writeFile("s", "notes/a.md", "x", { ifMatch: written.version }))
        expect(stale).toMatchObject({
          _tag: "VersionConflict",
          expected: written.version,
          actual: edited.version
        })
        expect((yield* store.listFiles("s")).map((f) => f.path)).toEqual(["notes/a.md"])
        yield* store.deleteFile("s", "notes/a.md", edited.version)
        expect((yield* flip(store.readFile("s", "notes/a.md")))._tag).toBe("FileNotFound")
      })
    ))

  it("refuses paths out of the sandbox and the history file", () =>
    withStore((store, root) =>
      Effect.gen(function* () {
        yield* store.createSession({ id: "s", concept: "" })
        const outside = tempDir("ctxo-outside-")
        writeFileSync(join(outside, "secret.txt"), "token")
        symlinkSync(outside, join(root, "s", "link"))
        for (const bad of [
          "../sessions.json",
          "/etc/passwd",
          "a/../../b",
          "a\u0000b",
          "C:/x",
          "file:///etc/passwd",
          "link/secret.txt"
        ]) {
          const error = yield* flip(store.readFile("s", bad))
          expect([bad, error._tag]).toEqual([bad, "PathRefused"])
        }
        expect((yield* flip(store.writeFile("s", "link/new.txt", "x")))._tag).toBe("PathRefused")
        expect((yield* flip(store.writeFile("s", "messages.json", "[]")))._tag).toBe("PathRefused")
        expect((yield* flip(store.readFile("../s", "a.md")))._tag).toBe("PathRefused")
        expect(readdirSync(outside)).toEqual(["secret.txt"])
      })
    ))

  it("serializes concurrent writes to one file: it ends as one of them, whole, with no temp file left", () =>
    withStore((store, root) =>
      Effect.gen(function* () {
        yield* store.createSession({ id: "s", concept: "" })
        yield* store.writeFile("s", "empty.md", "")
        const bodies = Array.from({ length: 50 }, (_, i) => `writer ${i}\n${"x".repeat(10_000 + i)}\n`)
        yield* Effect.forEach(bodies, (body) => store.writeFile("s", "shared.md", body), {
          concurrency: "unbounded"
        })
        expect(bodies).toContain(readFileSync(join(root, "s", "shared.md"), "utf8"))
        expect(readdirSync(join(root, "s")).sort()).toEqual(["empty.md", "shared.md"])
      })
    ))

  it("keeps a session's state, its time and metadata across a new store on the same root", () =>
    withStore((store, root) =>
      Effect.gen(function* () {
        const created = yield* store.createSession({ id: "a", concept: "A", metadata: { team: "physics" } })
        expect(created).toMatchObject({ state: "active", metadata: { team: "physics" } })
        expect(created.stateChangedAt).toBe(created.createdAt)
        yield* Effect.sleep("5 millis")
        const paused = yield* store.updateSession("a", { state: "paused" })
        expect(paused.state).toBe("paused")
        expect(paused.stateChangedAt > created.stateChangedAt).toBe(true)
        // The same state again changes nothing, not even the time; metadata is replaced whole.
        const again = yield* store.updateSession("a", { state: "paused", metadata: { lead: "ada" } })
        expect(again.stateChangedAt).toBe(paused.stateChangedAt)
        const reopened = yield* Store.make(root)
        expect(yield* reopened.getSession("a")).toEqual({ ...paused, metadata: { lead: "ada" } })
        expect((yield* flip(reopened.updateSession("nope", { state: "ended" })))._tag).toBe("SessionNotFound")
      })
    ))

  it("reads an index written before lifecycle states as active sessions, and writes them whole", () =>
    withStore((store, root) =>
      Effect.gen(function* () {
        const old = [
          { id: "old", concept: "Written by an older ctxo", createdAt: "2026-01-01T00:00:00.000Z" }
        ]
        writeFileSync(join(root, "sessions.json"), JSON.stringify(old))
        mkdirSync(join(root, "old"))
        expect(yield* store.getSession("old")).toEqual({
          ...old[0],
          state: "active",
          stateChangedAt: "2026-01-01T00:00:00.000Z",
          metadata: {}
        })
        yield* store.createSession({ id: "new", concept: "" })
        const written = JSON.parse(readFileSync(join(root, "sessions.json"), "utf8"))
        expect(written[0]).toEqual({
          ...old[0],
          state: "active",
          stateChangedAt: old[0]!.createdAt,
          metadata: {}
        })
        expect((yield* store.listSessions).map((s) => s.state)).toEqual(["active", "active"])
      })
    ))

  it("keeps a session's tasks in tasks.json, names a broken one, and removes them with the session", () =>
    withStore((store, root) =>
      Effect.gen(function* () {
        yield* store.createSession({ id: "s", concept: "" })
        expect(yield* store.readTasks("s")).toEqual([])
        const task = {
          id: "t-1",
          title: "Read the paper",
          status: "pending" as const,
          createdAt: "2026-01-01T00:00:00.000Z",
          updatedAt: "2026-01-01T00:00:00.000Z",
          origin: { distributionId: "d-1" }
        }
        yield* store.writeTasks("s", [task])
        expect(yield* (yield* Store.make(root)).readTasks("s")).toEqual([task])
        expect((yield* flip(store.writeFile("s", "tasks.json", "[]", { actor: "model" })))._tag).toBe(
          "PathRefused"
        )
        writeFileSync(join(root, "s", "tasks.json"), JSON.stringify([{ ...task, status: "started" }]))
        const broken = yield* flip(store.readTasks("s"))
        expect(broken).toMatchObject({ _tag: "CorruptFile", path: "s/tasks.json" })
        expect(broken.message).toMatch(/^s\/tasks\.json cannot be read: \[0\]\.status: expected/)
        expect((yield* flip(store.readTasks("nope")))._tag).toBe("SessionNotFound")
        yield* store.deleteSession("s")
        expect((yield* flip(store.writeTasks("s", [task])))._tag).toBe("SessionNotFound")
        expect(readdirSync(root)).not.toContain("s")
      })
    ))

  it("keeps distributions in distributions.json, out of every session's reach, the newest 1000", () =>
    withStore((store, root) =>
      Effect.gen(function* () {
        yield* store.createSession({ id: "s", concept: "" })
        const distribution = (id: string, complete = true): Store.Distribution => ({
          id,
          createdAt: "2026-01-01T00:00:00.000Z",
          idempotencyKey: `key-${id}`,
          request: { task: { title: "T" }, mode: "broadcast" },
          results: [{ session: "s", taskId: `t-${id}` }],
          complete
        })
        yield* store.putDistribution(distribution("d-1", false))
        yield* store.putDistribution(distribution("d-1"))
        yield* store.putDistribution(distribution("d-2"))
        expect((yield* (yield* Store.make(root)).listDistributions).map((d) => [d.id, d.complete])).toEqual([
          ["d-1", true],
          ["d-2", true]
        ])
        // Not a global file: no session lists or reads it, and no session may take its name.
        expect(yield* store.list("global", "s")).not.toContain("distributions.json")
        expect((yield* flip(store.readFile(undefined, "distributions.json")))._tag).toBe("PathRefused")
        symlinkSync(join(root, "distributions.json"), join(root, "s", "log.json"))
        expect((yield* flip(store.read("session", "s", "log.json")))._tag).toBe("PathRefused")
        expect((yield* flip(store.createSession({ id: "distributions.json", concept: "" })))._tag).toBe(
          "PathRefused"
        )
        let log: ReadonlyArray<Store.Distribution> = []
        for (let i = 0; i < 1005; i++) log = Store.withDistribution(log, distribution(`d-${i}`))
        expect(log).toHaveLength(1000)
        expect(log[0]!.id).toBe("d-5")
      })
    ))

  it("seeds an empty data root from the example data, once", async () => {
    const root = join(tempDir("ctxo-seed-"), "data")
    const from = new URL("../../../fixtures/data", import.meta.url).pathname
    expect(await Effect.runPromise(Store.seedIfEmpty(root, from))).toBe(true)
    expect(readdirSync(root)).toContain("sessions.json")
    expect(await Effect.runPromise(Store.seedIfEmpty(root, from))).toBe(false)
  })
})

describe("the root's memory file", () => {
  const entry = (id: string, text: string) => ({
    id,
    level: "L4" as const,
    text,
    importance: 0.7,
    reasons: [],
    sources: [{ session: "s" }],
    createdAt: "2026-11-25T00:00:00.000Z",
    updatedAt: "2026-11-25T00:00:00.000Z"
  })
  it("is read again only when it changed, by the store or by another process", () =>
    withStore((store, root) =>
      Effect.gen(function* () {
        expect(yield* store.readGlobalMemory).toEqual([])
        yield* store.updateGlobalMemory(() => [entry("L4:a", "first")])
        const first = yield* store.readGlobalMemory
        expect(first.map((e) => e.text)).toEqual(["first"])
        // Unchanged: the same decoded records.
        expect(yield* store.readGlobalMemory).toBe(first)
        // Replaced by another process: read again.
        writeFileSync(join(root, "memory.json"), JSON.stringify([entry("L4:b", "second, from outside")]))
        expect((yield* store.readGlobalMemory).map((e) => e.text)).toEqual(["second, from outside"])
        // A corrupt file is a CorruptFile naming it, not a stale answer.
        writeFileSync(join(root, "memory.json"), "[{")
        const error = yield* flip(store.readGlobalMemory)
        expect(error._tag).toBe("CorruptFile")
        expect(error.message).toContain("memory.json")
      })
    ))
})

describe("Store reads and listings changed outside the store", () => {
  it("reads a file made, changed, swapped and removed by another process at once, also one that was missing", () =>
    withStore((store, root) =>
      Effect.gen(function* () {
        yield* store.createSession({ id: "s", concept: "outside" })
        const file = join(root, "s", "notes.md")
        // Missing, asked twice (the second answer is the kept one), then made outside.
        expect(yield* store.read("session", "s", "notes.md")).toBeUndefined()
        expect(yield* store.read("session", "s", "notes.md")).toBeUndefined()
        writeFileSync(file, "one")
        expect(yield* store.read("session", "s", "notes.md")).toBe("one")
        expect(yield* store.read("session", "s", "notes.md")).toBe("one")
        // Changed in place to a text of the same length: the time tells.
        writeFileSync(file, "two")
        expect(yield* store.read("session", "s", "notes.md")).toBe("two")
        // Swapped for another file (an editor's save), then removed.
        writeFileSync(`${file}.new`, "three, swapped in")
        renameSync(`${file}.new`, file)
        expect(yield* store.read("session", "s", "notes.md")).toBe("three, swapped in")
        rmSync(file)
        expect(yield* store.read("session", "s", "notes.md")).toBeUndefined()
        // A directory where the file was is no file.
        mkdirSync(file)
        expect(yield* store.read("session", "s", "notes.md")).toBeUndefined()
      })
    ))

  it("keeps what it read within the session cache's budget, the least recently read sessions out first, and reads them again whole", () => {
    const KB = 1024
    const cache = SessionCache.make({ maxBytes: 350 * KB })
    const root = tempDir("ctxo-store-")
    return Effect.runPromise(
      Effect.gen(function* () {
        const store = yield* Store.make(root, { cache })
        const text = (i: number) => `${i} `.repeat(50 * KB)
        for (let i = 0; i < 5; i++) {
          yield* store.createSession({ id: `s${i}`, concept: "reads" })
          writeFileSync(join(root, `s${i}`, "notes.md"), text(i))
          expect(yield* store.read("session", `s${i}`, "notes.md")).toBe(text(i))
        }
        // 100 KB of text a session: three sessions' reads fit (with the records and the root's
        // files read on the way), five do not.
        const stats = cache.stats()
        expect(stats.bytes).toBeLessThanOrEqual(350 * KB)
        expect(stats.holders["file reads"]).toBeLessThanOrEqual(4)
        expect(stats.evicted).toBeGreaterThanOrEqual(2)
        // The first session's read was let go: read again, whole, and as it is now.
        expect(yield* store.read("session", "s0", "notes.md")).toBe(text(0))
        writeFileSync(join(root, "s0", "notes.md"), "changed")
        expect(yield* store.read("session", "s0", "notes.md")).toBe("changed")
        // One session reading more than the whole budget keeps a quarter of it at most (and the
        // file it read last): the cache stays within its budget.
        for (let i = 0; i < 6; i++) {
          writeFileSync(join(root, "s1", `big-${i}.md`), text(i))
          expect(yield* store.read("session", "s1", `big-${i}.md`)).toBe(text(i))
        }
        expect(cache.stats().bytes).toBeLessThanOrEqual(350 * KB)
        expect(yield* store.read("session", "s1", "big-0.md")).toBe(text(0))
      })
    )
  })

  it("lists a session's files as they are now, after changes outside the store in it and in its folders", () =>
    withStore((store, root) =>
      Effect.gen(function* () {
        yield* store.createSession({ id: "s", concept: "outside" })
        const dir = join(root, "s")
        const before = yield* store.list("session", "s")
        expect(yield* store.list("session", "s")).toEqual(before)
        writeFileSync(join(dir, "a.md"), "a")
        expect(yield* store.list("session", "s")).toEqual([...before, "a.md"].sort())
        mkdirSync(join(dir, "docs"))
        writeFileSync(join(dir, "docs", "b.md"), "b")
        expect(yield* store.list("session", "s")).toEqual([...before, "a.md", "docs/b.md"].sort())
        // A file made or removed deeper changes only that folder.
        writeFileSync(join(dir, "docs", "c.md"), "c")
        expect(yield* store.list("session", "s")).toEqual(
          [...before, "a.md", "docs/b.md", "docs/c.md"].sort()
        )
        rmSync(join(dir, "docs", "b.md"))
        expect(yield* store.list("session", "s")).toEqual([...before, "a.md", "docs/c.md"].sort())
        // Through the store too.
        yield* store.writeFile("s", "docs/d.md", "d")
        expect(yield* store.list("session", "s")).toEqual(
          [...before, "a.md", "docs/c.md", "docs/d.md"].sort()
        )
        rmSync(join(dir, "docs"), { recursive: true })
        expect(yield* store.list("session", "s")).toEqual([...before, "a.md"].sort())
      })
    ))
})
