/**
 * The history journal's contract, as properties over generated histories: the records of a
 * sequence of changes fold back to the last document, whatever messages.json held when; a journal
 * cut anywhere (a crash in the middle of a write) reads as its whole records before the cut.
 */
import { diffHistory, foldJournal, readJournal, recordLine, withJournalSeq } from "@ctxo/store/HistoryJournal"
import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import fc from "fast-check"
import type { HistoryDocument } from "../src/Message.ts"
import { emptyHistory } from "../src/Message.ts"
import { appendStep, beginTurn, finishTurn } from "../src/Turns.ts"
import { compactUpTo, dismissAt } from "./helpers.ts"

type Op =
  | { readonly _tag: "input"; readonly text: string }
  | { readonly _tag: "step"; readonly text: string }
  | { readonly _tag: "finish"; readonly text: string }
  | { readonly _tag: "dismiss"; readonly at: number }
  | { readonly _tag: "compact"; readonly upTo: number }

const text = fc.string({ unit: "grapheme", maxLength: 30 })
const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ _tag: fc.constant("input" as const), text }),
  fc.record({ _tag: fc.constant("step" as const), text }),
  fc.record({ _tag: fc.constant("finish" as const), text }),
  fc.record({ _tag: fc.constant("dismiss" as const), at: fc.nat() }),
  fc.record({ _tag: fc.constant("compact" as const), upTo: fc.nat() })
)

/** The next document (a new object only where it changed, as the recorder makes them). */
const apply = (doc: HistoryDocument, o: Op): HistoryDocument => {
  const turn = doc.messages.at(-1)?.meta.turn
  switch (o._tag) {
    case "input":
      return beginTurn(doc, { input: o.text }).doc
    case "step":
      return turn === undefined ? doc : appendStep(doc, turn, { text: o.text }).doc
    case "finish":
      return turn === undefined ? doc : finishTurn(doc, turn, o.text).doc
    case "dismiss":
      return dismissAt(doc, o.at)
    case "compact":
      return compactUpTo(doc, o.upTo)
  }
}

/** The journal of `ops` from the empty history, and each document on the way. */
const journalOf = (ops: ReadonlyArray<Op>) => {
  const docs: Array<HistoryDocument> = []
  let lines = ""
  let doc: HistoryDocument | undefined
  let seq = 0
  for (const o of ops) {
    const next = apply(doc ?? emptyHistory, o)
    const patch = diffHistory(doc, next)
    doc = next
    if (patch === undefined) continue
    lines += recordLine(++seq, patch).line
    docs.push(next)
  }
  return { lines, docs }
}

const json = (value: unknown) => JSON.parse(JSON.stringify(value))

describe("the history journal", () => {
  it("folds back to the last document, from messages.json folded at any record", () =>
    fc.assert(
      fc.property(fc.array(op, { maxLength: 40 }), fc.nat(), (ops, at) => {
        const { lines, docs } = journalOf(ops)
        const { records } = Either.getOrThrow(readJournal(lines))
        expect(records).toHaveLength(docs.length)
        const last = docs.at(-1)
        expect(Either.getOrThrow(foldJournal(undefined, records)).json).toEqual(last && json(last))
        // messages.json written by a fold at record k; the journal not yet removed (or partly new).
        const k = docs.length === 0 ? 0 : at % (docs.length + 1)
        const base = k === 0 ? undefined : json(withJournalSeq(docs[k - 1], k))
        const folded = Either.getOrThrow(foldJournal(base, records))
        expect(folded.json).toEqual(last && json(last))
        expect(folded.applied).toBe(docs.length - k)
      })
    ))

  it("cut at any byte (a crash mid-write), reads as the whole records before the cut", () =>
    fc.assert(
      fc.property(fc.array(op, { minLength: 1, maxLength: 20 }), fc.nat(), (ops, at) => {
        const { lines } = journalOf(ops)
        const bytes = Buffer.from(lines, "utf8")
        const cut = at % (bytes.length + 1)
        const read = readJournal(bytes.subarray(0, cut).toString("utf8"))
        expect(Either.isRight(read)).toBe(true)
        const whole = Buffer.from(lines, "utf8").subarray(0, cut).toString("utf8").split("\n").length - 1
        const { records, validBytes } = Either.getOrThrow(read)
        expect(records.map((r) => r.seq)).toEqual(Array.from({ length: whole }, (_, i) => i + 1))
        expect(validBytes).toBeLessThanOrEqual(cut)
      })
    ))
})
