import { describe, expect, it } from "@effect/vitest"
import { Either, SchemaAST } from "effect"
import fc from "fast-check"
import { decodeHistoryJson, decodeHistoryText } from "../src/HistoryFormat.ts"
import type { HistoryDocument, Message } from "../src/Message.ts"
import {
  emptyHistory,
  HistoryDocument as HistoryDocumentSchema,
  textOf,
  toolCallsOf,
  toolResultsOf
} from "../src/Message.ts"
import { turnsOf } from "../src/Turns.ts"

const read = (value: unknown, file = "s1/messages.json"): HistoryDocument =>
  Either.getOrThrow(decodeHistoryText(typeof value === "string" ? value : JSON.stringify(value), file))
const refused = (value: unknown, file = "s1/messages.json") =>
  Either.flip(decodeHistoryText(typeof value === "string" ? value : JSON.stringify(value), file)).pipe(
    Either.getOrThrow
  )

/** What a reader of the conversation sees: roles, texts, tool calls and results, in order. */
const conversation = (messages: ReadonlyArray<Message>) =>
  messages.map((m) => ({
    role: m.role,
    text: textOf(m),
    calls: toolCallsOf(m).map((c) => [c.callId, c.name, c.input]),
    results: toolResultsOf(m).map((r) => [r.callId, r.name, r.status, r.data, r.error])
  }))

const openAIStyle = [
  { role: "system", content: "You are a code agent." },
  { role: "user", content: "What does src/auth.ts do?" },
  {
    role: "assistant",
    content: null,
    tool_calls: [
      { id: "call_1", type: "function", function: { name: "read_file", arguments: '{"path":"src/auth.ts"}' } }
    ]
  },
  { role: "tool", tool_call_id: "call_1", content: "export const login = () => {}" },
  { role: "assistant", content: "It exports login." },
  {
    role: "user",
    content: [
      { type: "text", text: "And " },
      { type: "text", text: "tests?" }
    ]
  },
  {
    role: "assistant",
    content: [
      { type: "text", text: "Let me look." },
      { type: "tool_use", id: "call_2", name: "list_files", input: { path: "test" } }
    ]
  },
  {
    role: "user",
    content: [
      {
        type: "tool_result",
        tool_use_id: "call_2",
        content: '{"status":"error","error":{"message":"no test dir"}}'
      }
    ]
  }
]

describe("decodeHistoryText", () => {
  it("reads [] as a new session and the v1 document as it is", () => {
    expect(read([])).toEqual(emptyHistory)
    const v1 = read(openAIStyle)
    expect(read(JSON.stringify(v1))).toEqual(v1)
  })

  it("keeps a v1 document that is one field for field as it is, and decodes one with more into a copy without them", () => {
    // The store keeps the JSON it read beside the document: a decoded copy would hold every message twice.
    const v1 = JSON.parse(JSON.stringify(read(openAIStyle))) as HistoryDocument
    expect(Either.getOrThrow(decodeHistoryJson(v1, "s1/messages.json"))).toBe(v1)
    const more = { ...v1, messages: [{ ...v1.messages[0]!, note: "not ours" }, ...v1.messages.slice(1)] }
    const decoded = Either.getOrThrow(decodeHistoryJson(more, "s1/messages.json"))
    expect(decoded).not.toBe(more)
    expect(decoded).toEqual(v1) // As it is only while the schema transforms nothing (its decoded and encoded sides are one).
    expect(SchemaAST.typeAST(HistoryDocumentSchema.ast)).toBe(HistoryDocumentSchema.ast)
  })

  it("reads a plain array: a turn per user message, the last assistant text is the final answer", () => {
    const doc = read(openAIStyle)
    const turns = turnsOf(doc.messages)
    expect(turns.map((t) => [t.turn, t.finished, t.messages.length])).toEqual([
      [1, true, 5],
      [2, false, 3]
    ])
    expect(doc.messages.map((m) => [m.role, m.meta.kind])).toEqual([
      ["system", undefined],
      ["user", "input"],
      ["assistant", "step"],
      ["tool", "step"],
      ["assistant", "final"],
      ["user", "input"],
      ["assistant", "step"],
      // A user message carrying only tool results answers the call: it opens no turn.
      ["tool", "step"]
    ])
    expect(textOf(doc.messages[5]!)).toBe("And tests?")
    expect(toolCallsOf(doc.messages[2]!)).toEqual([
      { _tag: "tool-call", callId: "call_1", name: "read_file", input: { path: "src/auth.ts" } }
    ])
    expect(toolResultsOf(doc.messages[3]!)).toEqual([
      {
        _tag: "tool-result",
        callId: "call_1",
        name: "read_file",
        status: "success",
        data: "export const login = () => {}"
      }
    ])
    expect(toolResultsOf(doc.messages[7]!)).toEqual([
      {
        _tag: "tool-result",
        callId: "call_2",
        name: "list_files",
        status: "error",
        error: { message: "no test dir" }
      }
    ])
  })

  it("round-trips: a plain array read, written as v1 and read again loses nothing", () => {
    const first = read(openAIStyle)
    const written = `${JSON.stringify(first, null, 2)}\n`
    expect(JSON.parse(written).format).toBe("ctxo.history/v1")
    const again = read(written)
    expect(again).toEqual(first)
    expect(conversation(again.messages)).toEqual([
      { role: "system", text: "You are a code agent.", calls: [], results: [] },
      { role: "user", text: "What does src/auth.ts do?", calls: [], results: [] },
      { role: "assistant", text: "", calls: [["call_1", "read_file", { path: "src/auth.ts" }]], results: [] },
      {
        role: "tool",
        text: "",
        calls: [],
        results: [["call_1", "read_file", "success", "export const login = () => {}", undefined]]
      },
      { role: "assistant", text: "It exports login.", calls: [], results: [] },
      { role: "user", text: "And tests?", calls: [], results: [] },
      {
        role: "assistant",
        text: "Let me look.",
        calls: [["call_2", "list_files", { path: "test" }]],
        results: []
      },
      {
        role: "tool",
        text: "",
        calls: [],
        results: [["call_2", "list_files", "error", undefined, { message: "no test dir" }]]
      }
    ])
  })

  it("says which message is wrong, where and what was expected, in one short sentence", () => {
    const badRole = refused([
      { role: "user", content: "hi" },
      { role: "bot", content: "hello" }
    ])
    expect(badRole._tag).toBe("HistoryCorrupt")
    expect(badRole.message).toBe(
      'History file s1/messages.json cannot be read: [1].role: expected "user", "assistant", "tool" or "system", got "bot"'
    )
    const badV1 = refused({
      format: "ctxo.history/v1",
      messages: [{ id: "a", role: "user", parts: [], meta: {} }],
      compression: []
    })
    expect(badV1.message).toBe(
      "History file s1/messages.json cannot be read: messages[0].meta.turn: a required field is missing"
    )
    expect(refused("{not json").message).toMatch(
      /^History file s1\/messages\.json cannot be read: \(root\): not valid JSON/
    )
    expect(refused(42).message).toBe(
      'History file s1/messages.json cannot be read: (root): expected an object with format "ctxo.history/v1" or an array of messages, got number'
    )
    for (const error of [badRole, badV1]) expect(error.message).not.toMatch(/Invalid manifest|readonly/)
  })

  it("never echoes more than 120 characters of an oversized value, and stays under 300 characters", () => {
    const huge = "A".repeat(100_000)
    const errors = [
      refused([{ role: "user", content: { text: huge } }]),
      refused([{ role: huge, content: "x" }]),
      refused({ format: "ctxo.history/v1", messages: huge, compression: [] }),
      refused([{ role: huge }], `${"deep/".repeat(100)}messages.json`)
    ]
    for (const error of errors) {
      expect(error.message.length).toBeLessThanOrEqual(300)
      const longestRun = Math.max(...(error.message.match(/A+/g) ?? [""]).map((run) => run.length))
      expect(longestRun).toBeLessThanOrEqual(120)
    }
    for (const error of errors.slice(0, 3)) {
      expect(error.message).toMatch(/^History file s1\/messages\.json cannot be read: /)
    }
    expect(errors[0]!.message).toContain("[0].content: expected")
    expect(errors[3]!.message).toMatch(/^History file deep\/deep\/.*: \[0\]\.role: expected/)
  })

  it("round-trips any plain conversation: roles, texts, tool calls and results survive v1", () => {
    const text = fc.string({ minLength: 1, maxLength: 30 })
    const step = fc.record({
      thought: fc.option(text, { nil: undefined }),
      calls: fc.array(
        fc.record({
          name: fc.constantFrom("read_file", "search"),
          arg: text,
          result: text,
          failed: fc.boolean()
        }),
        {
          minLength: 1,
          maxLength: 3
        }
      )
    })
    const turn = fc.record({
      input: text,
      steps: fc.array(step, { maxLength: 3 }),
      answer: fc.option(text, { nil: undefined })
    })
    fc.assert(
      fc.property(fc.array(turn, { maxLength: 5 }), (turns) => {
        let n = 0
        const plain: Array<Record<string, unknown>> = []
        const expected: Array<ReturnType<typeof conversation>[number]> = []
        for (const t of turns) {
          plain.push({ role: "user", content: t.input })
          expected.push({ role: "user", text: t.input, calls: [], results: [] })
          for (const s of t.steps) {
            const calls = s.calls.map((c) => ({ ...c, id: `call_${++n}` }))
            plain.push({
              role: "assistant",
              content: s.thought ?? null,
              tool_calls: calls.map((c) => ({
                id: c.id,
                type: "function",
                function: { name: c.name, arguments: JSON.stringify({ q: c.arg }) }
              }))
            })
            expected.push({
              role: "assistant",
              text: s.thought ?? "",
              calls: calls.map((c) => [c.id, c.name, { q: c.arg }]),
              results: []
            })
            for (const c of calls) {
              const content = c.failed
                ? JSON.stringify({ status: "error", error: { message: c.result } })
                : JSON.stringify({ status: "success", data: c.result })
              plain.push({ role: "tool", tool_call_id: c.id, content })
              expected.push({
                role: "tool",
                text: "",
                calls: [],
                results: [
                  c.failed
                    ? [c.id, c.name, "error", undefined, { message: c.result }]
                    : [c.id, c.name, "success", c.result, undefined]
                ]
              })
            }
          }
          if (t.answer !== undefined) {
            plain.push({ role: "assistant", content: t.answer })
            expected.push({ role: "assistant", text: t.answer, calls: [], results: [] })
          }
        }
        const first = read(plain)
        const again = read(`${JSON.stringify(first, null, 2)}\n`)
        expect(again).toEqual(first)
        expect(conversation(again.messages)).toEqual(expected)
        const finished = turnsOf(again.messages).map((t) => t.finished)
        expect(finished).toEqual(turns.map((t) => t.answer !== undefined))
      }),
      { numRuns: 200 }
    )
  })
})
