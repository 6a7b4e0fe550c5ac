import type { HistoryDocument } from "../src/Message.ts"
import { appendStep, appendToolResult, beginTurn, finishTurn } from "../src/Turns.ts"

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
