/**
 * The files API's rules, the same for the store on disk and the store in memory: versions and
 * If-Match, line ranges read and replaced, who may write which file, deletion.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { diffHistory } from "../src/HistoryJournal.ts"
import * as MemoryStore from "../src/MemoryStore.ts"
import type { EnhancedState } from "../src/Runs.ts"
import * as Store from "../src/Store.ts"

const temps: Array<string> = []
afterAll(() => {
  for (const dir of temps) rmSync(dir, { recursive: true, force: true })
})
const stores: ReadonlyArray<readonly [string, () => Store.Service]> = [
  [
    "file",
    () => {
      const root = mkdtempSync(join(tmpdir(), "ctxo-contract-"))
      temps.push(root)
      return Store.makeUnsafe(root)
    }
  ],
  ["memory", () => MemoryStore.makeMemory()]
]
const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(effect)
const fail = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(Effect.flip(effect))

describe.each(stores)("the %s store", (_, make) => {
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
})
