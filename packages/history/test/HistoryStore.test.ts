import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  truncateSync,
  writeFileSync
} from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as SessionCache from "@ctxo/store/SessionCache"
import * as Store from "@ctxo/store/Store"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as HistoryStore from "../src/HistoryStore.ts"
import { emptyHistory, textOf } from "../src/Message.ts"
import { recordStep, recordToolResult, startTurn } from "../src/Recorder.ts"
import { beginTurn } from "../src/Turns.ts"
import { withTurns } from "./helpers.ts"

const roots: Array<string> = []
afterAll(() => {
  for (const root of roots) rmSync(root, { recursive: true, force: true })
})
// A data root whose sessions exist (history is never written for a session that is not there).
const fileStore = (sessions: ReadonlyArray<string> = ["s1", "s2", "s4", "edit"]) => {
  const root = mkdtempSync(join(tmpdir(), "ctxo-store-"))
  roots.push(root)
  for (const id of sessions) mkdirSync(join(root, id))
  return { root, layer: fileStoreOn(root) }
}
/** The history of a data root through a store of its own (what another process would have). */
const fileStoreOn = (root: string) => HistoryStore.layerFile(root).pipe(Layer.provide(NodeContext.layer))

describe("HistoryStore (file)", () => {
  it.effect("keeps its sessions within the store's session cache and reads one it let go again", () => {
    const { root } = fileStore(["a", "b", "c"])
    // Each session's history is about 14 KB of text, kept twice (the store's state, the decoded
    // document), each three times its text: two sessions fit, not three.
    const cache = SessionCache.make({ maxBytes: 200 * 1024 })
    const store = Store.makeUnsafe(root, { cache })
    const history = HistoryStore.fromStore(store)
    return Effect.gen(function* () {
      for (const id of ["a", "b", "c"])
        yield* history.modify(id, (doc) => Effect.succeed([undefined, withTurns(doc, 4, 1000)] as const))
      const stats = cache.stats()
      expect(stats.bytes).toBeLessThanOrEqual(200 * 1024)
      expect(stats).toMatchObject({ sessions: 2, evicted: 1 })
      expect(stats.holders).toEqual({
        "store history state": 2,
        "decoded history": 2,
        "file reads": 0,
        "session memory": 0
      })
      // a was let go: read again from its files, whole.
      const a = yield* history.load("a")
      expect(a.messages).toHaveLength(16)
      expect(textOf(a.messages[0]!)).toContain("question 0")
      expect(cache.stats()).toMatchObject({ sessions: 2, evicted: 2 })
      yield* store.flush
    })
  })

  it.effect("records a change as one journal line; messages.json is written whole when released", () => {
    const { root, layer } = fileStore()
    return Effect.gen(function* () {
      const doc = yield* Effect.gen(function* () {
        const store = yield* HistoryStore.HistoryStore
        yield* startTurn("s1", { input: "hello", inputKey: "k" })
        yield* recordStep("s1", 1, { text: "Thought: look it up" })
        const doc = yield* store.load("s1")
        expect(doc.messages.map((m) => m.id)).toEqual(["t1-0", "t1-1"])
        expect(readdirSync(join(root, "s1"))).toEqual(["messages.journal"])
        const lines = readFileSync(join(root, "s1", "messages.journal"), "utf8").split("\n")
        expect(lines).toHaveLength(3)
        // The step's record holds the step only: the input before it is kept by count.
        expect(JSON.parse(lines[1]!)).toMatchObject({
          seq: 2,
          patch: { keep: 1, messages: [{ id: "t1-1" }] }
        })
        // Another process (a store of its own) reads the same document.
        const other = yield* Effect.provide(HistoryStore.HistoryStore, fileStoreOn(root))
        expect(yield* other.load("s1")).toEqual(doc)
        return doc
      }).pipe(Effect.provide(layer))
      const onDisk = JSON.parse(readFileSync(join(root, "s1", "messages.json"), "utf8"))
      expect(onDisk).toEqual({ ...doc, journalSeq: 2 })
      expect(readdirSync(join(root, "s1"))).toEqual(["messages.json"])
    })
  })

  it.effect("sees a change made to messages.json by hand", () => {
    const { root, layer } = fileStore()
    const file = join(root, "edit", "messages.json")
    writeFileSync(file, JSON.stringify([{ role: "user", content: "before" }]))
    return Effect.gen(function* () {
      const store = yield* HistoryStore.HistoryStore
      expect((yield* store.load("edit")).messages[0]!.parts[0]).toEqual({ _tag: "text", text: "before" })
      writeFileSync(file, readFileSync(file, "utf8").replace('"before"', '"after, edited by hand"'))
      const doc = yield* store.load("edit")
      expect(doc.messages[0]!.parts[0]).toEqual({ _tag: "text", text: "after, edited by hand" })
    }).pipe(Effect.provide(layer))
  })

  it.effect("writes a plain array of chat messages back as v1 with its first change", () => {
    const { root, layer } = fileStore()
    writeFileSync(
      join(root, "s2", "messages.json"),
      JSON.stringify([
        { role: "user", content: "hi" },
        { role: "assistant", content: "hello" }
      ])
    )
    return Effect.gen(function* () {
      const store = yield* HistoryStore.HistoryStore
      yield* startTurn("s2", { input: "and now?" })
      const doc = yield* store.load("s2")
      expect(doc.messages.map((m) => m.role)).toEqual(["user", "assistant", "user"])
      const record = JSON.parse(readFileSync(join(root, "s2", "messages.journal"), "utf8"))
      expect(record.patch).toMatchObject({
        keep: 0,
        messages: { length: 3 },
        set: { format: "ctxo.history/v1" }
      })
      const other = yield* Effect.provide(HistoryStore.HistoryStore, fileStoreOn(root))
      expect(yield* other.load("s2")).toEqual(doc)
    }).pipe(Effect.provide(layer))
  })

  it.effect("reads every acknowledged change past a torn last line, and cuts it off", () => {
    const { root, layer } = fileStore()
    const journal = join(root, "s4", "messages.journal")
    return Effect.gen(function* () {
      yield* startTurn("s4", { input: "question" })
      yield* recordStep("s4", 1, { text: "one" })
      yield* recordStep("s4", 1, { text: "two" })
      // Killed while writing the third record.
      truncateSync(journal, statSync(journal).size - 20)
      const after = yield* Effect.provide(HistoryStore.HistoryStore, fileStoreOn(root))
      expect((yield* after.load("s4")).messages.map(textOf)).toEqual(["question", "one"])
      yield* Effect.provide(
        recordStep("s4", 1, { text: "three" }),
        Layer.succeed(HistoryStore.HistoryStore, after)
      )
      const text = readFileSync(journal, "utf8")
      expect(text.endsWith("\n")).toBe(true)
      expect(
        text
          .split("\n")
          .slice(0, -1)
          .map((l) => JSON.parse(l).seq)
      ).toEqual([1, 2, 3])
      const third = yield* Effect.provide(HistoryStore.HistoryStore, fileStoreOn(root))
      expect((yield* third.load("s4")).messages.map(textOf)).toEqual(["question", "one", "three"])
    }).pipe(Effect.provide(layer))
  })

  it.effect("names the journal and the line of a bad record before the last", () => {
    const { root, layer } = fileStore()
    const journal = join(root, "s4", "messages.journal")
    return Effect.gen(function* () {
      yield* startTurn("s4", { input: "question" })
      yield* recordStep("s4", 1, { text: "one" })
      yield* recordStep("s4", 1, { text: "two" })
      writeFileSync(journal, readFileSync(journal, "utf8").replace('"one"', '"ONE"'))
      const after = yield* Effect.provide(HistoryStore.HistoryStore, fileStoreOn(root))
      const error = yield* Effect.flip(after.load("s4"))
      expect(error._tag).toBe("HistoryCorrupt")
      expect(error.message).toBe(
        "History file s4/messages.journal cannot be read: line 2: its checksum does not match its content"
      )
    }).pipe(Effect.provide(layer))
  })

  it.effect("keeps a cut tool result whole in a file and says how to read it back", () => {
    const { root, layer } = fileStore()
    return Effect.gen(function* () {
      const { turn } = yield* startTurn("s2", { input: "grep it" })
      yield* recordStep("s2", turn, { toolCall: { callId: "call_1", name: "Grep", input: { pattern: "x" } } })
      const matches = Array.from({ length: 200 }, (_, i) => `src/a.ts:${i + 1}:x`)
      const message = yield* recordToolResult(
        "s2",
        turn,
        { callId: "call_1", name: "Grep" },
        {
          status: "success",
          data: { pattern: "x", matches },
          text: "ignored",
          stats: { ms: 3 }
        }
      )
      const part = message.parts[0]!
      expect(part).toMatchObject({ _tag: "tool-result", full: "tool-results/call_1.json" })
      expect((part as { data: { readBack: string; matches: Array<string> } }).data.readBack).toBe(
        "full result: read_file tool-results/call_1.json"
      )
      expect((part as { data: { matches: Array<string> } }).data.matches).toHaveLength(5)
      const full = JSON.parse(readFileSync(join(root, "s2", "tool-results", "call_1.json"), "utf8"))
      expect(full.data.matches).toHaveLength(200)
      const store = yield* HistoryStore.HistoryStore
      expect(yield* store.readFullResult("s2", "call_1")).toEqual(full)
    }).pipe(Effect.provide(layer))
  })

  it.effect("keeps the full result of a long call id where the compressed result says it is", () => {
    const { root, layer } = fileStore()
    return Effect.gen(function* () {
      const callId = `call_${"x".repeat(300)}`
      const { turn } = yield* startTurn("s4", { input: "grep it" })
      yield* recordStep("s4", turn, { toolCall: { callId, name: "Grep", input: { pattern: "x" } } })
      const matches = Array.from({ length: 50 }, (_, i) => `src/a.ts:${i + 1}:x`)
      const message = yield* recordToolResult(
        "s4",
        turn,
        { callId, name: "Grep" },
        { status: "success", data: { pattern: "x", matches } }
      )
      const full = (message.parts[0] as { full?: string }).full
      expect(full).toBeDefined()
      expect(full!.length).toBeLessThan(230)
      const saved = JSON.parse(readFileSync(join(root, "s4", full!), "utf8"))
      expect(saved.data.matches).toHaveLength(50)
    }).pipe(Effect.provide(layer))
  })

  it.effect("refuses a corrupt file with its name and leaves it untouched", () => {
    const { root, layer } = fileStore()
    mkdirSync(join(root, "s3"))
    writeFileSync(join(root, "s3", "messages.json"), '{"format":"ctxo.history/v1","messages":[{"id":1}]}')
    return Effect.gen(function* () {
      const error = yield* Effect.flip(startTurn("s3", { input: "hi" }))
      expect(error._tag).toBe("HistoryCorrupt")
      expect(error.message).toContain("s3/messages.json")
      expect(error.message).not.toContain(root)
      expect(readFileSync(join(root, "s3", "messages.json"), "utf8")).toBe(
        '{"format":"ctxo.history/v1","messages":[{"id":1}]}'
      )
    }).pipe(Effect.provide(layer))
  })

  it.effect("refuses session ids that would leave the data directory", () =>
    Effect.gen(function* () {
      const store = yield* HistoryStore.HistoryStore
      for (const bad of ["..", "../x", "a/b", "a\u0000b", ""]) {
        const error = yield* Effect.flip(store.load(bad))
        expect(error._tag).toBe("InvalidSessionId")
      }
    }).pipe(Effect.provide(fileStore().layer))
  )

  it.live("serializes concurrent writers: no message is lost", () =>
    Effect.gen(function* () {
      const store = yield* HistoryStore.HistoryStore
      yield* Effect.forEach(
        Array.from({ length: 20 }, (_, i) => i),
        (i) =>
          store.modify("s4", (doc) => {
            const began = beginTurn(doc, { input: `message ${i}` })
            return Effect.succeed([undefined, began.doc] as const).pipe(Effect.delay("1 millis"))
          }),
        { concurrency: "unbounded" }
      )
      const doc = yield* store.load("s4")
      // 20 inputs, each turn but the last finished as abandoned when the next one began.
      expect(doc.messages.filter((m) => m.meta.kind === "input")).toHaveLength(20)
      expect(doc.messages.filter((m) => m.meta.kind === "final")).toHaveLength(19)
      expect(new Set(doc.messages.map((m) => m.meta.turn)).size).toBe(20)
    }).pipe(Effect.provide(fileStore().layer))
  )

  it.effect("never writes the history of a session whose folder is gone", () => {
    const { root, layer } = fileStore(["gone"])
    return Effect.gen(function* () {
      yield* startTurn("gone", { input: "first" })
      rmSync(join(root, "gone"), { recursive: true })
      const error = yield* Effect.flip(startTurn("gone", { input: "second" }))
      expect(error._tag).toBe("SessionNotFound")
      expect(readdirSync(root)).not.toContain("gone")
    }).pipe(Effect.provide(layer))
  })

  it.effect("refuses an idempotency key reused with a different message, and records nothing", () =>
    Effect.gen(function* () {
      const store = yield* HistoryStore.HistoryStore
      yield* startTurn("keys", { input: "first question", inputKey: "k1" })
      const again = yield* startTurn("keys", { input: "first question", inputKey: "k1" })
      expect(again.resumed).toBe(true)
      const error = yield* Effect.flip(startTurn("keys", { input: "another question", inputKey: "k1" }))
      expect(error).toMatchObject({ _tag: "IdempotencyConflict", key: "k1", turn: 1 })
      expect(error.message).toContain("different message")
      expect((yield* store.load("keys")).messages).toHaveLength(1)
    }).pipe(Effect.provide(HistoryStore.layerMemory))
  )

  it.effect("the memory layer behaves the same", () =>
    Effect.gen(function* () {
      const store = yield* HistoryStore.HistoryStore
      expect(yield* store.load("fresh")).toEqual(emptyHistory)
      yield* startTurn("fresh", { input: "x" })
      expect((yield* store.load("fresh")).messages).toHaveLength(1)
    }).pipe(Effect.provide(HistoryStore.layerMemory))
  )
})
