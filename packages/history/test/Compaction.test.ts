import { mkdirSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Effect, Either, Fiber, Layer, Stream, TestClock } from "effect"
import {
  compact,
  compactStream,
  fitSummary,
  messageText,
  planCompaction,
  type ShownHistory,
  shouldCompact,
  TIMEOUT_MESSAGE
} from "../src/Compaction.ts"
import * as HistoryStore from "../src/HistoryStore.ts"
import { historyView, olderSummariesNote, pinMessage, toL3 } from "../src/HistoryView.ts"
import { emptyHistory } from "../src/Message.ts"
import * as Summarizer from "../src/Summarizer.ts"
import { turnsOf } from "../src/Turns.ts"
import { withTurns } from "./helpers.ts"

const gpt4o = { id: "openai/gpt-4o", contextWindow: 128_000 }
const small = { id: "acme/small", contextWindow: 3_000 }

const seed = (sessionId: string, turns: number, size = 100) =>
  Effect.flatMap(HistoryStore.HistoryStore, (store) =>
    store.modify(sessionId, () => Effect.succeed([undefined, withTurns(emptyHistory, turns, size)] as const))
  )

describe("trigger", () => {
  it("fires at last usage + ceil(input/3) >= 80% of the window, with at least 3 messages", () => {
    expect(
      shouldCompact({ lastUsage: 159_990, input: "x".repeat(30), window: 200_000, messageCount: 3 })
    ).toEqual({
      trigger: true,
      estimated: 160_000,
      threshold: 160_000
    })
    expect(
      shouldCompact({ lastUsage: 159_990, input: "x".repeat(27), window: 200_000, messageCount: 3 }).trigger
    ).toBe(false)
    expect(shouldCompact({ lastUsage: 190_000, input: "", window: 200_000, messageCount: 2 }).trigger).toBe(
      false
    )
    expect(
      shouldCompact({
        lastUsage: 50_000,
        input: "",
        window: 100_000,
        messageCount: 9,
        settings: { triggerRatio: 0.5 }
      }).trigger
    ).toBe(true)
  })
})

describe("planCompaction", () => {
  it("keeps the last 10 whole turns and archives the rest at a turn start", () => {
    const doc = withTurns(emptyHistory, 25)
    const plan = planCompaction(doc)
    expect(plan.archivedTurns).toEqual(Array.from({ length: 15 }, (_, i) => i + 1))
    expect(plan.keptTurns).toEqual(Array.from({ length: 10 }, (_, i) => i + 16))
    expect(plan.archive.every((m) => m.meta.turn <= 15)).toBe(true)
    expect(planCompaction(doc, { keepTurns: 30 }).archive).toEqual([])
  })

  it("never archives a turn with a pinned message", () => {
    const doc = Either.getOrThrow(pinMessage(withTurns(emptyHistory, 12), "t2-2"))
    expect(planCompaction(doc).archivedTurns).toEqual([1])
  })

  it("lets the budget win on a small model, and says so", () => {
    const doc = withTurns(emptyHistory, 12, 300)
    const count = (m: Parameters<typeof messageText>[0]) => Math.ceil(messageText(m).length / 3)
    const plan = planCompaction(doc, {
      budget: 1_000,
      countMessages: (ms) => ms.reduce((n, m) => n + count(m), 0)
    })
    expect(plan.reducedForBudget).toBe(true)
    expect(plan.keptTurns.length).toBeLessThan(10)
    expect(plan.note).toBe(`kept ${plan.keptTurns.length} whole turns instead of 10: no more fit 1000 tokens`)
    const kept = doc.messages.filter((m) => plan.keptTurns.includes(m.meta.turn))
    expect(kept.reduce((n, m) => n + count(m), 0)).toBeLessThanOrEqual(1_000)
  })
})

describe("fitSummary", () => {
  const count = (text: string) => Math.ceil(text.length / 4)
  const summary = (milestones: number, files: number) =>
    [
      "## 📌 Archived Session Summary",
      "*(Contains context from turn 1 to turn 90)*",
      "",
      "### 🎯 Objectives & Status",
      "* **Original Goal**: fix the login bug",
      "",
      '### ✅ Completed Milestones (The "Done" Pile)',
      ...Array.from(
        { length: milestones },
        (_, i) => `* [✓] step ${i + 1} of the migration - done and tested`
      ),
      "",
      Summarizer.FILE_SYSTEM_STATE_HEADING,
      "*(Modified files in this archive segment)*",
      ...Array.from({ length: files }, (_, i) => `* \`src/file${i}.ts\`: written.`)
    ].join("\n")

  it("leaves a summary that fits alone", () => {
    const text = summary(3, 2)
    expect(fitSummary(text, 1_000, count)).toBe(text)
  })

  it("drops the oldest milestones first, says how many, and keeps the title and the File System State", () => {
    const fitted = fitSummary(summary(200, 3), 600, count)
    expect(count(fitted)).toBeLessThanOrEqual(600)
    expect(fitted).toContain("## 📌 Archived Session Summary")
    expect(fitted).toContain("`src/file2.ts`: written.")
    expect(fitted).toContain("step 200 of the migration")
    expect(fitted).not.toContain("step 1 of the migration")
    expect(fitted).toMatch(
      /\* \[✓\] … \d+ earlier milestones left out to keep this summary within 600 tokens/
    )
  })

  it("cuts at a line, marked, keeping the title and as much of the File System State as fits", () => {
    const fitted = fitSummary(summary(0, 400), 300, count)
    expect(count(fitted)).toBeLessThanOrEqual(300)
    expect(
      fitted.startsWith("## 📌 Archived Session Summary\n*(Contains context from turn 1 to turn 90)*")
    ).toBe(true)
    expect(fitted).toContain(
      "… (cut to keep this summary within 300 tokens; the archived messages keep the rest)"
    )
    expect(fitted).toContain(Summarizer.FILE_SYSTEM_STATE_HEADING)
  })
})

describe("compact", () => {
  const memory = Layer.mergeAll(HistoryStore.layerMemory, Summarizer.layerDeterministic)

  it.effect("summarizes the archived turns into the fixed template, persisted beside the messages", () =>
    Effect.gen(function* () {
      yield* seed("s1", 14)
      const result = yield* compact({ sessionId: "s1", input: "next", lastUsage: 120_000, model: gpt4o })
      expect(result.status).toBe("compacted")
      expect(result.plan?.archivedTurns).toEqual([1, 2, 3, 4])
      expect(result.events.map((e) => e._tag)).toEqual(["Started", "Summarizing", "Finished"])
      const doc = yield* (yield* HistoryStore.HistoryStore).load("s1")
      expect(doc.compression).toHaveLength(1)
      const summary = doc.compression[0]!
      expect(summary).toMatchObject({ id: "s1-t1-4", fromTurn: 1, toTurn: 4, messageCount: 16 })
      expect(summary.text).toContain("## 📌 Archived Session Summary")
      expect(summary.text).toContain("* `src/f0.ts`: written.")
      const view = historyView(doc)
      expect(turnsOf(view.messages).map((t) => t.turn)).toEqual(Array.from({ length: 10 }, (_, i) => i + 5))
      expect(doc.messages).toHaveLength(56) // the file keeps everything
    }).pipe(Effect.provide(memory))
  )

  it.effect("streams its progress", () =>
    Effect.gen(function* () {
      yield* seed("stream", 14)
      const events = yield* Stream.runCollect(
        compactStream({ sessionId: "stream", input: "x", lastUsage: 120_000, model: gpt4o })
      )
      expect(Chunk.toArray(events).map((e) => e._tag)).toEqual(["Started", "Summarizing", "Finished"])
    }).pipe(Effect.provide(memory))
  )

  it.effect(
    "summaries accumulate; the view carries the newest that fit and says older ones are on file",
    () =>
      Effect.gen(function* () {
        const store = yield* HistoryStore.HistoryStore
        yield* seed("acc", 12)
        for (let round = 0; round < 3; round++) {
          yield* compact({ sessionId: "acc", input: "x", lastUsage: 120_000, model: gpt4o })
          yield* store.modify("acc", (doc) => Effect.succeed([undefined, withTurns(doc, 3)] as const))
        }
        const doc = yield* store.load("acc")
        expect(doc.compression).toHaveLength(3)
        const count = (text: string) => Math.ceil(text.length / 3)
        const newest = doc.compression.at(-1)!
        const view = historyView(doc, { summaryBudget: count(newest.text) + 10, countTokens: count })
        expect(view.summaries).toEqual([newest])
        expect(view.olderSummaries).toBe(2)
        expect(olderSummariesNote(view.olderSummaries)).toBe(
          "(2 older summaries are kept on file in messages.json.)"
        )
        const l3 = toL3(view)
        expect(l3[0]).toMatchObject({ id: newest.id, role: "system", meta: { kind: "summary" } })
        expect((l3[0]!.parts[0] as { text: string }).text).toBe(
          `(2 older summaries are kept on file in messages.json.)\n\n${newest.text}`
        )
        expect(l3.slice(1)).toEqual(view.messages)
      }).pipe(Effect.provide(memory))
  )

  it.effect("plans with the request's own count of history, so what it keeps fits in that format", () =>
    Effect.gen(function* () {
      yield* seed("fmt", 20, 600)
      const count = (text: string) => Math.ceil(text.length / 3)
      // A format that sends half again as much as the text (as Anthropic's JSON blocks do for JSON results).
      const countHistory = (h: ShownHistory) =>
        Math.ceil(
          1.5 *
            (h.summaries.reduce((n, text) => n + count(text), 0) +
              h.messages.reduce((n, m) => n + count(messageText(m)) + 4, 0))
        )
      const model = { id: "acme/mid", contextWindow: 12_000 }
      const result = yield* compact({
        sessionId: "fmt",
        input: "x",
        lastUsage: 11_000,
        model,
        count,
        countHistory,
        fixedTokens: 50
      })
      expect(result.status).toBe("compacted")
      expect(result.stillOver).toBe(false)
      const view = historyView(yield* (yield* HistoryStore.HistoryStore).load("fmt"))
      const request =
        50 + countHistory({ summaries: view.summaries.map((s) => s.text), messages: view.messages })
      expect(request).toBeLessThan(result.decision.threshold)
      expect(result.remaining).toBe(request)
    }).pipe(Effect.provide(memory))
  )

  it.effect("does nothing below the trigger", () =>
    Effect.gen(function* () {
      yield* seed("s2", 14)
      const result = yield* compact({ sessionId: "s2", input: "next", lastUsage: 1_000, model: gpt4o })
      expect([result.status, result.events]).toEqual(["not-needed", []])
    }).pipe(Effect.provide(memory))
  )

  it.effect("never re-compresses a summary: the next compaction adds a new one", () =>
    Effect.gen(function* () {
      yield* seed("s3", 14)
      yield* compact({ sessionId: "s3", input: "a", lastUsage: 120_000, model: gpt4o })
      const store = yield* HistoryStore.HistoryStore
      const first = (yield* store.load("s3")).compression[0]!
      yield* store.modify("s3", (doc) => Effect.succeed([undefined, withTurns(doc, 5)] as const))
      const second = yield* compact({ sessionId: "s3", input: "b", lastUsage: 120_000, model: gpt4o })
      const doc = yield* store.load("s3")
      expect(doc.compression.map((s) => s.id)).toEqual(["s1-t1-4", "s2-t5-9"])
      expect(doc.compression[0]).toEqual(first)
      expect(second.summary?.text).not.toContain("Archived Session Summary\n*(Contains context from turn 1")
    }).pipe(Effect.provide(memory))
  )

  it.effect("falls back when the summarizer never answers, and says exactly so", () =>
    Effect.gen(function* () {
      yield* seed("s4", 14)
      const fiber = yield* Effect.fork(
        compact({ sessionId: "s4", input: "next", lastUsage: 120_000, model: gpt4o })
      )
      yield* TestClock.adjust("121 seconds")
      const result = yield* Fiber.join(fiber)
      expect(result.status).toBe("fell-back")
      expect(result.events).toContainEqual({ _tag: "FellBack", message: TIMEOUT_MESSAGE })
      expect(TIMEOUT_MESSAGE).toBe("Summary generation timed out, keeping recent history only.")
      const doc = yield* (yield* HistoryStore.HistoryStore).load("s4")
      expect(doc.compression).toEqual([])
      expect(turnsOf(historyView(doc).messages)).toHaveLength(10)
    }).pipe(
      Effect.provide(
        Layer.mergeAll(
          HistoryStore.layerMemory,
          Layer.succeed(Summarizer.Summarizer, { summarize: () => Effect.never })
        )
      )
    )
  )

  it.effect(
    "on a small model keeps what fits, and reports when what remains still exceeds the trigger, once",
    () =>
      Effect.gen(function* () {
        yield* seed("s5", 14, 400)
        const fits = yield* compact({ sessionId: "s5", input: "next", lastUsage: 2_900, model: small })
        expect(fits.plan?.reducedForBudget).toBe(true)
        expect(fits.plan?.note).toMatch(/^kept \d whole turns instead of 10: no more fit \d+ tokens$/)
        expect([fits.status, fits.stillOver]).toEqual(["compacted", false])
        expect(fits.remaining).toBeLessThan(2_400)

        // A pinned turn bigger than the trigger cannot be archived: compaction reports it and stops.
        const store = yield* HistoryStore.HistoryStore
        yield* store.modify("s6", () => {
          const doc = withTurns(emptyHistory, 12, 8_000)
          return Effect.succeed([undefined, Either.getOrThrow(pinMessage(doc, "t12-2"))] as const)
        })
        const over = yield* compact({ sessionId: "s6", input: "next", lastUsage: 2_900, model: small })
        expect(over.stillOver).toBe(true)
        expect(over.events.filter((e) => e._tag === "Started")).toHaveLength(1)
        expect(over.events.at(-1)).toMatchObject({ _tag: "StillOver", threshold: 2_400 })
        expect((over.events.at(-1) as { message: string }).message).toMatch(/not compacting again\.$/)
      }).pipe(Effect.provide(memory))
  )

  it.scoped("a restore from the file keeps the summary (compression__context)", () =>
    Effect.gen(function* () {
      const root = mkdtempSync(join(tmpdir(), "ctxo-history-"))
      mkdirSync(join(root, "s7"))
      yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(root, { recursive: true, force: true })))
      const files = HistoryStore.layerFile(root).pipe(Layer.provide(NodeContext.layer))
      yield* Effect.gen(function* () {
        yield* seed("s7", 12)
        yield* compact({ sessionId: "s7", input: "next", lastUsage: 120_000, model: gpt4o })
      }).pipe(Effect.provide(Layer.mergeAll(files, Summarizer.layerDeterministic)))
      // A new store, as after a restart, reads the same file.
      const restored = yield* Effect.flatMap(HistoryStore.HistoryStore, (s) => s.load("s7")).pipe(
        Effect.provide(files)
      )
      expect(restored.compression.map((s) => s.id)).toEqual(["s1-t1-2"])
      expect(historyView(restored).summaries).toHaveLength(1)
    })
  )
})
