import { Either } from "effect"
import { applyCompaction } from "../src/Compaction.ts"
import { dismissMemory } from "../src/HistoryView.ts"
import type { HistoryDocument } from "../src/Message.ts"
import { appendStep, appendToolResult, beginTurn, finishTurn } from "../src/Turns.ts"

/** The message at `at` (modulo their number) dismissed by the model; the same document when it has none. */
export const dismissAt = (doc: HistoryDocument, at: number): HistoryDocument => {
  const target = doc.messages[at % Math.max(1, doc.messages.length)]
  return target === undefined ? doc : Either.getOrElse(dismissMemory(doc, target.id, "gone"), () => doc)
}

/** The first `upTo` messages (modulo their number plus one) archived under a new summary. */
export const compactUpTo = (doc: HistoryDocument, upTo: number): HistoryDocument => {
  const archive = doc.messages.slice(0, upTo % (doc.messages.length + 1))
  const plan = { archive, archivedTurns: [], keptTurns: [], reducedForBudget: false }
  const id = `sum-${doc.compression.length}`
  return applyCompaction(doc, plan, id, {
    id,
    text: "summary",
    fromTurn: 1,
    toTurn: 1,
    messageCount: archive.length
  })
}

/** Appends `count` finished turns, each a Read step and an answer, with some bulk text. */
export const withTurns = (doc: HistoryDocument, count: number, size = 100): HistoryDocument => {
  let current = doc
  for (let i = 0; i < count; i++) {
    const began = beginTurn(current, { input: `question ${i}: ${"context ".repeat(size / 10)}` })
    current = appendStep(began.doc, began.turn, {
      text: `Thought: look\nAction: Write[src/f${i}.ts]`,
      toolCall: { callId: `w${began.turn}`, name: "Write", input: { path: `src/f${i}.ts`, content: "x" } }
    }).doc
    current = appendToolResult(current, began.turn, {
      callId: `w${began.turn}`,
      name: "Write",
      status: "success",
      data: { file: `src/f${i}.ts`, snippet: "y ".repeat(size) }
    }).doc
    current = finishTurn(current, began.turn, `answer ${i}`).doc
  }
  return current
}
