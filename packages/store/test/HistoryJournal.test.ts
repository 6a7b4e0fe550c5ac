/**
 * The history journal on disk: one record per change, durable before the change returns; read back
 * whole by this store and by another one (another process); a torn last line left out and cut off;
 * a bad line before the last one named; folds that apply nothing twice, in the background and when
 * the store is released; the session's lock and deletion respected; the journals of the least
 * recently appended sessions beyond a bound folded.
 */
import {
  appendFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  type PathLike,
  readFileSync,
  rmSync,
  statSync,
  truncateSync,
  writeFileSync
} from "node:fs"
import { open } from "node:fs/promises"
import { createRequire, syncBuiltinESMExports } from "node:module"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"
import { Context, Effect, Either, FiberRef, FiberRefs, HashMap, Logger, Option, Tracer } from "effect"
import { afterAll, afterEach, describe, expect, it, vi } from "vitest"
import { diffHistory, JOURNAL_SEQ, jsonExact, readJournal, recordLine } from "../src/HistoryJournal.ts"
import { deferSync } from "../src/HistorySync.ts"
import * as Store from "../src/Store.ts"

const temps: Array<string> = []
afterAll(() => {
  for (const dir of temps) rmSync(dir, { recursive: true, force: true })
})
afterEach(() => {
  vi.restoreAllMocks()
})

const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(effect)
const fail = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(Effect.flip(effect))

interface Doc {
  readonly format: string
  readonly messages: ReadonlyArray<{ readonly id: string; readonly text: string }>
  readonly compression: ReadonlyArray<unknown>
}
const empty: Doc = { format: "ctxo.history/v1", messages: [], compression: [] }

/** A data root with session `s`, and a store over it. */
const setup = async (options?: Store.StoreOptions) => {
  const root = mkdtempSync(join(tmpdir(), "ctxo-journal-"))
  temps.push(root)
  const store = Store.makeUnsafe(root, options)
  await run(store.createSession({ id: "s", concept: "" }))
  const file = (name: string) => join(root, "s", name)
  return { root, store, file }
}

/**
 * Every file handle's fdatasync (the journal's; `sync`: its fsync, an atomic write's) goes through
 * `through` (given the real one); the spy counts them.
 */
const slowDisk = async (
  anyFile: string,
  through: (sync: () => Promise<void>) => Promise<void>,
  method: "datasync" | "sync" = "datasync"
) => {
  const probe = await open(anyFile, "r")
  const prototype = Object.getPrototypeOf(probe) as Record<typeof method, () => Promise<void>>
  await probe.close()
  const real = prototype[method]
  return vi.spyOn(prototype, method).mockImplementation(function (this: unknown) {
    return through(() => real.call(this))
  })
}

/** Applies `change` to the stored document as history does: the difference, by reference. */
const change = (store: Store.Service, id: string, change: (doc: Doc) => Doc) =>
  store.updateHistory(id, (json) => {
    const before = json as Doc | undefined
    const after = change(before ?? empty)
    return Effect.succeed([after, diffHistory(before, after)] as const)
  })
const add = (store: Store.Service, text: string, id = "s") =>
  change(store, id, (doc) => ({ ...doc, messages: [...doc.messages, { id: text, text }] }))

const linesOf = (text: string) => text.split("\n").slice(0, -1)
const textsOf = (json: unknown) => (json as Doc).messages.map((m) => m.text)

describe("the journal's format", () => {
  it("is one line of JSON per record, its checksum telling a torn or garbled line", () => {
    const { line } = recordLine(7, { keep: 2, messages: [{ id: "x" }] })
    expect(line.endsWith("\n")).toBe(true)
    expect(JSON.parse(line)).toMatchObject({ seq: 7, patch: { keep: 2, messages: [{ id: "x" }] } })
    const eighth = recordLine(8, { keep: 3, messages: [] }).line
    expect(Either.getOrThrow(readJournal(line + eighth)).records.map((r) => r.seq)).toEqual([7, 8])
    // A changed character in the patch, a record out of order: a bad last line is a torn one.
    const garbled = line.replace('"x"', '"y"')
    expect(Either.getOrThrow(readJournal(garbled))).toMatchObject({ records: [], torn: true })
    expect(Either.getOrThrow(readJournal(line + line))).toMatchObject({ torn: true })
    // ... and the same line anywhere before the last is corruption, named by its line.
    expect(Either.flip(readJournal(garbled + eighth))).toEqual(
      Either.right({ line: 1, reason: "its checksum does not match its content" })
    )
  })

  it("reads back any text: line and paragraph separators, astral and lone surrogates, newlines", () => {
    const texts = ["a\u2028b\u2029c", "emoji 🧪 and 中文", "lone \ud800 surrogate", "line\nbreak\r\n"]
    const journal = texts.map((text, i) => recordLine(i + 1, { keep: i, messages: [{ text }] }).line).join("")
    const read = Either.getOrThrow(readJournal(journal))
    expect(read).toMatchObject({ torn: false, validBytes: Buffer.byteLength(journal) })
    expect(read.records.map((r) => JSON.parse(r.payload).messages[0].text)).toEqual(texts)
  })

  it("tells a patch that is what its JSON reads back from one that is not", () => {
    // What it says, checked against a parse of the JSON whenever it says the JSON reads back the same.
    const same = (value: unknown) => {
      const exact = jsonExact(value)
      if (exact) expect(JSON.parse(JSON.stringify(value))).toStrictEqual(value)
      return exact
    }
    const message = { id: "a", role: "user", parts: [{ _tag: "text", text: "x" }], meta: { turn: 1 } }
    expect(same({ keep: 0, messages: [message], set: { compression: [] } })).toBe(true)
    class Point {
      x = 1
    }
    const dropped = [{ a: undefined }, { a: new Date(0) }, { a: Number.NaN }, { a: -0 }, [1, undefined]]
    const extra = Object.assign([1, 2], { note: "x" })
    const hidden = Object.defineProperty({ a: 1 }, "b", { value: 2, enumerable: false })
    class List extends Array<number> {}
    for (const value of [
      ...dropped,
      { a: Number.POSITIVE_INFINITY },
      { a: new Point() },
      { a: extra },
      { a: hidden },
      { a: { [Symbol("s")]: 1 } },
      { a: List.from([1]) }
    ])
      expect(same(value), JSON.stringify(value)).toBe(false)
  })

  it("a change keeps the messages before the first one that is not the same object", () => {
    const a = { id: "a", text: "a" }
    const b = { id: "b", text: "b" }
    const before: Doc = { ...empty, messages: [a, b] }
    expect(diffHistory(before, before)).toBeUndefined()
    expect(diffHistory(before, { ...before, messages: [a, b, a] })).toEqual({ keep: 2, messages: [a] })
    expect(diffHistory(before, { ...before, messages: [a, { ...b }] })).toEqual({
      keep: 1,
      messages: [{ ...b }]
    })
    expect(diffHistory(before, { ...before, compression: ["s"] })).toEqual({
      keep: 2,
      messages: [],
      set: { compression: ["s"] }
    })
    // No document before: the whole one.
    expect(diffHistory(undefined, before)).toEqual({
      keep: 0,
      messages: [a, b],
      set: { format: "ctxo.history/v1", compression: [] }
    })
  })
})

describe("the file store's history journal", () => {
  it("records a change as one journal line, and does not write messages.json", async () => {
    const { store, file } = await setup()
    const first: Doc = {
      ...empty,
      messages: [
        { id: "0", text: "zero" },
        { id: "1", text: "one" }
      ]
    }
    await run(store.writeHistory("s", `${JSON.stringify(first, null, 2)}\n`))
    const before = statSync(file("messages.json"))
    const beforeText = readFileSync(file("messages.json"), "utf8")
    await run(add(store, "two"))
    await run(add(store, "three"))
    expect(readFileSync(file("messages.json"), "utf8")).toBe(beforeText)
    expect(statSync(file("messages.json")).mtimeMs).toBe(before.mtimeMs)
    const lines = linesOf(readFileSync(file("messages.journal"), "utf8"))
    expect(lines).toHaveLength(2)
    // Each record carries the new message only: the two before are kept by count.
    expect(lines.map((l) => JSON.parse(l))).toMatchObject([
      { seq: 1, patch: { keep: 2, messages: [{ text: "two" }] } },
      { seq: 2, patch: { keep: 3, messages: [{ text: "three" }] } }
    ])
    expect(textsOf(await run(store.readHistoryJson("s")))).toEqual(["zero", "one", "two", "three"])
    // readHistory (and the files API) give the whole v1 text, journal included.
    const text = await run(store.readHistory("s"))
    expect(JSON.parse(text!)).toMatchObject({ format: "ctxo.history/v1", messages: { length: 4 } })
    expect((await run(store.readFile("s", "messages.json"))).content).toBe(text)
  })

  it("holds a record's own messages when they are what its JSON reads back, a copy of those that are not", async () => {
    const { root, store } = await setup()
    // History's document and the store's JSON then share a message instead of holding one each.
    const kept = { id: "k", text: "kept" }
    await run(change(store, "s", (doc) => ({ ...doc, messages: [...doc.messages, kept] })))
    expect(((await run(store.readHistoryJson("s"))) as Doc).messages[0]).toBe(kept)
    // A field JSON leaves out: the store holds what a reader of the journal gets.
    const odd = { id: "o", text: "odd", extra: undefined }
    await run(change(store, "s", (doc) => ({ ...doc, messages: [...doc.messages, odd] })))
    const [first, second] = ((await run(store.readHistoryJson("s"))) as Doc).messages
    expect(first).toBe(kept)
    expect(second).not.toBe(odd)
    expect(Object.keys(second!)).toEqual(["id", "text"])
    expect(((await run(Store.makeUnsafe(root).readHistoryJson("s"))) as Doc).messages).toEqual([
      kept,
      { id: "o", text: "odd" }
    ])
  })

  it("keeps the session's document as it is now, not every earlier one", async () => {
    // A full collection on demand (the test runner has no --expose-gc).
    setFlagsFromString("--expose-gc")
    const gc = runInNewContext("gc") as () => void
    const { store } = await setup()
    await run(add(store, "first"))
    const first = new WeakRef((await run(store.readHistoryJson("s"))) as object)
    for (let i = 0; i < 20; i++) await run(add(store, `message ${i}`))
    expect(textsOf(await run(store.readHistoryJson("s")))).toHaveLength(21)
    // A weak reference holds its object until the job that made or read it has ended.
    await new Promise((resolve) => setTimeout(resolve, 0))
    gc()
    // Each state the journal kept held the one before it: the first document was never collected.
    expect(first.deref()).toBeUndefined()
  })

  it("reads back every change, in this store and in a new one (another process)", async () => {
    const { root, store } = await setup()
    let expected: Doc = empty
    for (let i = 0; i < 120; i++) {
      expected = await run(Effect.map(add(store, `m${i}`), ([doc]) => doc))
      if (i % 40 === 39) {
        // A change of an earlier message and of the summaries: kept from there on, whole.
        expected = await run(
          Effect.map(
            change(store, "s", (doc) => ({
              ...doc,
              messages: doc.messages.map((m, j) => (j === 5 ? { ...m, text: `${m.text} (archived)` } : m)),
              compression: [...doc.compression, `summary ${i}`]
            })),
            ([doc]) => doc
          )
        )
      }
    }
    expect(await run(store.readHistoryJson("s"))).toEqual(expected)
    const other = Store.makeUnsafe(root)
    expect(await run(other.readHistoryJson("s"))).toEqual(expected)
    const { [JOURNAL_SEQ]: seq, ...rest } = JSON.parse((await run(other.readHistory("s")))!)
    expect(rest).toEqual(expected)
    expect(seq).toBe(123)
  })

  it("leaves a torn last line out, and cuts it off before the next record", async () => {
    const { root, store, file } = await setup()
    for (const text of ["a", "b", "c"]) await run(add(store, text))
    const journal = file("messages.journal")
    const size = statSync(journal).size
    // Killed in the middle of writing the third record.
    truncateSync(journal, size - 12)
    const after = Store.makeUnsafe(root)
    expect(textsOf(await run(after.readHistoryJson("s")))).toEqual(["a", "b"])
    await run(add(after, "d"))
    const lines = linesOf(readFileSync(journal, "utf8"))
    expect(lines.map((l) => JSON.parse(l).seq)).toEqual([1, 2, 3])
    expect(readFileSync(journal, "utf8").endsWith("\n")).toBe(true)
    expect(textsOf(await run(Store.makeUnsafe(root).readHistoryJson("s")))).toEqual(["a", "b", "d"])

    // Garbage without a newline, then a whole line with a wrong checksum: both left out, then cut.
    appendFileSync(journal, '{"seq":4,"sum":"0000')
    expect(textsOf(await run(Store.makeUnsafe(root).readHistoryJson("s")))).toEqual(["a", "b", "d"])
    truncateSync(journal, statSync(journal).size - '{"seq":4,"sum":"0000'.length)
    appendFileSync(
      journal,
      recordLine(4, { keep: 3, messages: [{ id: "x", text: "x" }] }).line.replace('"x"}', '"y"}')
    )
    const third = Store.makeUnsafe(root)
    expect(textsOf(await run(third.readHistoryJson("s")))).toEqual(["a", "b", "d"])
    await run(add(third, "e"))
    expect(linesOf(readFileSync(journal, "utf8")).map((l) => JSON.parse(l).seq)).toEqual([1, 2, 3, 4])
    expect(textsOf(await run(Store.makeUnsafe(root).readHistoryJson("s")))).toEqual(["a", "b", "d", "e"])
  })

  it("names the file and the line of a bad record before the last, and changes nothing", async () => {
    const { root, store, file } = await setup()
    for (const text of ["a", "b", "c"]) await run(add(store, text))
    const journal = file("messages.journal")
    const lines = linesOf(readFileSync(journal, "utf8"))
    writeFileSync(journal, [lines[0], lines[1]!.replace('"b"', '"B"'), lines[2], ""].join("\n"))
    const corrupt = readFileSync(journal, "utf8")
    const other = Store.makeUnsafe(root)
    const error = await fail(other.readHistory("s"))
    expect(error).toMatchObject({ _tag: "HistoryJournalCorrupt", path: "s/messages.journal", line: 2 })
    expect(error.message).toBe(
      "History journal s/messages.journal is corrupt at line 2: its checksum does not match its content"
    )
    expect((await fail(other.readHistoryJson("s")))._tag).toBe("HistoryJournalCorrupt")
    expect((await fail(add(other, "d")))._tag).toBe("HistoryJournalCorrupt")
    expect(readFileSync(journal, "utf8")).toBe(corrupt)
    expect(error.message).not.toContain(root)
  })

  it("folds crash-safely: a journal left after its fold applies nothing twice", async () => {
    const { root, store, file } = await setup()
    for (const text of ["a", "b", "c"]) await run(add(store, text))
    const journal = readFileSync(file("messages.journal"))
    await run(store.flush)
    expect(existsSync(file("messages.journal"))).toBe(false)
    const folded = JSON.parse(readFileSync(file("messages.json"), "utf8"))
    expect(folded).toMatchObject({ [JOURNAL_SEQ]: 3, messages: { length: 3 } })
    // Killed after messages.json was written and before the journal was removed.
    writeFileSync(file("messages.journal"), journal)
    const after = Store.makeUnsafe(root)
    expect(textsOf(await run(after.readHistoryJson("s")))).toEqual(["a", "b", "c"])
    await run(add(after, "d"))
    // The records messages.json holds are cut off; the new one goes on from them.
    expect(linesOf(readFileSync(file("messages.journal"), "utf8")).map((l) => JSON.parse(l).seq)).toEqual([4])
    expect(textsOf(await run(Store.makeUnsafe(root).readHistoryJson("s")))).toEqual(["a", "b", "c", "d"])
    // Killed before messages.json was renamed: the old messages.json and the whole journal.
    await run(after.flush)
    expect(textsOf(await run(Store.makeUnsafe(root).readHistoryJson("s")))).toEqual(["a", "b", "c", "d"])
  })

  it("loses nothing to concurrent changes, and they share their fdatasyncs", async () => {
    const { root, store, file } = await setup()
    await run(add(store, "first"))
    // Slow disks: each fdatasync takes 30 ms, so changes arrive while one runs.
    const spy = await slowDisk(file("messages.journal"), async (sync) => {
      await new Promise((r) => setTimeout(r, 30))
      return sync()
    })
    await run(
      Effect.forEach(
        Array.from({ length: 30 }, (_, i) => i),
        (i) => add(store, `m${i}`),
        { concurrency: "unbounded" }
      )
    )
    expect(textsOf(await run(Store.makeUnsafe(root).readHistoryJson("s")))).toHaveLength(31)
    expect(linesOf(readFileSync(file("messages.journal"), "utf8"))).toHaveLength(31)
    // Thirty acknowledged changes, a few fdatasyncs.
    expect(spy.mock.calls.length).toBeGreaterThan(0)
    expect(spy.mock.calls.length).toBeLessThan(10)
  })

  it("inside deferSync, a change returns once written and its fdatasync is awaited by the wait, also when the caller fails", async () => {
    const { root, store, file } = await setup()
    await run(add(store, "first"))
    // A disk whose fdatasync finishes when the test says so.
    const syncs: Array<() => void> = []
    const spy = await slowDisk(
      file("messages.journal"),
      (sync) =>
        new Promise<void>((resolve, reject) => {
          syncs.push(() => sync().then(resolve, reject))
        })
    )
    const releaseAll = async () => {
      while (syncs.length > 0) syncs.shift()!()
      await new Promise((r) => setTimeout(r, 20))
    }
    const events: Array<string> = []
    const turn = run(
      deferSync(add(store, "second"), (_, synced) =>
        Effect.gen(function* () {
          // The change is written and read back before its sync is done.
          events.push(
            `written ${textsOf(yield* store.readHistoryJson("s")).join(",")}; syncs ${syncs.length}`
          )
          yield* synced
          events.push("synced")
          yield* synced
        })
      )
    )
    for (let i = 0; i < 100 && events.length === 0; i++) await new Promise((r) => setTimeout(r, 5))
    expect(events).toEqual(["written first,second; syncs 1"])
    await releaseAll()
    await turn
    expect(events).toEqual(["written first,second; syncs 1", "synced"])
    expect(spy).toHaveBeenCalledTimes(1)

    // The caller fails before it waits: the sync is still awaited before deferSync ends.
    let settled = false
    const failed = fail(deferSync(add(store, "third"), () => Effect.fail("compile failed" as const))).then(
      (e) => {
        settled = true
        return e
      }
    )
    for (let i = 0; i < 100 && syncs.length === 0; i++) await new Promise((r) => setTimeout(r, 5))
    await new Promise((r) => setTimeout(r, 20))
    expect(settled).toBe(false)
    await releaseAll()
    expect(await failed).toBe("compile failed")
    expect(spy).toHaveBeenCalledTimes(2)
    vi.restoreAllMocks()
    // Outside deferSync a change waits for its sync, as before.
    await run(add(store, "fourth"))
    expect(textsOf(await run(Store.makeUnsafe(root).readHistoryJson("s")))).toEqual([
      "first",
      "second",
      "third",
      "fourth"
    ])
  })

  it("folds in the background past its threshold, after the turn holding the lock", async () => {
    const { store, file } = await setup({ journal: { foldRecords: 10 } })
    await run(
      store.withSessionLock(
        "s",
        Effect.gen(function* () {
          for (let i = 0; i < 12; i++) yield* add(store, `m${i}`)
          // The turn goes on; the fold waits for its lock.
          yield* Effect.sleep("50 millis")
          expect(linesOf(readFileSync(file("messages.journal"), "utf8"))).toHaveLength(12)
        })
      )
    )
    for (let i = 0; i < 200 && existsSync(file("messages.journal")); i++)
      await new Promise((r) => setTimeout(r, 10))
    expect(existsSync(file("messages.journal"))).toBe(false)
    const folded = JSON.parse(readFileSync(file("messages.json"), "utf8"))
    expect(folded).toMatchObject({ format: "ctxo.history/v1", [JOURNAL_SEQ]: 12, compression: [] })
    expect(textsOf(folded)).toHaveLength(12)
    // A journal past its byte threshold too.
    const big = await setup({ journal: { foldBytes: 2_000 } })
    for (let i = 0; i < 5; i++) await run(add(big.store, "x".repeat(600) + i))
    for (let i = 0; i < 200 && !existsSync(big.file("messages.json")); i++)
      await new Promise((r) => setTimeout(r, 10))
    // Folded at the fourth record (2,400 bytes); the fifth starts a new journal.
    expect(textsOf(JSON.parse(readFileSync(big.file("messages.json"), "utf8")))).toHaveLength(4)
    expect(textsOf(await run(big.store.readHistoryJson("s")))).toHaveLength(5)
  })

  it("folds at a lock span's first record while the span goes on (a turn waiting for its model)", async () => {
    const { root, store, file } = await setup({ journal: { foldRecords: 4, foldDelayMs: 1_000 } })
    // The first span passes the mark at its last record: the fold is left to the next span.
    await run(
      store.withSessionLock(
        "s",
        Effect.forEach(["a", "b", "c", "d"], (t) => add(store, t))
      )
    )
    expect(linesOf(readFileSync(file("messages.journal"), "utf8"))).toHaveLength(4)
    await run(
      store.withSessionLock(
        "s",
        Effect.gen(function* () {
          yield* add(store, "input")
          // Still in the span, between its records: the fold runs meanwhile and ends.
          for (let i = 0; i < 200 && existsSync(file("messages.journal")); i++)
            yield* Effect.sleep("10 millis")
          expect(existsSync(file("messages.journal"))).toBe(false)
          const folded = JSON.parse(readFileSync(file("messages.json"), "utf8"))
          expect(folded).toMatchObject({ [JOURNAL_SEQ]: 5 })
          expect(textsOf(folded)).toEqual(["a", "b", "c", "d", "input"])
          yield* add(store, "answer")
        })
      )
    )
    // The span's next record starts a new journal: nothing lost, nothing twice.
    expect(linesOf(readFileSync(file("messages.journal"), "utf8"))).toHaveLength(1)
    const expected = ["a", "b", "c", "d", "input", "answer"]
    expect(textsOf(await run(store.readHistoryJson("s")))).toEqual(expected)
    expect(textsOf(await run(Store.makeUnsafe(root).readHistoryJson("s")))).toEqual(expected)
  })

  it("the span's next record, the next lock span and a read wait for a fold running in a span", async () => {
    const { store, file } = await setup({ journal: { foldRecords: 2, foldDelayMs: 1_000 } })
    await run(
      store.withSessionLock(
        "s",
        Effect.forEach(["a", "b"], (t) => add(store, t))
      )
    )
    // The fold's write is slow to reach the disk: the span that started it ends first.
    await slowDisk(
      file("messages.journal"),
      (sync) => new Promise((r) => setTimeout(r, 300)).then(sync),
      "sync"
    )
    // A span whose next record comes while its fold still writes: the record waits, and is kept.
    await run(store.withSessionLock("s", Effect.zipRight(add(store, "c"), add(store, "d"))))
    expect(textsOf(await run(store.readHistoryJson("s")))).toEqual(["a", "b", "c", "d"])
    expect(linesOf(readFileSync(file("messages.journal"), "utf8"))).toHaveLength(1)
    // Past the mark again (d, e): this span folds at its first record, and ends at once.
    await run(store.withSessionLock("s", add(store, "e")))
    expect(existsSync(file("messages.journal"))).toBe(true)
    const [read, seen] = await Promise.all([
      run(store.readHistoryJson("s")),
      run(
        store.withSessionLock(
          "s",
          Effect.sync(() => ({
            journal: existsSync(file("messages.journal")),
            folded: JSON.parse(readFileSync(file("messages.json"), "utf8"))[JOURNAL_SEQ]
          }))
        )
      )
    ])
    expect(textsOf(read)).toEqual(["a", "b", "c", "d", "e"])
    // The span entered once the fold was done, not in the middle of it.
    expect(seen).toEqual({ journal: false, folded: 5 })
    await run(store.deleteSession("s"))
    expect(existsSync(dirname(file("messages.json")))).toBe(false)
  })

  it("a mark passed in the middle of a span is folded by the next span, not queued behind it", async () => {
    const { store, file } = await setup({ journal: { foldRecords: 4, foldDelayMs: 100 } })
    await run(add(store, "seed"))
    // A turn: input, call, result (the fourth record: past the mark, not the span's first), then
    // the model's next step for longer than the delay, then the answer.
    await run(
      store.withSessionLock(
        "s",
        Effect.gen(function* () {
          yield* Effect.forEach(["input", "call", "result"], (t) => add(store, t))
          yield* Effect.sleep("300 millis")
          yield* add(store, "answer")
        })
      )
    )
    // The client's next turn at once: no fold ran between the two (one queued behind the turn
    // would have taken the lock first), and its first record starts it.
    const lines = await run(
      store.withSessionLock(
        "s",
        Effect.gen(function* () {
          const before = linesOf(readFileSync(file("messages.journal"), "utf8")).length
          yield* add(store, "next")
          return before
        })
      )
    )
    expect(lines).toBe(5)
    for (let i = 0; i < 200 && existsSync(file("messages.journal")); i++)
      await new Promise((r) => setTimeout(r, 10))
    const folded = JSON.parse(readFileSync(file("messages.json"), "utf8"))
    expect(folded).toMatchObject({ [JOURNAL_SEQ]: 6 })
    expect(textsOf(folded)).toEqual(["seed", "input", "call", "result", "answer", "next"])
  })

  /**
   * A store whose session "s" has two records, then a span that appends a third (its fold starts)
   * and runs `then` while that fold is still running after its rename of messages.json (its look
   * at the journal before removing it is late: the store's own import of lstat is the one replaced).
   */
  const whileFoldRuns = async (
    then: (store: Store.Service, root: string) => Effect.Effect<unknown, unknown>
  ) => {
    const { root, store, file } = await setup({ journal: { foldRecords: 2, foldDelayMs: 1_000 } })
    await run(
      store.withSessionLock(
        "s",
        Effect.forEach(["a", "b"], (t) => add(store, t))
      )
    )
    const promises = createRequire(import.meta.url)("node:fs/promises") as typeof import("node:fs/promises")
    const lstat = promises.lstat
    promises.lstat = (async (path: PathLike, ...rest: []) => {
      if (String(path).endsWith("messages.journal")) await new Promise((r) => setTimeout(r, 300))
      return lstat(path, ...rest)
    }) as typeof lstat
    syncBuiltinESMExports()
    try {
      await run(
        store.withSessionLock(
          "s",
          Effect.gen(function* () {
            yield* add(store, "c")
            const seq = () => JSON.parse(readFileSync(file("messages.json"), "utf8"))[JOURNAL_SEQ]
            for (let i = 0; i < 300 && !(existsSync(file("messages.json")) && seq() === 3); i++)
              yield* Effect.sleep("5 millis")
            yield* then(store, root)
          })
        )
      )
    } finally {
      promises.lstat = lstat
      syncBuiltinESMExports()
    }
    return { root, store }
  }
  /** Session "s" made again is empty, in this store and read afresh from disk. */
  const expectMadeAgainEmpty = async (store: Store.Service, root: string) => {
    expect(await run(store.readHistoryJson("s"))).toBeUndefined()
    await run(add(store, "new"))
    expect(textsOf(await run(store.readHistoryJson("s")))).toEqual(["new"])
    expect(textsOf(await run(Store.makeUnsafe(root).readHistoryJson("s")))).toEqual(["new"])
  }

  it("a session deleted in the span whose fold still runs stays deleted; one made again is empty", async () => {
    const { root, store } = await whileFoldRuns((store) => store.deleteSession("s"))
    expect(existsSync(join(root, "s"))).toBe(false)
    await run(store.createSession({ id: "s", concept: "again" }))
    await expectMadeAgainEmpty(store, root)
  })

  it("a session made again over what a lost record left, while its fold still runs, is empty", async () => {
    const { root, store } = await whileFoldRuns((store, root) =>
      Effect.suspend(() => {
        // The session's record is gone (what a crash between a deletion's index and its folder
        // leaves), its folder still there: creating it again starts from an empty folder.
        const index = join(root, "sessions.json")
        const records = JSON.parse(readFileSync(index, "utf8")) as Array<{ id: string }>
        writeFileSync(index, JSON.stringify(records.filter((r) => r.id !== "s")))
        return store.createSession({ id: "s", concept: "again" })
      })
    )
    await expectMadeAgainEmpty(store, root)
  })

  it("folds the journals it wrote when the store's scope closes; one it only read stays", async () => {
    const root = mkdtempSync(join(tmpdir(), "ctxo-journal-"))
    temps.push(root)
    const writer = Store.makeUnsafe(root)
    await run(writer.createSession({ id: "read-only", concept: "" }))
    await run(add(writer, "written elsewhere", "read-only"))
    await run(
      Effect.scoped(
        Effect.map(Store.makeScoped(root), (reader) => reader.readHistoryJson("read-only")).pipe(
          Effect.flatten
        )
      )
    )
    // A process that only reads (the CLI beside a running gateway) writes nothing.
    expect(existsSync(join(root, "read-only", "messages.journal"))).toBe(true)
    expect(existsSync(join(root, "read-only", "messages.json"))).toBe(false)
    await run(
      Effect.scoped(
        Effect.gen(function* () {
          const store = yield* Store.makeScoped(root)
          for (const id of ["a", "b"]) {
            yield* store.createSession({ id, concept: "" })
            yield* add(store, `hello ${id}`, id)
          }
          expect(existsSync(join(root, "a", "messages.journal"))).toBe(true)
        })
      )
    )
    for (const id of ["a", "b"]) {
      expect(existsSync(join(root, id, "messages.journal"))).toBe(false)
      expect(textsOf(JSON.parse(readFileSync(join(root, id, "messages.json"), "utf8")))).toEqual([
        `hello ${id}`
      ])
    }
  })

  it("a deleted session's journal goes with it and is never written back", async () => {
    const { root, store } = await setup({ journal: { foldRecords: 3 } })
    await run(
      store.withSessionLock(
        "s",
        Effect.gen(function* () {
          for (let i = 0; i < 4; i++) yield* add(store, `m${i}`)
          // The fold asked for waits for this lock; the session is gone when it gets it.
          yield* store.deleteSession("s")
        })
      )
    )
    await new Promise((r) => setTimeout(r, 100))
    expect(existsSync(join(root, "s"))).toBe(false)
    expect((await fail(add(store, "late")))._tag).toBe("SessionNotFound")
    expect(existsSync(join(root, "s"))).toBe(false)
    await run(store.createSession({ id: "s", concept: "again" }))
    expect(await run(store.readHistoryJson("s"))).toBeUndefined()
    await run(add(store, "new"))
    expect(textsOf(await run(Store.makeUnsafe(root).readHistoryJson("s")))).toEqual(["new"])
  })
})

describe("what the file store keeps of the sessions it appended to", () => {
  it("folds the journals of the least recently appended sessions beyond its bound once they are quiet, losing no record", async () => {
    const { root, store } = await setup({ journal: { maxJournaled: 3, foldDelayMs: 10 } })
    const ids = ["a", "b", "c", "d", "e", "f", "g", "h"]
    for (const id of ids) await run(store.createSession({ id, concept: "" }))
    for (const id of ids) await run(store.withSessionLock(id, add(store, `hello ${id}`, id)))
    await run(store.withSessionLock("a", add(store, "again a", "a")))
    const journals = () => ids.filter((id) => existsSync(join(root, id, "messages.journal")))
    for (let waited = 0; journals().length > 3 && waited < 5_000; waited += 20)
      await new Promise((r) => setTimeout(r, 20))
    // The three appended to last keep their journals; the others' records are in messages.json.
    expect(journals()).toEqual(["g", "h", "a"].sort())
    for (const id of ["b", "c", "d", "e", "f"])
      expect(textsOf(JSON.parse(readFileSync(join(root, id, "messages.json"), "utf8")))).toEqual([
        `hello ${id}`
      ])
    const again = Store.makeUnsafe(root)
    for (const id of ids) {
      const texts = id === "a" ? ["hello a", "again a"] : [`hello ${id}`]
      expect(textsOf(await run(store.readHistoryJson(id)))).toEqual(texts)
      expect(textsOf(await run(again.readHistoryJson(id)))).toEqual(texts)
    }
    await run(store.flush)
  })

  it("says a fold failed in a log line and a trace of the store's own, not the request's that started it", async () => {
    const { root, store } = await setup({ journal: { maxJournaled: 1, foldDelayMs: 10 } })
    for (const id of ["a", "b"]) await run(store.createSession({ id, concept: "" }))
    const logged: Array<{ text: string; annotations: Record<string, unknown>; span?: string }> = []
    const capture = Logger.make(({ message, annotations, context }) => {
      const parent = Context.getOption(
        FiberRefs.getOrDefault(context, FiberRef.currentContext),
        Tracer.ParentSpan
      )
      logged.push({
        text: String(Array.isArray(message) ? message[0] : message),
        annotations: Object.fromEntries(HashMap.toEntries(annotations)),
        ...(Option.isSome(parent) && parent.value._tag === "Span" ? { span: parent.value.name } : {})
      })
    })
    /** As the gateway serves a request: its id on every log line, its span around its work. */
    const asRequest = (id: string, effect: Effect.Effect<void, unknown>) =>
      run(
        effect.pipe(
          Effect.withSpan(`request ${id}`),
          Effect.annotateLogs({ requestId: `request-${id}` }),
          Effect.provide(Logger.replace(Logger.defaultLogger, capture))
        )
      )
    await asRequest("a", store.withSessionLock("a", add(store, "hello a", "a")))
    // messages.json cannot be written: a's fold fails, in the worker b's append starts past the bound.
    mkdirSync(join(root, "a", "messages.json"))
    await asRequest("b", store.withSessionLock("b", add(store, "hello b", "b")))
    for (let waited = 0; logged.length === 0 && waited < 5_000; waited += 20)
      await new Promise((r) => setTimeout(r, 20))
    expect(logged).toEqual([
      { text: "The history journal of a was not folded", annotations: {}, span: "Store.fold" }
    ])
    rmSync(join(root, "a", "messages.json"), { recursive: true })
    await run(store.flush)
  })

  it("leaves a journal it cannot fold to be read as it is, and goes on folding the others past its bound", async () => {
    const { root, store } = await setup({ journal: { maxJournaled: 1, foldDelayMs: 10 } })
    for (const id of ["a", "b", "c"]) await run(store.createSession({ id, concept: "" }))
    const journal = (id: string) => existsSync(join(root, id, "messages.journal"))
    const until = async (done: () => boolean) => {
      for (let waited = 0; !done() && waited < 5_000; waited += 20)
        await new Promise((r) => setTimeout(r, 20))
    }
    await run(store.withSessionLock("a", add(store, "hello a", "a")))
    // messages.json cannot be written: a's fold fails (said in the log), once.
    mkdirSync(join(root, "a", "messages.json"))
    await run(store.withSessionLock("b", add(store, "hello b", "b")))
    await new Promise((r) => setTimeout(r, 200))
    expect([journal("a"), journal("b")]).toEqual([true, true])
    // The worker ended and a new one folds b once c is past the bound.
    await run(store.withSessionLock("c", add(store, "hello c", "c")))
    await until(() => !journal("b"))
    expect([journal("a"), journal("b"), journal("c")]).toEqual([true, false, true])
    rmSync(join(root, "a", "messages.json"), { recursive: true })
    for (const id of ["a", "b", "c"])
      expect(textsOf(await run(Store.makeUnsafe(root).readHistoryJson(id)))).toEqual([`hello ${id}`])
    await run(store.flush)
  })
})
