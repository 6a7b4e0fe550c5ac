import { describe, expect, it } from "@effect/vitest"
import { Either, Schema } from "effect"
import * as fc from "fast-check"
import { dismissMemory, historyView, turnContext } from "../src/HistoryView.ts"
import type { HistoryDocument, Message } from "../src/Message.ts"
import { emptyHistory, HistoryDocument as HistoryDocumentSchema, textOf } from "../src/Message.ts"
import {
  ABANDONED_ANSWER,
  appendStep,
  appendToolResult,
  beginTurn,
  danglingCalls,
  finishTurn,
  INTERRUPTED,
  type Turn,
  turnsOf
} from "../src/Turns.ts"

const inputs = (doc: HistoryDocument) => doc.messages.filter((m) => m.meta.kind === "input").map(textOf)

const oneTurn = (doc: HistoryDocument, input: string, key?: string) => {
  const began = beginTurn(doc, { input, ...(key === undefined ? {} : { inputKey: key }) })
  let next = appendStep(began.doc, began.turn, {
    text: "Thought: read it\nAction: Read[src/a.ts]",
    toolCall: { callId: `c${began.turn}`, name: "Read", input: { path: "src/a.ts" } }
  }).doc
  next = appendToolResult(next, began.turn, {
    callId: `c${began.turn}`,
    name: "Read",
    status: "success",
    data: { content: "x" }
  }).doc
  return finishTurn(next, began.turn, `Done ${began.turn}`).doc
}

describe("turns", () => {
  it("records a ReAct turn: the input once, each step with its result, then the answer", () => {
    const doc = oneTurn(emptyHistory, "Fix the bug")
    expect(doc.messages.map((m) => [m.id, m.role, m.meta.kind])).toEqual([
      ["t1-0", "user", "input"],
      ["t1-1", "assistant", "step"],
      ["t1-2", "tool", "step"],
      ["t1-3", "assistant", "final"]
    ])
    expect(doc.messages[3]!.meta.finished).toBe(true)
  })

  it("keeps the references sent with an input on the input message, and they survive the file", () => {
    const references = [
      "[notes.md#Plan]",
      { path: "src/a.ts", startLine: 1, endLine: 3 },
      { path: "p.md", block: "^b3" }
    ]
    const began = beginTurn(emptyHistory, { input: "Review this", references })
    expect(began.doc.messages[0]!.meta.references).toEqual(references)
    const reread = Schema.decodeUnknownSync(HistoryDocumentSchema)(JSON.parse(JSON.stringify(began.doc)))
    expect(reread.messages[0]!.meta.references).toEqual(references)
    expect(
      beginTurn(emptyHistory, { input: "No refs", references: [] }).doc.messages[0]!.meta
    ).not.toHaveProperty("references")
  })

  it("a retry with the same idempotency key never adds the input twice, finished or not", () => {
    const began = beginTurn(emptyHistory, { input: "Fix the bug", inputKey: "k1" })
    const retry = beginTurn(began.doc, { input: "Fix the bug", inputKey: "k1" })
    expect([retry.resumed, retry.finished, inputs(retry.doc)]).toEqual([true, false, ["Fix the bug"]])
    const done = finishTurn(retry.doc, retry.turn, "Fixed").doc
    const late = beginTurn(done, { input: "Fix the bug", inputKey: "k1" })
    expect([late.resumed, late.finished, inputs(late.doc)]).toEqual([true, true, ["Fix the bug"]])
  })

  it("a crash between a tool call and its result, then a retry: the turn resumes, the call gets an error result", () => {
    const began = beginTurn(oneTurn(emptyHistory, "first"), { input: "Refactor auth" })
    const crashed = appendStep(began.doc, began.turn, {
      text: "Action: Bash[pnpm test]",
      toolCall: { callId: "c-crash", name: "Bash", input: { command: "pnpm test" } }
    }).doc
    expect(danglingCalls(crashed.messages)).toHaveLength(1)
    const retry = beginTurn(crashed, { input: "Refactor auth" })
    expect([retry.resumed, retry.turn]).toEqual([true, 2])
    expect(inputs(retry.doc)).toEqual(["first", "Refactor auth"])
    expect(danglingCalls(retry.doc.messages)).toEqual([])
    const closing = retry.doc.messages.at(-1)!
    expect(closing.parts[0]).toMatchObject({
      _tag: "tool-result",
      callId: "c-crash",
      status: "error",
      error: INTERRUPTED
    })
    // The runner continues from the steps already recorded.
    expect(retry.steps.map((m) => m.id)).toEqual(["t2-1", "t2-2"])
  })

  it("a different input after an abandoned turn opens a new turn and closes the old one's calls", () => {
    const began = beginTurn(emptyHistory, { input: "one" })
    const crashed = appendStep(began.doc, began.turn, {
      toolCall: { callId: "x", name: "LS", input: {} }
    }).doc
    const next = beginTurn(crashed, { input: "two" })
    expect([next.resumed, next.turn]).toEqual([false, 2])
    expect(danglingCalls(next.doc.messages)).toEqual([])
    // The abandoned turn is finished where it stands: whole, before the new one.
    expect(turnsOf(next.doc.messages).map((t) => [t.turn, t.finished])).toEqual([
      [1, true],
      [2, false]
    ])
    expect(textOf(next.doc.messages.at(-2)!)).toBe(ABANDONED_ANSWER)
    // A retry of it (its key, after the new turn) gets that final; nothing is added after turn 2.
    const keyed = beginTurn(emptyHistory, { input: "one", inputKey: "k1" })
    const later = beginTurn(keyed.doc, { input: "two" })
    const retry = beginTurn(later.doc, { input: "one", inputKey: "k1" })
    expect([retry.resumed, retry.finished, retry.turn]).toEqual([true, true, 1])
    expect(retry.doc).toBe(later.doc)
  })

  it("while a turn runs the model sees history, the input exactly once, and full observations", () => {
    let doc = oneTurn(emptyHistory, "earlier question")
    const began = beginTurn(doc, { input: "Explain @src/a.ts" })
    doc = began.doc
    const full = { status: "success" as const, data: { content: "line\n".repeat(900) } }
    const context = turnContext(doc, {
      turn: began.turn,
      input: "Explain @src/a.ts",
      scratchpad: [
        {
          text: "Action: Read[src/a.ts]",
          toolCall: { callId: "c9", name: "Read", input: { path: "src/a.ts" } },
          observation: full
        }
      ]
    })
    const texts = context.messages.map((m) => textOf(m))
    expect(texts.filter((t) => t === "Explain @src/a.ts")).toHaveLength(1)
    expect(context.messages.at(-1)!.parts[0]).toMatchObject({ _tag: "tool-result", data: full.data })
    expect(context.messages.slice(0, 4).map((m) => m.id)).toEqual(["t1-0", "t1-1", "t1-2", "t1-3"])
  })

  it("a dismissed result shows a placeholder; the call and the file keep everything", () => {
    const doc = oneTurn(emptyHistory, "read it")
    const dismissed = Either.getOrThrow(
      dismissMemory(doc, "t1-2", "src/a.ts is unrelated to the question", "d1")
    )
    const view = historyView(dismissed)
    expect(view.messages[2]!.parts[0]).toEqual({
      _tag: "tool-result",
      callId: "c1",
      name: "Read",
      status: "success",
      data: "[Read(src/a.ts) result — dismissed by the model: src/a.ts is unrelated to the question]"
    })
    expect(view.messages[1]!.parts[1]).toMatchObject({ _tag: "tool-call", callId: "c1" })
    expect(dismissed.messages[2]!.parts[0]).toMatchObject({ data: { content: "x" } })
    expect(Either.isLeft(dismissMemory(doc, "t1-1", "not a tool result"))).toBe(true)
    expect(Either.flip(dismissMemory(doc, "nope", "x")).pipe(Either.getOrThrow).message).toBe(
      "Message nope: no such message in this history"
    )
  })
})

describe("turnsOf", () => {
  /** The grouping by definition: a turn per number, where its first message is. */
  const reference = (messages: ReadonlyArray<Message>) => {
    const turns: Array<{ turn: number; messages: Array<Message>; finished: boolean }> = []
    for (const m of messages) {
      let t = turns.find((x) => x.turn === m.meta.turn)
      if (t === undefined) {
        t = { turn: m.meta.turn, messages: [], finished: false }
        turns.push(t)
      }
      t.messages.push(m)
      if (m.meta.finished === true) t.finished = true
    }
    return turns
  }
  const message = (turn: number, i: number, finished: boolean): Message => ({
    id: `m${i}`,
    role: finished ? "assistant" : "user",
    parts: [{ _tag: "text", text: `${turn}` }],
    meta: { turn, kind: finished ? "final" : "input", ...(finished ? { finished: true } : {}) }
  })

  it("groups a list that grows from an earlier one as it groups it afresh, keeping the unchanged turns", () => {
    fc.assert(
      fc.property(
        // Turn numbers of the messages, mostly growing (as a history does), sometimes not.
        fc.array(fc.tuple(fc.integer({ min: 0, max: 3 }), fc.boolean()), { minLength: 1, maxLength: 60 }),
        fc.array(fc.integer({ min: 0, max: 60 }), { minLength: 1, maxLength: 5 }),
        (steps, cuts) => {
          let turn = 1
          const all = steps.map(([step, finished], i) => {
            turn = step === 3 ? Math.max(1, turn - 2) : turn + (step === 2 ? 1 : 0)
            return message(turn, i, finished)
          })
          let before: ReadonlyArray<Turn> | undefined
          for (const cut of [...cuts].sort((a, b) => a - b)) {
            // Each a new list, as a new document's messages are.
            const messages = all.slice(0, Math.min(cut, all.length))
            const turns = turnsOf(messages)
            expect(turns).toEqual(reference(messages))
            // As a history grows (turn numbers never going back), turns before the last one are the
            // same objects as in the grouping of the shorter list.
            if (
              before !== undefined &&
              messages.every((m, i) => i === 0 || m.meta.turn >= messages[i - 1]!.meta.turn)
            )
              for (const t of before.slice(0, -1)) {
                const same = turns.find((x) => x.turn === t.turn)
                if (same !== undefined && same.messages.length === t.messages.length) expect(same).toBe(t)
              }
            before = turns.slice()
            // The caller's list: changing it changes nothing kept.
            turns.pop()
            expect(turnsOf(messages)).toEqual(reference(messages))
          }
          // Shorter lists grouped again after longer ones: what was kept was not changed by them.
          for (const cut of cuts) {
            const messages = all.slice(0, Math.min(cut, all.length))
            expect(turnsOf(messages)).toEqual(reference(messages))
          }
          // A list the caller grows in place after it was grouped.
          const growing = all.slice(0, Math.ceil(all.length / 2))
          expect(turnsOf(growing)).toEqual(reference(growing))
          growing.push(...all.slice(growing.length))
          expect(turnsOf(growing)).toEqual(reference(all))
        }
      )
    )
  })

  it("groups a history from where its last list ended, however many other histories were grouped since", () => {
    const history = Array.from({ length: 6 }, (_, i) => message(i + 1, i, true))
    const first = turnsOf(history)
    // Other sessions' histories, several lists each, as a gateway serving them in turn groups them.
    for (let s = 0; s < 12; s++) {
      const other = [message(1, 1000 + s, false)]
      turnsOf(other)
      turnsOf([...other, message(1, 2000 + s, true)])
    }
    const grown = turnsOf([...history, message(7, 6, true)])
    expect(grown).toEqual(reference([...history, message(7, 6, true)]))
    for (const [i, t] of first.entries()) expect(grown[i]).toBe(t)
  })

  it("keeps each of a history's lists however often another grows meanwhile", () => {
    const history = Array.from({ length: 6 }, (_, i) => message(i + 1, i, true))
    const first = turnsOf(history)
    // The same messages in a list of its own (a view that curated nothing), then other sessions'.
    const view = [...history]
    expect(turnsOf(view)).toEqual(first)
    for (let s = 0; s < 12; s++) turnsOf([message(100 + s, 100 + s, true)])
    const grown = turnsOf([...view, message(7, 6, true)])
    expect(grown.map((t) => t.turn)).toEqual([1, 2, 3, 4, 5, 6, 7])
    for (const [i, t] of first.entries()) expect(grown[i]).toBe(t)
    // Another list of the same history (memory's, without its summaries) grows once, while the
    // document's grows step by step (a turn with many tool steps): each grows from its own.
    const memory = [...history, message(7, 50, true)]
    const memoryTurns = turnsOf(memory)
    let doc: ReadonlyArray<Message> = [...history, message(7, 6, true)]
    for (let step = 0; step < 8; step++) {
      doc = [...doc, message(7, 60 + step, false)]
      turnsOf(doc)
    }
    const memoryGrown = turnsOf([...memory, message(8, 51, true)])
    expect(memoryGrown).toEqual(reference([...memory, message(8, 51, true)]))
    for (const [i, t] of memoryTurns.entries()) expect(memoryGrown[i]).toBe(t)
  })
})
