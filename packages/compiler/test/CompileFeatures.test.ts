import { encodeSidecar, syncBlockIds } from "@ctxo/blocks/BlockIds"
import { parseMarkdownBlocks } from "@ctxo/blocks/MarkdownBlocks"
import * as ModelRegistry from "@ctxo/budget/ModelRegistry"
import * as Tokenizer from "@ctxo/budget/Tokenizer"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import type { CompileOptions, CompileResult } from "../src/Compile.ts"
import { compile } from "../src/Compile.ts"
import type { OpenAIMessage } from "../src/Render.ts"
import * as Workspace from "../src/Workspace.ts"

const layerFor = (files: Workspace.MemoryFiles, models?: ModelRegistry.ModelsConfig) =>
  Layer.mergeAll(
    Workspace.layerMemory(files),
    ModelRegistry.layer(models === undefined ? {} : { overrides: [{ origin: "test", config: models }] }),
    Tokenizer.layer()
  )
const run = (files: Workspace.MemoryFiles, options: CompileOptions, models?: ModelRegistry.ModelsConfig) =>
  Effect.runPromise(compile(options).pipe(Effect.provide(layerFor(files, models))))
const fail = (files: Workspace.MemoryFiles, options: CompileOptions) =>
  Effect.runPromise(Effect.flip(compile(options)).pipe(Effect.provide(layerFor(files))))

/** The OpenAI messages of a result: the type narrows on `format`, no cast. */
const openAI = (result: CompileResult): ReadonlyArray<OpenAIMessage> => {
  if (result.format !== "openai") throw new Error(`expected an openai request, got ${result.format}`)
  return result.request.messages
}
const contentOf = (m: OpenAIMessage | undefined) => (m === undefined ? "" : (m.content ?? ""))

describe("the request is typed by its format", () => {
  it("narrows on format to each provider's request", async () => {
    const files = { global: {}, sessions: { s: { "context-config.json": '{"query":"Hello"}' } } }
    const openai = await run(files, { sessionId: "s", format: "openai" })
    expect(openAI(openai).at(-1)).toEqual({ role: "user", content: "Hello" })
    const anthropic = await run(files, { sessionId: "s", format: "anthropic" })
    if (anthropic.format !== "anthropic") throw new Error("not anthropic")
    expect(anthropic.request.messages[0]).toEqual({
      role: "user",
      content: [{ type: "text", text: "Hello" }]
    })
    const react = await run(files, { sessionId: "s", format: "react" })
    if (react.format !== "react") throw new Error("not react")
    expect(react.request.prompt).toBe("[user] Hello")
  })
})

describe("budget.shares in the manifest", () => {
  const knowledge = "# Raft\nLeader election and log replication.\n\n# Paxos\nSingle-decree consensus.\n"
  const files = (shares?: Record<string, number>) => ({
    global: {},
    sessions: {
      s: {
        "kb.md": knowledge,
        "context-config.json": JSON.stringify({
          query: "Compare them.",
          knowledge: [{ path: "kb.md" }],
          ...(shares === undefined ? {} : { budget: { shares } })
        })
      }
    }
  })

  it("a share of 0 empties that layer's grant, and the report says why", async () => {
    const open = await run(files(), { sessionId: "s", format: "openai" })
    expect(open.composition.layers.map((l) => l.id)).toContain("knowledge__context")
    const off = await run(files({ knowledge: 0 }), { sessionId: "s", format: "openai" })
    expect(off.composition.layers.map((l) => l.id)).not.toContain("knowledge__context")
    expect(JSON.stringify(off.request)).not.toContain("Leader election")
    expect(off.report.sources.find((s) => s.id === "knowledge")).toMatchObject({
      share: 0,
      grant: 0,
      used: 0
    })
    const units = off.report.units.filter((u) => u.source === "knowledge")
    expect(units.map((u) => [u.id, u.status, u.reason])).toEqual([
      ["kb.md#Raft", "dropped", "knowledge has a share of 0 in the configured shares, so it gets no tokens"],
      ["kb.md#Paxos", "dropped", "knowledge has a share of 0 in the configured shares, so it gets no tokens"]
    ])
  })

  it("a share for a source that does not exist is a warning that lists the sources", async () => {
    const result = await run(files({ history: 0 }), { sessionId: "s", format: "openai" })
    expect(result.warnings).toEqual([
      'budget.shares: "history" is not a source; the sources are system_prompt, user_input, tools, skills, recent_history, important_history, semantic, knowledge, agent_output'
    ])
    expect(JSON.stringify(result.request)).toContain("Leader election")
  })

  it("a configured share changes the guaranteed budget the report shows", async () => {
    const result = await run(files({ knowledge: 0.3 }), { sessionId: "s", format: "openai" })
    const ledger = result.report.sources.find((s) => s.id === "knowledge")!
    expect(ledger.share).toBe(0.3)
    expect(ledger.cap).toBe(Math.floor(0.3 * result.report.available))
  })
})

describe("short ids (^b3) from the sidecar", () => {
  const profileV1 =
    "# Basics\nAge 25\n\n## Education\nBSc software engineering\n\n# Goals\nDistributed systems\n"
  const notesV1 = "# Plan\nShip the compiler.\n\n# Risks\nThe budget is tight.\n"
  const profileIds = syncBlockIds(parseMarkdownBlocks(profileV1, "profile.md"), undefined, "profile.md")
  const notesIds = syncBlockIds(parseMarkdownBlocks(notesV1, "notes.md"), undefined, "notes.md")
  const shortId = (ids: typeof profileIds, path: string) =>
    `^${ids.sidecar.blocks.find((b) => b.path === path)!.id}`
  const education = shortId(profileIds, "Basics/Education")
  const risks = shortId(notesIds, "Risks")
  // Both files were edited after their sidecars were written: the headings were renamed.
  const files = (manifest: object) => ({
    global: {
      "profile.md": profileV1.replace("## Education", "## Studies"),
      "profile.md.blocks.json": encodeSidecar(profileIds.sidecar)
    },
    sessions: {
      s: {
        "notes.md": notesV1.replace("# Risks", "# Open risks"),
        "notes.md.blocks.json": encodeSidecar(notesIds.sidecar),
        "context-config.json": JSON.stringify(manifest)
      }
    }
  })

  it("resolve in profileBlocks, knowledge blocks and manifest references, after a rename", async () => {
    const result = await run(
      files({
        query: "What should I study?",
        profileBlocks: [education],
        knowledge: [{ path: "notes.md", block: risks }],
        references: [{ path: "notes.md", block: risks }]
      }),
      { sessionId: "s", format: "openai" }
    )
    const messages = openAI(result)
    const system = messages.filter((m) => m.role === "system").map(contentOf)
    expect(system.some((t) => t.includes("## Studies\nBSc software engineering"))).toBe(true)
    expect(system.some((t) => t.includes("# Open risks\nThe budget is tight."))).toBe(true)
    expect(contentOf(messages.at(-1))).toContain(
      `<reference ref="[notes.md#${risks}]" path="notes.md" lines="4-5">\n# Open risks\nThe budget is tight.\n</reference>`
    )
  })

  it("resolve inline in a query and in references sent with it", async () => {
    const result = await run(files({}), {
      sessionId: "s",
      format: "openai",
      query: `Read [notes.md#${risks}] first.`,
      references: [`[notes.md#${shortId(notesIds, "Plan")}]`]
    })
    const input = contentOf(openAI(result).at(-1))
    expect(input).toContain(`ref="[notes.md#${risks}]" path="notes.md" lines="4-5"`)
    expect(input).toContain(`path="notes.md" lines="1-3">\n# Plan\nShip the compiler.`)
  })

  it("an id the sidecar does not know names the reference", async () => {
    const error = await fail(files({ profileBlocks: ["^b99"] }), { sessionId: "s" })
    expect(error._tag).toBe("UnresolvedReference")
    expect(error.message).toMatch(/^Reference \[profile\.md#\^b99\]: .*no block has this short id/)
  })
})

describe("the history file", () => {
  const withHistory = (history: unknown) => ({
    global: {},
    sessions: { s: { "messages.json": JSON.stringify(history) } }
  })

  it("reads the plain array of chat messages, [] as a new session", async () => {
    const empty = await run(withHistory([]), { sessionId: "s", format: "openai", query: "Hi" })
    expect(openAI(empty)).toEqual([{ role: "user", content: "Hi" }])
    const plain = await run(
      withHistory([
        { role: "user", content: "What is 2+2?" },
        {
          role: "assistant",
          content: null,
          tool_calls: [{ id: "c1", type: "function", function: { name: "calc", arguments: '{"x":"2+2"}' } }]
        },
        { role: "tool", tool_call_id: "c1", content: "4" },
        { role: "assistant", content: [{ type: "text", text: "4." }] }
      ]),
      { sessionId: "s", format: "openai", query: "And 3+3?" }
    )
    expect(openAI(plain)).toEqual([
      { role: "user", content: "What is 2+2?" },
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id: "c1", type: "function", function: { name: "calc", arguments: '{"x":"2+2"}' } }]
      },
      { role: "tool", tool_call_id: "c1", content: '{"status":"success","data":"4"}' },
      { role: "assistant", content: "4." },
      { role: "user", content: "And 3+3?" }
    ])
  })

  it("a broken history is a history error: one sentence with the file and the JSON path, never 'Invalid manifest'", async () => {
    const error = await fail(
      withHistory([
        { role: "user", content: "hi" },
        { role: "robot", content: "x".repeat(5_000) }
      ]),
      {
        sessionId: "s"
      }
    )
    expect(error._tag).toBe("HistoryCorrupt")
    expect(error.message).toBe(
      'History file s/messages.json cannot be read: [1].role: expected "user", "assistant", "tool" or "system", got "robot"'
    )
    const huge = await fail(
      withHistory({ format: "ctxo.history/v1", messages: [{ id: "x".repeat(10_000) }], compression: [] }),
      {
        sessionId: "s"
      }
    )
    expect(huge.message.length).toBeLessThanOrEqual(300)
    expect(huge.message).toMatch(/^History file s\/messages\.json cannot be read: messages\[0\]\.role: /)
    expect(huge.message).not.toContain("Invalid manifest")
  })

  it("a broken manifest names its file and field in one short sentence", async () => {
    const error = await fail(
      {
        global: {},
        sessions: { s: { "context-config.json": JSON.stringify({ policy: "p".repeat(10_000) }) } }
      },
      { sessionId: "s" }
    )
    expect(error._tag).toBe("InvalidManifest")
    expect(error.message).toMatch(
      /^Invalid manifest s\/context-config\.json: policy: expected "layered", "code-agent" or "notebook", got "p+…$/
    )
    expect(error.message.length).toBeLessThanOrEqual(300)
  })
})
