/**
 * Memory levels over a store: turns promoted to L2 by importance (once), the L1 view with pins and
 * deletions, expiry by lifetime (pinned entries stay), L3 built by aggregation across sessions,
 * L4 written through the event bus when a session ends (and surviving a restart on disk), and
 * memories reaching the compiled request of a turn.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as HistoryStore from "@ctxo/history/HistoryStore"
import * as Recorder from "@ctxo/history/Recorder"
import * as Turns from "@ctxo/history/Turns"
import * as MemoryStore from "@ctxo/store/MemoryStore"
import * as Store from "@ctxo/store/Store"
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Layer, TestClock } from "effect"
import * as Controller from "../src/Controller.ts"
import * as Memory from "../src/Memory.ts"
import * as TurnEngine from "../src/TurnEngine.ts"
import { historyOf, servicesOver } from "./services.ts"

const sessionA: ReadonlyArray<readonly [string, string]> = [
  ["hi there", "Hello!"],
  ["Please remember: I prefer tabs over spaces and my team is Orion.", "Noted, tabs and team Orion."],
  ["thanks", "You're welcome."],
  ["We decided to ship v2.3 on 2026-12-01 after the freeze.", "Release 2.3 is set for 2026-12-01."]
]
const sessionB: ReadonlyArray<readonly [string, string]> = [
  ["Please remember: I prefer tabs over spaces and my team is Orion.", "Noted, tabs and team Orion."],
  ["what's up", "Not much."]
]

const layerOver = (store: Store.Service) => servicesOver(store)

const seed = (store: Store.Service) =>
  Effect.gen(function* () {
    yield* store.createSession({ id: "a", concept: "Release planning" })
    yield* store.createSession({ id: "b", concept: "Editor setup" })
    yield* store.writeHistory("a", historyOf(sessionA))
    yield* store.writeHistory("b", historyOf(sessionB))
  })

const inMemory = () => {
  const store = MemoryStore.makeMemory({ global: { "system-prompt.md": "You help." } })
  return { store, layer: layerOver(store) }
}

describe("Memory: promotion and the session levels", () => {
  it.effect(
    "promotes the turns over the importance threshold to L2, once, and L1 shows the newest turns",
    () => {
      const { store, layer } = inMemory()
      return Effect.gen(function* () {
        yield* seed(store)
        const memory = yield* Memory.Memory
        const l2 = yield* memory.session("a", "L2")
        expect(l2.map((e) => e.id)).toEqual(["L2:a:t2", "L2:a:t4"])
        expect(l2[0]!.importance).toBeGreaterThan(0.6)
        expect(l2[0]!.reasons).toContain(
          "the user states something to keep (a preference, decision, fact or rule)"
        )
        expect(l2[0]!.sources).toEqual([{ session: "a", turn: 2 }])
        // Once: a second sync adds nothing.
        yield* memory.sync("a")
        expect((yield* store.readMemory("a")).filter((e) => e.level === "L2")).toHaveLength(2)
        const l1 = yield* memory.session("a", "L1")
        expect(l1.map((e) => e.id)).toEqual(["L1:a:t1", "L1:a:t2", "L1:a:t3", "L1:a:t4"])
      }).pipe(Effect.provide(layer))
    }
  )

  const syncs = (store: Store.Service, layer: ReturnType<typeof layerOver>) =>
    Effect.gen(function* () {
      yield* seed(store)
      const memory = yield* Memory.Memory
      const ids = (entries: ReadonlyArray<{ readonly id: string; readonly level: string }>) =>
        entries.filter((e) => e.level === "L2").map((e) => e.id)
      expect(ids(yield* memory.sync("a"))).toEqual(["L2:a:t2", "L2:a:t4"])
      // Again with nothing new: the same entries (the turns seen are not judged again).
      expect(ids(yield* memory.sync("a"))).toEqual(["L2:a:t2", "L2:a:t4"])
      // One more turn that matters: promoted by the next sync.
      yield* store.writeHistory(
        "a",
        historyOf([
          ...sessionA,
          ["Please remember: I prefer dark mode and my team is Vega.", "Noted, dark mode and team Vega."]
        ])
      )
      expect(ids(yield* memory.sync("a"))).toEqual(["L2:a:t2", "L2:a:t4", "L2:a:t5"])
      // memory.json rewritten without an entry (by hand, another process): that turn is due again.
      yield* store.updateMemory("a", (entries) => entries.filter((e) => e.id !== "L2:a:t4"))
      expect(ids(yield* memory.sync("a"))).toEqual(["L2:a:t2", "L2:a:t5", "L2:a:t4"])
      // And once only.
      expect(ids(yield* memory.sync("a"))).toHaveLength(3)
    }).pipe(Effect.provide(layer))

  it.effect("a sync checks the turns it has not seen, and every turn again once memory.json changed", () => {
    const { store, layer } = inMemory()
    return syncs(store, layer)
  })

  it.effect(
    "the same on the file store, which hands back the same entries while memory.json is unchanged",
    () => {
      const root = mkdtempSync(join(tmpdir(), "ctxo-memory-sync-"))
      const store = Store.makeUnsafe(root)
      return syncs(store, layerOver(store)).pipe(
        Effect.ensuring(Effect.sync(() => rmSync(root, { recursive: true, force: true })))
      )
    }
  )

  it.effect(
    "promotes each turn that matters as the history grows turn by turn, and again after memory.json changed",
    () => {
      const root = mkdtempSync(join(tmpdir(), "ctxo-memory-grow-"))
      const store = Store.makeUnsafe(root)
      return Effect.gen(function* () {
        yield* store.createSession({ id: "g", concept: "Growing" })
        const memory = yield* Memory.Memory
        const ids = (entries: ReadonlyArray<{ readonly id: string; readonly level: string }>) =>
          entries.filter((e) => e.level === "L2").map((e) => e.id)
        const history = yield* HistoryStore.HistoryStore
        // Recorded as the turn engine records (each document grown from the last), synced after each:
        // from the history as the engine read it after the answer (every other turn), or as memory
        // reads it.
        const turn = (input: string, answer: string) =>
          Effect.gen(function* () {
            const began = yield* Recorder.startTurn("g", { input })
            yield* Recorder.endTurn("g", began.turn, answer)
            return ids(yield* memory.sync("g", began.turn % 2 === 0 ? yield* history.load("g") : undefined))
          })
        for (let i = 1; i <= 12; i++) expect(yield* turn(`small talk ${i}`, "Sure.")).toEqual([])
        expect(
          yield* turn("Please remember: I prefer tabs over spaces and my team is Orion.", "Noted.")
        ).toEqual(["L2:g:t13"])
        for (let i = 14; i <= 20; i++) expect(yield* turn(`small talk ${i}`, "Sure.")).toEqual(["L2:g:t13"])
        expect(yield* turn("We decided to ship v2.3 on 2026-12-01 after the freeze.", "Set.")).toEqual([
          "L2:g:t13",
          "L2:g:t21"
        ])
        // memory.json rewritten without an entry (another process): that turn is due again, once.
        yield* store.updateMemory("g", (entries) => entries.filter((e) => e.id !== "L2:g:t13"))
        expect(yield* turn("small talk 22", "Sure.")).toEqual(["L2:g:t21", "L2:g:t13"])
        expect(yield* turn("small talk 23", "Sure.")).toEqual(["L2:g:t21", "L2:g:t13"])
        // The history it is given is the one it promotes from (the caller's read under the lock).
        const given = yield* history.load("g")
        const next = Turns.finishTurn(
          Turns.beginTurn(given, { input: "Please remember: the release branch is release/2.3." }).doc,
          24,
          "Noted."
        ).doc
        expect(ids(yield* memory.sync("g", next))).toEqual(["L2:g:t21", "L2:g:t13", "L2:g:t24"])
      }).pipe(
        Effect.provide(layerOver(store)),
        Effect.ensuring(Effect.sync(() => rmSync(root, { recursive: true, force: true })))
      )
    }
  )

  it.effect("pins an L1 turn into L2, deletes without losing anything, and expires by lifetime", () => {
    const { store, layer } = inMemory()
    return Effect.gen(function* () {
      yield* seed(store)
      const memory = yield* Memory.Memory
      yield* memory.pin("L1", "L1:a:t3", true, "a")
      const l2 = yield* memory.session("a", "L2")
      expect(l2.find((e) => e.id === "L2:a:t3")).toMatchObject({ pinned: true })
      yield* memory.remove("L2", "L2:a:t4", "a")
      expect((yield* memory.session("a", "L2")).map((e) => e.id)).not.toContain("L2:a:t4")
      const all = yield* memory.session("a", "L2", { includeDeleted: true })
      expect(all.find((e) => e.id === "L2:a:t4")?.deletedAt).toBeDefined()
      // A day later L2's 24 hours are over: the unpinned entry expires, the pinned one stays.
      yield* TestClock.adjust(Duration.hours(25))
      const later = yield* memory.session("a", "L2")
      expect(later.map((e) => e.id)).toEqual(["L2:a:t3"])
      const listed = yield* memory.session("a", "L2", { includeExpired: true })
      expect(listed.find((e) => e.id === "L2:a:t2")?.expired).toBe(true)
      const missing = yield* Effect.flip(memory.pin("L2", "L2:a:t99", true, "a"))
      expect(missing.message).toBe("session a has no L2 memory entry L2:a:t99")
    }).pipe(Effect.provide(layer))
  })
})

describe("Memory: L3 and L4", () => {
  it.effect("aggregates L2 across sessions into L3, one entry per text with both sources", () => {
    const { store, layer } = inMemory()
    return Effect.gen(function* () {
      yield* seed(store)
      const memory = yield* Memory.Memory
      const l3 = yield* memory.aggregate(["a", "b"])
      const shared = l3.find((e) => e.text.includes("tabs over spaces"))!
      expect(shared.sources).toEqual([
        { session: "a", turn: 2 },
        { session: "b", turn: 1 }
      ])
      expect(l3).toHaveLength(2)
      expect((yield* memory.global("L3")).map((e) => e.id).sort()).toEqual(l3.map((e) => e.id).sort())
    }).pipe(Effect.provide(layer))
  })

  it.live("writes L4 through the event bus when a session ends", () => {
    const { store, layer } = inMemory()
    return Effect.gen(function* () {
      yield* seed(store)
      yield* Memory.persistOnEvents()
      const controller = yield* Controller.Controller
      yield* controller.end("a")
      const memory = yield* Memory.Memory
      // The subscriber runs on its own fiber: wait until it has written.
      let l4: ReadonlyArray<Memory.MemoryView> = []
      for (let i = 0; i < 100 && l4.length === 0; i++) {
        yield* Effect.sleep("10 millis")
        l4 = yield* memory.global("L4")
      }
      expect(l4.map((e) => e.text).sort()).toEqual([
        "User: Please remember: I prefer tabs over spaces and my team is Orion.\nAssistant: Noted, tabs and team Orion.",
        "User: We decided to ship v2.3 on 2026-12-01 after the freeze.\nAssistant: Release 2.3 is set for 2026-12-01."
      ])
      expect(l4.every((e) => e.sources.every((s) => s.session === "a"))).toBe(true)
    }).pipe(Effect.scoped, Effect.provide(layer))
  })

  it("keeps L4 on disk across a restart", async () => {
    const root = mkdtempSync(join(tmpdir(), "ctxo-memory-"))
    try {
      const first = Store.makeUnsafe(root)
      await Effect.runPromise(
        Effect.gen(function* () {
          yield* seed(first)
          const memory = yield* Memory.Memory
          yield* memory.aggregate(["a"])
          yield* memory.persist("a")
        }).pipe(Effect.provide(Memory.layer()), Effect.provide(Layer.succeed(Store.Store, first)))
      )
      const restarted = Store.makeUnsafe(root)
      const l4 = await Effect.runPromise(
        Effect.flatMap(Memory.Memory, (m) => m.global("L4")).pipe(
          Effect.provide(Memory.layer()),
          Effect.provide(Layer.succeed(Store.Store, restarted))
        )
      )
      expect(l4).toHaveLength(2)
    } finally {
      rmSync(root, { recursive: true, force: true })
    }
  })
})

describe("Memory as a source of the turn's request", () => {
  it.effect("brings another session's memory relevant to the input, with where it comes from", () => {
    const { store, layer } = inMemory()
    return Effect.gen(function* () {
      yield* seed(store)
      yield* store.createSession({ id: "c", concept: "New repo" })
      const memory = yield* Memory.Memory
      yield* memory.aggregate(["a"])
      const engine = yield* TurnEngine.TurnEngine
      const compiled = yield* engine.preview({
        sessionId: "c",
        defaultModel: "openai/gpt-4o",
        input: "Should this repo use tabs or spaces for the team?"
      })
      const messages = compiled.format === "openai" ? compiled.request.messages : []
      const text = messages.map((m) => m.content ?? "").join("\n")
      expect(text).toContain("[L3 memory, from session a turn 2]")
      expect(text).not.toContain("Release 2.3")
      expect(compiled.report.units.find((u) => u.source === "semantic")?.ref).toBe("L3: session a turn 2")
    }).pipe(Effect.provide(layer))
  })
})
