/**
 * A view grown from the previous document's view (`grownView`, what the compile cache keeps per
 * session) is the document's whole view, over generated histories: turns with tool calls answered,
 * left dangling (a turn interrupted, another input after it) or answered by a later call's id,
 * dismissed results, compactions, and documents that do not grow from the previous one.
 */
import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import fc from "fast-check"
import { dismissMemory, grownView, historyView, type ViewState } from "../src/HistoryView.ts"
import type { HistoryDocument } from "../src/Message.ts"
import { emptyHistory } from "../src/Message.ts"
import { appendStep, appendToolResult, beginTurn, finishTurn } from "../src/Turns.ts"
import { compactUpTo, dismissAt } from "./helpers.ts"

type Op =
  | { readonly _tag: "input" }
  | { readonly _tag: "call"; readonly id: number }
  | { readonly _tag: "result"; readonly id: number }
  | { readonly _tag: "finish" }
  | { readonly _tag: "dismiss"; readonly at: number }
  | { readonly _tag: "compact"; readonly upTo: number }
  | { readonly _tag: "back"; readonly to: number }

const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 2, arbitrary: fc.constant({ _tag: "input" as const }) },
  // Few call ids: results answer calls of other turns, and ids come back.
  { weight: 3, arbitrary: fc.record({ _tag: fc.constant("call" as const), id: fc.nat(5) }) },
  { weight: 3, arbitrary: fc.record({ _tag: fc.constant("result" as const), id: fc.nat(5) }) },
  { weight: 2, arbitrary: fc.constant({ _tag: "finish" as const }) },
  { weight: 1, arbitrary: fc.record({ _tag: fc.constant("dismiss" as const), at: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ _tag: fc.constant("compact" as const), upTo: fc.nat() }) },
  // Another document of the session (a replica's, an undo): not grown from the last one viewed.
  { weight: 1, arbitrary: fc.record({ _tag: fc.constant("back" as const), to: fc.nat() }) }
)

const apply = (doc: HistoryDocument, o: Op, earlier: ReadonlyArray<HistoryDocument>): HistoryDocument => {
  const turn = doc.messages.at(-1)?.meta.turn
  switch (o._tag) {
    case "input":
      return beginTurn(doc, { input: `question ${doc.messages.length}` }).doc
    case "call":
      return turn === undefined
        ? doc
        : appendStep(doc, turn, {
            toolCall: { callId: `c${o.id}`, name: "Read", input: { path: `f${o.id}` } }
          }).doc
    case "result":
      return turn === undefined
        ? doc
        : appendToolResult(doc, turn, { callId: `c${o.id}`, name: "Read", status: "success", data: "text" })
            .doc
    case "finish":
      return turn === undefined ? doc : finishTurn(doc, turn, "answer").doc
    case "dismiss":
      return dismissAt(doc, o.at)
    case "compact":
      return compactUpTo(doc, o.upTo)
    case "back":
      return earlier.length === 0 ? doc : earlier[o.to % earlier.length]!
  }
}

describe("grownView", () => {
  it("is the document's whole view, grown from the last view or not", () =>
    fc.assert(
      fc.property(fc.array(op, { maxLength: 60 }), (ops) => {
        let doc = emptyHistory
        let state: ViewState | undefined
        const docs: Array<HistoryDocument> = []
        for (const o of ops) {
          doc = apply(doc, o, docs)
          docs.push(doc)
          state = grownView(doc, state)
          expect(state.doc).toBe(doc)
          expect(state.view).toEqual(historyView(doc))
        }
      }),
      { numRuns: 400 }
    ))

  it("views whole again when a call arrives for a dismissed result that had none", () => {
    let doc = beginTurn(emptyHistory, { input: "first" }).doc
    doc = appendToolResult(doc, 1, { callId: "c9", name: "Read", status: "success", data: "x" }).doc
    doc = Either.getOrThrow(dismissMemory(doc, doc.messages[1]!.id, "gone"))
    const before = grownView(doc)
    // The call and a result of its own arrive together: every new call is answered among the new.
    let later = appendStep(doc, 1, {
      toolCall: { callId: "c9", name: "Read", input: { path: "src/a.ts" } }
    }).doc
    later = appendToolResult(later, 1, { callId: "c9", name: "Read", status: "success", data: "y" }).doc
    const grown = grownView(later, before)
    expect(grown.view).toEqual(historyView(later))
    expect(JSON.stringify(grown.view.messages[1])).toContain("Read(src/a.ts) result")
  })

  it("starts where the last view ended: its messages and finished turns are the same objects", () => {
    let doc = beginTurn(emptyHistory, { input: "first" }).doc
    doc = appendStep(doc, 1, { toolCall: { callId: "c1", name: "Read", input: {} } }).doc
    doc = appendToolResult(doc, 1, { callId: "c1", name: "Read", status: "success", data: "x" }).doc
    doc = finishTurn(doc, 1, "done").doc
    const first = grownView(doc)
    const next = grownView(beginTurn(doc, { input: "second" }).doc, first)
    expect(next.view.messages.slice(0, 4)).toEqual(first.view.messages)
    for (const [i, m] of first.view.messages.entries()) expect(next.view.messages[i]).toBe(m)
    expect(next.view.turns[0]).toBe(first.view.turns[0])
    expect(next.view.turns.map((t) => t.turn)).toEqual([1, 2])
  })
})
