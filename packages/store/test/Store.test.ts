import { mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
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

  it("seeds an empty data root from the example data, once", async () => {
    const root = join(tempDir("ctxo-seed-"), "data")
    const from = new URL("../../../fixtures/data", import.meta.url).pathname
    expect(await Effect.runPromise(Store.seedIfEmpty(root, from))).toBe(true)
    expect(readdirSync(root)).toContain("sessions.json")
    expect(await Effect.runPromise(Store.seedIfEmpty(root, from))).toBe(false)
  })
})
