import { readFileSync } from "node:fs"
import { describe, expect, it } from "@effect/vitest"
import { createPartAccumulator, pushChatEvent } from "../src/PartAccumulator.ts"
import { createReadTracker } from "../src/ReadTracker.ts"

describe("createPartAccumulator", () => {
  it("merges consecutive text deltas; tool calls and results break the merge", () => {
    const acc = createPartAccumulator()
    for (const delta of ["Let me ", "read ", "it."]) acc.push({ type: "text-delta", delta })
    acc.push({ type: "tool-call", callId: "c1", name: "read_file", input: { path: "a.md" } })
    acc.push({ type: "tool-result", callId: "c1", name: "read_file", status: "success", data: "# A" })
    acc.push({ type: "text-delta", delta: "It says " })
    acc.push({ type: "text-delta", delta: "A." })
    expect(acc.getParts()).toEqual([
      { _tag: "text", text: "Let me read it." },
      { _tag: "tool-call", callId: "c1", name: "read_file", input: { path: "a.md" } },
      { _tag: "tool-result", callId: "c1", name: "read_file", status: "success", data: "# A" },
      { _tag: "text", text: "It says A." }
    ])
    expect(acc.getText()).toBe("Let me read it.It says A.")
    expect(acc.getToolEvents().map((e) => e.type)).toEqual(["tool-call", "tool-result"])
    const message = acc.toMessage("session-1", 4)!
    expect([
      message.role,
      message.meta.turn,
      message.id.startsWith("session-1-"),
      message.parts.length
    ]).toEqual(["assistant", 4, true, 4])
  })

  it("gives no message when nothing was streamed", () => {
    const acc = createPartAccumulator()
    acc.push({ type: "text-delta", delta: "" })
    expect(acc.toMessage("s")).toBeNull()
  })

  it("reads the chat stream's wire events: arguments parsed, a tool's result as status, data and error", () => {
    const acc = createPartAccumulator()
    const events = [
      { type: "turn", turn: 3, resumed: false },
      { type: "text-delta", text: "Reading " },
      { type: "text-delta", text: "it." },
      { type: "tool-call", id: "c1", name: "read_file", arguments: '{"path":"a.md"}' },
      {
        type: "tool-result",
        id: "c1",
        name: "read_file",
        result: { status: "success", data: "# A", text: "x" }
      },
      { type: "tool-call", id: "c2", name: "search", arguments: "not json" },
      {
        type: "tool-result",
        id: "c2",
        name: "search",
        result: { status: "error", error: { code: "E", message: "bad pattern" } }
      },
      { type: "usage", inputTokens: 10, outputTokens: 2 },
      { type: "text-delta", text: "Done." }
    ]
    expect(events.map((e) => pushChatEvent(acc, e))).toEqual([
      false,
      true,
      true,
      true,
      true,
      true,
      true,
      false,
      true
    ])
    expect(acc.getParts()).toEqual([
      { _tag: "text", text: "Reading it." },
      { _tag: "tool-call", callId: "c1", name: "read_file", input: { path: "a.md" } },
      { _tag: "tool-result", callId: "c1", name: "read_file", status: "success", data: "# A" },
      { _tag: "tool-call", callId: "c2", name: "search", input: { raw: "not json" } },
      {
        _tag: "tool-result",
        callId: "c2",
        name: "search",
        status: "error",
        error: { code: "E", message: "bad pattern" }
      },
      { _tag: "text", text: "Done." }
    ])
  })

  it("uses no Node-only APIs, so a browser can load it", () => {
    const source = readFileSync(new URL("../src/PartAccumulator.ts", import.meta.url), "utf8")
    expect(source).not.toMatch(/from "node:|require\(|process\.|Buffer/)
  })
})

describe("createReadTracker", () => {
  it("notes a file modified between two reads", () => {
    const tracker = createReadTracker()
    expect(tracker.observe("src/a.ts", 1000)).toBeUndefined()
    expect(tracker.observe("src/a.ts", 1000)).toBeUndefined()
    expect(tracker.observe("src/a.ts", new Date(2000))).toBe("Note: src/a.ts was modified externally.")
    expect(tracker.observe("src/b.ts", "2026-01-01T00:00:00Z")).toBeUndefined()
  })
})
