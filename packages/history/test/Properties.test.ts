/**
 * Generated sessions (random turns, tools, sizes, crashes, retries, curation, compactions): the
 * invariants of design.md hold after every sequence, and the same sequence gives the same history.
 */
import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import fc from "fast-check"
import { applyCompaction, planCompaction } from "../src/Compaction.ts"
import { dismissMemory, historyView, pinMessage, turnContext } from "../src/HistoryView.ts"
import type { HistoryDocument, Message } from "../src/Message.ts"
import { emptyHistory, textOf, toolCallsOf, toolResultsOf } from "../src/Message.ts"
import { deterministicSummary } from "../src/Summarizer.ts"
import { compressToolResult } from "../src/ToolResultCompressor.ts"
import { appendStep, appendToolResult, beginTurn, finishTurn, turnsOf } from "../src/Turns.ts"

const tools = ["Read", "Grep", "Bash", "Write", "LS", "Glob", "TodoWrite", "Fetch"] as const
const rawResult = (tool: string, size: number) => {
  const lines = Array.from({ length: size }, (_, i) => `line ${i}`)
  switch (tool) {
    case "Read":
      return { file: "a.ts", content: lines.join("\n") }
    case "Grep":
      return { pattern: "x", matches: lines.map((l, i) => `f${i % 7}.ts:${i}:${l}`) }
    case "Bash":
      return { command: "make", exitCode: size % 2, stdout: lines.join("\n"), stderr: lines.join("\n") }
    case "Write":
      return { file: "w.ts", content: lines.join("\n") }
    case "LS":
      return { path: ".", entries: lines }
    case "Glob":
      return { pattern: "*", matches: lines }
    case "TodoWrite":
      return { todos: lines.map((content, i) => ({ content, status: i % 2 ? "pending" : "completed" })) }
    default:
      return lines.join("\n")
  }
}

type Op =
  | {
      readonly _tag: "turn"
      readonly input: string
      readonly key: boolean
      readonly steps: ReadonlyArray<{ readonly tool: string; readonly size: number; readonly error: boolean }>
      readonly crash: "none" | "afterCall" | "afterResult"
      readonly retry: boolean
    }
  | { readonly _tag: "compact"; readonly keepTurns: number }
  | { readonly _tag: "dismiss"; readonly pick: number }
  | { readonly _tag: "pin"; readonly pick: number }

const op: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      _tag: fc.constant("turn" as const),
      input: fc.constantFrom("fix the bug", "explain @src/a.ts", "run the tests", "重构认证模块", "again"),
      key: fc.boolean(),
      steps: fc.array(
        fc.record({
          tool: fc.constantFrom(...tools),
          size: fc.integer({ min: 0, max: 700 }),
          error: fc.boolean()
        }),
        { maxLength: 4 }
      ),
      crash: fc.constantFrom("none" as const, "none" as const, "afterCall" as const, "afterResult" as const),
      retry: fc.boolean()
    })
  },
  {
    weight: 1,
    arbitrary: fc.record({ _tag: fc.constant("compact" as const), keepTurns: fc.integer({ min: 0, max: 6 }) })
  },
  { weight: 1, arbitrary: fc.record({ _tag: fc.constant("dismiss" as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ _tag: fc.constant("pin" as const), pick: fc.nat() }) }
)

let keys = 0
const run = (ops: ReadonlyArray<Op>) => {
  keys = 0
  let doc: HistoryDocument = emptyHistory
  const compactions: Array<{ keepTurns: number; liveTurnsBefore: number; before: HistoryDocument }> = []
  for (const o of ops) {
    if (o._tag === "turn") {
      const inputKey = o.key ? `k${keys++}` : undefined
      const attempt = (current: HistoryDocument) => {
        const began = beginTurn(current, { input: o.input, ...(inputKey ? { inputKey } : {}) })
        let d = began.doc
        if (began.finished) return { doc: d, crashed: false }
        for (const [i, step] of o.steps.entries()) {
          const callId = `c${d.messages.length}-${i}`
          d = appendStep(d, began.turn, {
            text: `Action: ${step.tool}`,
            toolCall: { callId, name: step.tool, input: { path: "a.ts" } }
          }).doc
          if (o.crash === "afterCall" && i === o.steps.length - 1) return { doc: d, crashed: true }
          const compressed = compressToolResult(step.tool, {
            status: step.error ? "error" : "success",
            data: rawResult(step.tool, step.size),
            ...(step.error ? { error: { message: "boom" } } : {})
          })
          d = appendToolResult(d, began.turn, {
            callId,
            name: step.tool,
            status: compressed.status,
            data: compressed.data,
            ...(compressed.error ? { error: compressed.error } : {})
          }).doc
        }
        if (o.crash === "afterResult") return { doc: d, crashed: true }
        return { doc: finishTurn(d, began.turn, "done").doc, crashed: false }
      }
      const first = attempt(doc)
      doc = first.crashed && o.retry ? attempt(first.doc).doc : first.doc
    } else if (o._tag === "compact") {
      const liveTurnsBefore = turnsOf(doc.messages.filter((m) => !m.meta.archivedBy)).length
      const plan = planCompaction(doc, { keepTurns: o.keepTurns })
      if (plan.archive.length > 0) {
        const from = plan.archivedTurns[0]!
        const to = plan.archivedTurns.at(-1)!
        const id = `s${doc.compression.length + 1}`
        const summary = {
          id,
          text: deterministicSummary({ messages: plan.archive, fromTurn: from, toTurn: to }),
          fromTurn: from,
          toTurn: to,
          messageCount: plan.archive.length
        }
        compactions.push({ keepTurns: o.keepTurns, liveTurnsBefore, before: doc })
        doc = applyCompaction(doc, plan, id, summary)
      }
    } else {
      const candidates = doc.messages.filter((m) => (o._tag === "dismiss" ? m.role === "tool" : true))
      if (candidates.length === 0) continue
      const target = candidates[o.pick % candidates.length]!
      const next =
        o._tag === "dismiss" ? dismissMemory(doc, target.id, "not needed") : pinMessage(doc, target.id)
      if (Either.isRight(next)) doc = next.right
    }
  }
  return { doc, compactions }
}

const checkPairs = (messages: ReadonlyArray<Message>) => {
  const calls = messages.flatMap(toolCallsOf).map((c) => c.callId)
  const results = messages.flatMap(toolResultsOf).map((r) => r.callId)
  expect([...results].sort()).toEqual([...calls].sort()) // every call answered once, no orphan result
  messages.forEach((m, i) => {
    for (const call of toolCallsOf(m)) {
      const next = messages[i + 1]
      expect(next !== undefined && toolResultsOf(next).some((r) => r.callId === call.callId)).toBe(true)
    }
  })
}

describe("generated sessions", () => {
  it("keep the input once, tool pairs adjacent, compression limits and compaction rules", () => {
    fc.assert(
      fc.property(fc.array(op, { maxLength: 30 }), (ops) => {
        const { doc, compactions } = run(ops)
        // Invariant 2: one input per turn, in the file and in what the model sees.
        for (const turn of turnsOf(doc.messages)) {
          expect(turn.messages.filter((m) => m.meta.kind === "input")).toHaveLength(1)
        }
        const view = historyView(doc)
        const last = turnsOf(doc.messages).at(-1)
        if (last !== undefined) {
          const input = textOf(last.messages.find((m) => m.meta.kind === "input")!)
          const seen = turnContext(doc, { turn: last.turn, input, scratchpad: [] }).messages
          expect(seen.filter((m) => m.meta.turn === last.turn && m.meta.kind === "input")).toHaveLength(1)
        }
        // Invariant 3: pairs whole and adjacent, in the file and in the view.
        // (In the file only the last turn may hold a call whose tool has not returned yet.)
        const turns = turnsOf(doc.messages)
        const lastTurn = turns.at(-1)
        checkPairs(doc.messages.filter((m) => lastTurn?.finished !== false || m.meta.turn !== lastTurn.turn))
        checkPairs(view.messages)
        // Invariant 4: compressed results respect the limits.
        for (const result of doc.messages.flatMap(toolResultsOf)) {
          const data = result.data as Record<string, unknown> | undefined
          if (result.name === "Read" && data)
            expect(String(data.content).split("\n").length).toBeLessThanOrEqual(500)
          if (result.name === "Grep" && data)
            expect((data.matches as Array<unknown>).length).toBeLessThanOrEqual(5)
          if (result.name === "Bash" && data)
            expect(String(data.stderrTail).split("\n").length).toBeLessThanOrEqual(20)
          if (result.status === "error") expect(result.error?.message).toBeDefined()
        }
        // Invariant 5: whole turns archived, at least keepTurns kept, summaries only appended.
        for (const turn of turnsOf(doc.messages)) {
          const archived = turn.messages.filter((m) => m.meta.archivedBy !== undefined).length
          expect(archived === 0 || archived === turn.messages.length).toBe(true)
        }
        for (const [i, c] of compactions.entries()) {
          const after = i + 1 < compactions.length ? compactions[i + 1]!.before : doc
          const live = turnsOf(after.messages.filter((m) => !m.meta.archivedBy))
          expect(live.length).toBeGreaterThanOrEqual(Math.min(c.keepTurns, c.liveTurnsBefore))
          expect(after.compression.slice(0, c.before.compression.length)).toEqual(c.before.compression)
        }
      }),
      { numRuns: 300 }
    )
  })

  it("compaction is deterministic: the same sequence gives the same history", () => {
    fc.assert(
      fc.property(fc.array(op, { maxLength: 20 }), (ops) => {
        expect(run(ops).doc).toEqual(run(ops).doc)
      }),
      { numRuns: 100 }
    )
  })
})
