import type { HistoryDocument, Message } from "@ctxo/history/Message"
import { emptyHistory } from "@ctxo/history/Message"
import { appendStep, appendToolResult, beginTurn, finishTurn } from "@ctxo/history/Turns"
import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import fc from "fast-check"
import type { Composition } from "../src/Composer.ts"
import { compose, policies } from "../src/Composer.ts"
import { openAIMessageJson, renderAnthropic, renderOpenAI, renderReAct } from "../src/Render.ts"

const history = (): ReadonlyArray<Message> => {
  let doc = emptyHistory
  const began = beginTurn(doc, { input: "Read the config" })
  doc = appendStep(began.doc, 1, {
    text: "Thought: read it",
    toolCall: { callId: "c1", name: "read_file", input: { path: "a.json" } }
  }).doc
  doc = appendToolResult(doc, 1, {
    callId: "c1",
    name: "read_file",
    status: "success",
    data: { content: "{}" }
  }).doc
  doc = finishTurn(doc, 1, "It is empty.").doc
  return doc.messages
}

const contexts = {
  knowledge__context: "K",
  framework__context: "F",
  todo__context: "T",
  compression__context: "S",
  experience__context: "E",
  zeta__context: "Z",
  alpha__context: "A"
}

const ids = (c: Composition) => c.layers.map((l) => l.id)

describe("compose", () => {
  it("orders layers by the policy alone, whatever order the contexts come in", () => {
    const layered = Either.getOrThrow(
      compose({ policy: "layered", systemPrompt: "SYS", contexts, checkpointMessages: history(), query: "Q" })
    )
    expect(ids(layered)).toEqual([
      "system_prompt",
      "framework__context",
      "experience__context",
      "knowledge__context",
      "todo__context",
      "alpha__context",
      "zeta__context",
      "compression__context",
      "checkpoint_messages",
      "query"
    ])
    const code = Either.getOrThrow(
      compose({
        policy: "code-agent",
        systemPrompt: "SYS",
        contexts: { todo__context: "T", rules__context: "R" },
        checkpointMessages: history(),
        query: "Q"
      })
    )
    expect(ids(code)).toEqual([
      "system_prompt",
      "rules__context",
      "checkpoint_messages",
      "query",
      "todo__context"
    ])
  })

  it("keeps a worker's running turn (the one it answers) while it drops every earlier turn", () => {
    let doc: HistoryDocument = { format: "ctxo.history/v1", messages: history(), compression: [] }
    doc = beginTurn(doc, { input: "Chunk 2: summarize" }).doc
    doc = appendStep(doc, 2, { toolCall: { callId: "c2", name: "read_file", input: { path: "b" } } }).doc
    doc = appendToolResult(doc, 2, { callId: "c2", name: "read_file", status: "success", data: "B" }).doc
    const worker = Either.getOrThrow(
      compose({
        policy: "layered",
        systemPrompt: "SYS",
        contexts,
        checkpointMessages: doc.messages,
        runningTurn: 2,
        process: { role: "map-worker" }
      })
    )
    const kept = worker.layers.flatMap((l) => (l._tag === "history" ? l.messages : []))
    expect(kept.map((m) => m.meta.turn)).toEqual([2, 2, 2])
    expect(renderOpenAI(worker).messages.filter((m) => m.role === "user")).toEqual([
      { role: "user", content: "Chunk 2: summarize" }
    ])
  })

  it("applies the process rules: workers get no history and, unshared, only the framework", () => {
    const worker = Either.getOrThrow(
      compose({
        policy: "layered",
        systemPrompt: "SYS",
        contexts,
        checkpointMessages: history(),
        query: "Q",
        process: { role: "map-worker" }
      })
    )
    expect(ids(worker)).toEqual(["system_prompt", "framework__context", "query"])
    const withKnowledge = Either.getOrThrow(
      compose({
        policy: "layered",
        systemPrompt: "SYS",
        contexts,
        checkpointMessages: history(),
        query: "Q",
        process: { role: "map-worker", knowledge: true }
      })
    )
    expect(ids(withKnowledge)).toEqual(["system_prompt", "framework__context", "knowledge__context", "query"])
    const reducer = Either.getOrThrow(
      compose({
        policy: "layered",
        systemPrompt: "SYS",
        contexts,
        checkpointMessages: history(),
        query: "Q",
        process: { role: "reducer" }
      })
    )
    expect(ids(reducer)).not.toContain("checkpoint_messages")
    expect(ids(reducer)).toContain("experience__context")
    const unshared = Either.getOrThrow(
      compose({
        policy: "layered",
        systemPrompt: "SYS",
        contexts,
        checkpointMessages: history(),
        query: "Q",
        process: { enableShareContext: false }
      })
    )
    expect(ids(unshared)).toEqual(["system_prompt", "framework__context", "checkpoint_messages", "query"])
  })

  it("rejects keys that are not contexts, and an agent's system prompt offered as one", () => {
    const bad = (key: string) =>
      Either.flip(
        compose({
          policy: "layered",
          systemPrompt: "",
          contexts: { [key]: "x" },
          checkpointMessages: [],
          query: "Q"
        })
      ).pipe(Either.getOrThrow)
    expect(bad("knowledge").message).toBe('Context "knowledge": context keys end in "__context"')
    expect(bad("system_prompt__context").message).toContain("never shared")
  })

  it("lets the query enter by one path only", () => {
    const began = beginTurn({ ...emptyHistory, messages: [...history()] }, { input: "Next question" })
    const error = Either.flip(
      compose({
        policy: "layered",
        systemPrompt: "",
        contexts: {},
        checkpointMessages: began.doc.messages,
        query: "Next question"
      })
    ).pipe(Either.getOrThrow)
    expect(error._tag).toBe("DuplicateInput")
    // The same words asked again after a finished turn are a new input.
    expect(
      Either.isRight(
        compose({
          policy: "layered",
          systemPrompt: "",
          contexts: {},
          checkpointMessages: history(),
          query: "Read the config"
        })
      )
    ).toBe(true)
  })

  it("properties: policy order, the input exactly once in every rendering, byte-identical output", () => {
    const keys = fc.subarray([
      ...Object.keys(contexts),
      "rules__context",
      "tools__context",
      "profile__context",
      "extra_one__context"
    ])
    fc.assert(
      fc.property(
        fc.constantFrom("layered" as const, "code-agent" as const, "notebook" as const),
        keys,
        fc
          .string({ minLength: 1, maxLength: 20 })
          .filter((q) => q.trim() !== "" && !q.includes("\n") && q !== "Read the config"),
        fc.boolean(),
        (policy, chosen, query, withHistory) => {
          const ctx = Object.fromEntries(chosen.map((k) => [k, `text of ${k}`]))
          const input = {
            policy,
            systemPrompt: "SYS",
            contexts: ctx,
            checkpointMessages: withHistory ? history() : [],
            query
          }
          const composition = Either.getOrThrow(compose(input))
          // Invariant 1: layers follow the policy order.
          const order = policies[policy].order
          const position = (id: string) =>
            order.includes(id as never) ? order.indexOf(id as never) : order.indexOf("extra_contexts")
          const positions = ids(composition).map(position)
          expect(positions).toEqual([...positions].sort((a, b) => a - b))
          // Invariant 2: the input appears exactly once.
          const openai = renderOpenAI(composition).messages.filter(
            (m) => m.role === "user" && m.content === query
          )
          expect(openai).toHaveLength(1)
          const blocks = renderAnthropic(composition).messages.flatMap((m) => m.content)
          expect(blocks.filter((b) => b.type === "text" && b.text === query)).toHaveLength(1)
          expect(
            renderReAct(composition)
              .prompt.split("\n\n")
              .filter((block) => block === `[user] ${query}`)
          ).toHaveLength(1)
          // Invariant 7: same input, byte-identical output.
          expect(JSON.stringify(renderOpenAI(Either.getOrThrow(compose(input))))).toBe(
            JSON.stringify(renderOpenAI(composition))
          )
        }
      ),
      { numRuns: 400 }
    )
  })
})

describe("renderers", () => {
  const composition = Either.getOrThrow(
    compose({
      policy: "code-agent",
      systemPrompt: "SYS",
      contexts: { rules__context: "RULES", compression__context: "SUMMARY", todo__context: "TODO" },
      checkpointMessages: history(),
      query: "Q"
    })
  )

  it("OpenAI: system layers in place, tool calls and results adjacent", () => {
    expect(renderOpenAI(composition).messages).toEqual([
      { role: "system", content: "SYS" },
      { role: "system", content: "RULES" },
      { role: "system", content: "SUMMARY" },
      { role: "user", content: "Read the config" },
      {
        role: "assistant",
        content: "Thought: read it",
        tool_calls: [
          { id: "c1", type: "function", function: { name: "read_file", arguments: '{"path":"a.json"}' } }
        ]
      },
      { role: "tool", tool_call_id: "c1", content: '{"status":"success","data":{"content":"{}"}}' },
      { role: "assistant", content: "It is empty." },
      { role: "user", content: "Q" },
      { role: "system", content: "TODO" }
    ])
  })

  it("OpenAI: a history message renders to one frozen object, to its last nested one, every time", () => {
    // What a request is sent as is kept by these objects (`@ctxo/agent/ModelClient`'s
    // `requestBody`): a change to one would send what it was before the change.
    const deepFrozen = (value: unknown): boolean =>
      typeof value !== "object" ||
      value === null ||
      (Object.isFrozen(value) && Object.values(value).every(deepFrozen))
    const first = renderOpenAI(composition).messages
    const again = renderOpenAI(composition).messages
    const fromHistory = first.filter((m) => m.role !== "system" && !(m.role === "user" && m.content === "Q"))
    expect(fromHistory).toHaveLength(4)
    for (const m of fromHistory) {
      expect(deepFrozen(m)).toBe(true)
      expect(again).toContain(m)
    }
    expect(() => {
      ;(fromHistory[1] as unknown as { tool_calls: Array<{ id: string }> }).tool_calls[0]!.id = "changed"
    }).toThrow(TypeError)
    // Their JSON is kept with them (the compile's hashes and the upstream body read it); anything
    // else, an equal copy or a layer rendered afresh, has none.
    for (const m of fromHistory) expect(openAIMessageJson(m)).toBe(JSON.stringify(m))
    expect(openAIMessageJson({ ...fromHistory[0]! })).toBeUndefined()
    expect(openAIMessageJson(first[0])).toBeUndefined()
  })

  it("Anthropic: one top-level system, later system layers as reminders, alternating roles, tool blocks adjacent", () => {
    const request = renderAnthropic(composition)
    expect(request.system).toBe("SYS\n\nRULES\n\nSUMMARY")
    expect(request.messages.map((m) => m.role)).toEqual(["user", "assistant", "user", "assistant", "user"])
    expect(request.messages[1]!.content.at(-1)).toEqual({
      type: "tool_use",
      id: "c1",
      name: "read_file",
      input: { path: "a.json" }
    })
    expect(request.messages[2]!.content[0]).toEqual({
      type: "tool_result",
      tool_use_id: "c1",
      content: '{"status":"success","data":{"content":"{}"}}'
    })
    expect(request.messages[4]!.content).toEqual([
      { type: "text", text: "Q" },
      { type: "text", text: "<system-reminder>\nTODO\n</system-reminder>" }
    ])
  })

  it("ReAct: the text format of seed 002 E1", () => {
    expect(renderReAct(composition).prompt).toBe(
      [
        "[system] SYS",
        "[system] RULES",
        "[system] SUMMARY",
        "[user] Read the config",
        '[assistant] Thought: read it\nAction: read_file[{"path":"a.json"}]',
        '[tool] {"status":"success","data":{"content":"{}"}}',
        "[assistant] It is empty.",
        "[user] Q",
        "[system] TODO"
      ].join("\n\n")
    )
  })
})
