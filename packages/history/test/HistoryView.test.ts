/**
 * Reduced turns and the notes of a request that leaves history out: what a model reads in place of
 * a tool result, a long step or a turn it cannot be shown.
 */
import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import {
  dismissMemory,
  historyView,
  leftOutTurnsNote,
  omittedResultText,
  pinMessage,
  reduceTurn,
  turnSpans
} from "../src/HistoryView.ts"
import type { HistoryDocument, ToolResultPart } from "../src/Message.ts"
import { emptyHistory, textOf, toolCallsOf, toolResultsOf } from "../src/Message.ts"
import { appendStep, appendToolResult, beginTurn, finishTurn, turnsOf } from "../src/Turns.ts"

const session = (): HistoryDocument => {
  const b = beginTurn(emptyHistory, { input: "Why does login fail?" })
  let doc = appendStep(b.doc, b.turn, {
    text: "Thought: read it.\nAction: Read[src/auth.ts]",
    toolCall: { callId: "c1", name: "Read", input: { path: "src/auth.ts" } }
  }).doc
  doc = appendToolResult(doc, b.turn, {
    callId: "c1",
    name: "Read",
    status: "success",
    data: { file: "src/auth.ts", content: "export const login = () => {}\n".repeat(300) },
    full: "tool-results/c1.json"
  }).doc
  doc = appendStep(doc, b.turn, {
    text: `Thought: write the fix.\nAction: Write[${"x".repeat(2_000)}]`,
    toolCall: { callId: "c2", name: "Write", input: { path: "src/auth.ts", content: "y".repeat(5_000) } }
  }).doc
  doc = appendToolResult(doc, b.turn, {
    callId: "c2",
    name: "Write",
    status: "error",
    error: { code: "EACCES", message: "permission denied: src/auth.ts" }
  }).doc
  return finishTurn(doc, b.turn, "The password check is inverted.").doc
}

const historyViewOf = (doc: HistoryDocument) => historyView(doc).messages

describe("reduceTurn", () => {
  it("shows each tool result as a placeholder naming the call and the file, keeps input, answer, calls and errors", () => {
    const turn = turnsOf(session().messages)[0]!
    const reduced = reduceTurn(turn)
    expect(reduced.messages.map((m) => m.id)).toEqual(turn.messages.map((m) => m.id))
    const results = reduced.messages.flatMap(toolResultsOf)
    expect(results[0]).toEqual({
      _tag: "tool-result",
      callId: "c1",
      name: "Read",
      status: "success",
      data: "[Read(src/auth.ts) result — not shown to fit the budget; the full result is on file: tool-results/c1.json]"
    } satisfies ToolResultPart)
    // A result kept nowhere else but in history: the history file and the message.
    expect(results[1]!.data).toBe(
      `[Write(src/auth.ts) result — not shown to fit the budget; the full result is on file: messages.json (message ${turn.messages[4]!.id})]`
    )
    expect(results[1]!.error).toEqual({ code: "EACCES", message: "permission denied: src/auth.ts" })
    expect(textOf(reduced.messages[0]!)).toBe("Why does login fail?")
    expect(textOf(reduced.messages.at(-1)!)).toBe("The password check is inverted.")
    // Every call keeps its result; long words and arguments are cut, marked.
    expect(reduced.messages.flatMap(toolCallsOf).map((c) => c.callId)).toEqual(["c1", "c2"])
    const write = reduced.messages.flatMap(toolCallsOf)[1]!.input as { content: string }
    expect(write.content).toMatch(/^y{200}… \[4800 more characters not shown to fit the budget; on file: /)
    expect(textOf(reduced.messages[3]!)).toMatch(/… \[\d+ more characters not shown to fit the budget/)
  })

  it("leaves pinned and curated messages as they are, and a turn with nothing to reduce the same object", () => {
    let doc = session()
    const read = doc.messages.find((m) => m.role === "tool")!
    doc = Either.getOrThrow(pinMessage(doc, read.id))
    const turn = turnsOf(doc.messages)[0]!
    expect(toolResultsOf(reduceTurn(turn).messages.find((m) => m.id === read.id)!)[0]!.data).toEqual(
      toolResultsOf(read)[0]!.data
    )
    const dismissed = Either.getOrThrow(dismissMemory(session(), read.id, "not needed"))
    const curated = turnsOf(historyViewOf(dismissed))[0]!
    expect(reduceTurn(curated).messages.find((m) => m.id === read.id)).toBe(
      curated.messages.find((m) => m.id === read.id)
    )
    const b = beginTurn(emptyHistory, { input: "hi" })
    const plain = turnsOf(finishTurn(b.doc, b.turn, "hello").doc.messages)[0]!
    expect(reduceTurn(plain)).toBe(plain)
    // The same turn reduces to the same messages (a warm compile counts nothing again).
    const again = turnsOf(session().messages)[0]!
    expect(reduceTurn(again).messages[2]).toBe(reduceTurn(again).messages[2])
  })
})

describe("curation", () => {
  it("a dismissed error result keeps its error whole", () => {
    const doc = session()
    const write = doc.messages.filter((m) => m.role === "tool")[1]!
    const view = historyView(Either.getOrThrow(dismissMemory(doc, write.id, "tried, no permission")))
    const shown = toolResultsOf(view.messages.find((m) => m.id === write.id)!)[0]!
    expect(shown.data).toBe("[Write(src/auth.ts) result — dismissed by the model: tried, no permission]")
    expect(shown.error).toEqual({ code: "EACCES", message: "permission denied: src/auth.ts" })
  })
})

describe("notes", () => {
  it("names left-out turns as spans, with where they are on file", () => {
    expect(turnSpans([9, 3, 4, 5, 12, 13])).toBe("turns 3-5; turn 9; turns 12-13")
    expect(leftOutTurnsNote([])).toBe("")
    expect(leftOutTurnsNote([1, 2, 3, 7])).toBe(
      "(Earlier turns 1-3; turn 7 left out to fit the budget, with no summary shown for them; on file in messages.json, full tool results in tool-results/.)"
    )
    expect(leftOutTurnsNote([4], "history.json")).toBe(
      "(Earlier turn 4 left out to fit the budget, with no summary shown for it; on file in history.json, full tool results in tool-results/.)"
    )
    expect(omittedResultText("Grep(TODO)", "tool-results/g.json")).toBe(
      "[Grep(TODO) result — not shown to fit the budget; the full result is on file: tool-results/g.json]"
    )
  })
})
