import { describe, expect, it } from "@effect/vitest"
import { importanceOf, PROMOTION_THRESHOLD } from "../src/Importance.ts"
import type { HistoryDocument } from "../src/Message.ts"
import { appendStep, appendToolResult, beginTurn, finishTurn, turnsOf } from "../src/Turns.ts"

const empty: HistoryDocument = { format: "ctxo.history/v1", messages: [], compression: [] }
const turn = (input: string, answer: string, pinned = false) => {
  const b = beginTurn(empty, { input })
  const doc = finishTurn(b.doc, b.turn, answer).doc
  const messages = pinned
    ? doc.messages.map((m) => ({ ...m, meta: { ...m.meta, pinned: true } }))
    : doc.messages
  return turnsOf(messages)[0]!
}

describe("importance of a turn (the documented rules)", () => {
  it("scores small talk 0 and a preference with an anchor over the threshold", () => {
    expect(importanceOf(turn("hi", "Hello!"))).toEqual({ score: 0, reasons: [] })
    const kept = importanceOf(turn("Remember that my manager is Priya.", "Got it."))
    expect(kept.score).toBeGreaterThan(PROMOTION_THRESHOLD)
    expect(kept.reasons).toEqual([
      "the user states something to keep (a preference, decision, fact or rule)",
      "concrete anchors (a date, time, amount, version or name)"
    ])
    // A statement to keep alone is not enough; pinned, it is.
    expect(importanceOf(turn("I prefer short answers.", "OK.")).score).toBe(0.5)
    expect(importanceOf(turn("I prefer short answers.", "OK.", true)).score).toBe(0.8)
  })

  it("reads Chinese statements too", () => {
    const zh = importanceOf(turn("记住：我们决定在 2026-12-01 发布 3.0 版本。", "好的，已记下。"))
    expect(zh.score).toBeGreaterThan(PROMOTION_THRESHOLD)
  })

  it("counts a problem settled with files changed", () => {
    const b = beginTurn(empty, { input: "the build is red" })
    let doc = appendStep(b.doc, b.turn, {
      text: "",
      toolCall: { callId: "c1", name: "write_file", input: { path: "a.ts", content: "x" } }
    }).doc
    doc = appendToolResult(doc, b.turn, {
      callId: "c1",
      name: "write_file",
      status: "error",
      error: { message: "EACCES" }
    }).doc
    doc = finishTurn(doc, b.turn, "Fixed: the root cause was a stale lockfile in v1.4.2.").doc
    const scored = importanceOf(turnsOf(doc.messages)[0]!)
    expect(scored.reasons).toEqual([
      "concrete anchors (a date, time, amount, version or name)",
      "a problem was met and settled",
      "the turn changed files"
    ])
    expect(scored.score).toBe(0.55)
  })
})
