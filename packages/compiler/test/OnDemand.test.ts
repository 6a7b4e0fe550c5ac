/**
 * The sources that load on demand (seed 003): tools, skills and knowledge by relevance to the
 * input, each counted against its share and reported.
 */
import * as ModelRegistry from "@ctxo/budget/ModelRegistry"
import * as Tokenizer from "@ctxo/budget/Tokenizer"
import type { HistoryDocument } from "@ctxo/history/Message"
import { beginTurn, finishTurn } from "@ctxo/history/Turns"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import type { CompileOptions, CompileResult } from "../src/Compile.ts"
import { compile } from "../src/Compile.ts"
import type { OfferedTool, ToolSpec } from "../src/ToolSelection.ts"
import * as Workspace from "../src/Workspace.ts"

const layerFor = (files: Workspace.MemoryFiles, models?: ModelRegistry.ModelsConfig) =>
  Layer.mergeAll(
    Workspace.layerMemory(files),
    ModelRegistry.layer(models === undefined ? {} : { overrides: [{ origin: "test", config: models }] }),
    Tokenizer.layer()
  )
const run = (files: Workspace.MemoryFiles, options: CompileOptions, models?: ModelRegistry.ModelsConfig) =>
  Effect.runPromise(compile(options).pipe(Effect.provide(layerFor(files, models))))

const tool = (name: string, description: string): ToolSpec => ({
  type: "function",
  function: {
    name,
    description,
    parameters: { type: "object", properties: { target: { type: "string", description: "What to act on" } } }
  }
})
const offered: ReadonlyArray<OfferedTool> = [
  { spec: tool("read_file", "Read a file of the session."), alwaysOn: true },
  { spec: tool("deploy_service", "Deploy a service to the staging or production cluster.") },
  { spec: tool("query_database", "Run a read-only SQL query against the analytics database.") },
  { spec: tool("send_email", "Send an email message to a colleague.") }
]
const toolNames = (r: CompileResult) =>
  r.format === "openai" ? (r.request.tools ?? []).map((t) => t.function.name) : []
const session = (config: object, extra: Record<string, string> = {}) => ({
  global: {},
  sessions: { s: { "context-config.json": JSON.stringify(config), ...extra } }
})

describe("tools load on demand and count against the tools share", () => {
  it("sends the always-on tools and those relevant to the input, and says why the others stay out", async () => {
    const r = await run(session({}), {
      sessionId: "s",
      query: "Please deploy the billing service to staging.",
      tools: offered
    })
    expect(toolNames(r)).toEqual(["read_file", "deploy_service"])
    const rows = r.report.units.filter((u) => u.source === "tools")
    expect(rows.find((u) => u.id === "tool:send_email")).toMatchObject({
      status: "dropped",
      reason: expect.stringContaining("loaded on demand")
    })
    // Counted: the tools source's ledger has what the definitions cost, and the final count
    // (the request with its tools) is what the budget saw.
    const ledger = r.report.sources.find((s) => s.id === "tools")!
    expect(ledger.used).toBeGreaterThan(0)
    // The source's own line says what it left out and why.
    expect(ledger.cut?.units).toBe(2)
    expect(ledger.why).toEqual([
      "loaded on demand: not always on, not called in this turn, not relevant to the input"
    ])
    const without = await run(session({ tools: { load: "none" } }), {
      sessionId: "s",
      query: "Please deploy the billing service to staging.",
      tools: offered
    })
    expect(toolNames(without)).toEqual([])
    expect(r.report.total! - without.report.total!).toBeGreaterThanOrEqual(ledger.used - 12)
  })

  it("sends a tool the input names, all tools with load all, and the manifest's always-on list", async () => {
    const named = await run(session({}), { sessionId: "s", query: "call send_email now", tools: offered })
    expect(toolNames(named)).toContain("send_email")
    const all = await run(session({ tools: { load: "all" } }), {
      sessionId: "s",
      query: "hi",
      tools: offered
    })
    expect(toolNames(all)).toEqual(offered.map((t) => t.spec.function.name))
    const pinned = await run(session({ tools: { alwaysOn: ["query_database"] } }), {
      sessionId: "s",
      query: "hi",
      tools: offered
    })
    expect(toolNames(pinned)).toEqual(["query_database"])
  })

  it("always sends the client's tools, counted as required, in every provider format", async () => {
    const client = [tool("lookup_weather", "Weather for a city.")]
    const r = await run(session({}), { sessionId: "s", query: "hello", clientTools: client })
    expect(toolNames(r)).toEqual(["lookup_weather"])
    expect(r.report.sources.find((s) => s.id === "client_tools")).toMatchObject({ required: true })
    const anthropic = await run(session({}), {
      sessionId: "s",
      query: "hello",
      clientTools: client,
      format: "anthropic"
    })
    if (anthropic.format !== "anthropic") throw new Error("not anthropic")
    expect(anthropic.request.tools?.map((t) => t.name)).toEqual(["lookup_weather"])
    const react = await run(session({}), {
      sessionId: "s",
      query: "hello",
      clientTools: client,
      format: "react"
    })
    if (react.format !== "react") throw new Error("not react")
    expect(react.request.prompt).toContain("- lookup_weather[{target}]: Weather for a city.")
  })

  it("drops a wanted tool that does not fit the budget, with the budget's reason", async () => {
    const huge = tool(
      "summarize_report",
      `Summarize the quarterly report. ${"Very long guidance. ".repeat(400)}`
    )
    const r = await run(
      session({ model: "test/tiny" }),
      { sessionId: "s", query: "summarize the quarterly report", tools: [{ spec: huge }] },
      {
        models: {
          "test/tiny": {
            contextWindow: 1200,
            tokenizer: { kind: "exact" as const, encoding: "o200k_base" as const }
          }
        }
      }
    )
    expect(toolNames(r)).toEqual([])
    expect(r.report.units.find((u) => u.id === "tool:summarize_report")?.status).toBe("dropped")
    expect(r.report.total!).toBeLessThanOrEqual(r.report.available)
  })
})

describe("skills activate on demand from the skills folder", () => {
  const skills = {
    "skills/release-notes.md":
      "# Release notes\nWrite release notes from merged pull requests, grouped by area.",
    "skills/incident-review.md":
      "# Incident review\nRun a blameless postmortem: timeline, impact, root cause, actions.",
    "skills/sql-tuning.md": "# SQL tuning\nRead the query plan, add the missing index, check row estimates."
  }
  const skillsShown = (r: CompileResult) =>
    r.report.units.filter((u) => u.source === "skills" && u.status === "included").map((u) => u.id)

  it("activates a skill called by name and one relevant to the input, not the others", async () => {
    const byName = await run(session({}, skills), { sessionId: "s", query: "/incident-review for yesterday" })
    expect(skillsShown(byName)).toContain("skill:incident-review")
    const relevant = await run(session({}, skills), {
      sessionId: "s",
      query: "this query plan is slow, which index is missing?"
    })
    expect(skillsShown(relevant)).toEqual(["skill:sql-tuning"])
    const none = await run(session({}, skills), { sessionId: "s", query: "good morning" })
    expect(skillsShown(none)).toEqual([])
  })

  it("sends always-on skills and honours activate none", async () => {
    const always = await run(session({ skills: { always: ["release-notes"] } }, skills), {
      sessionId: "s",
      query: "good morning"
    })
    expect(skillsShown(always)).toEqual(["skill:release-notes"])
    const off = await run(session({ skills: { activate: "none" } }, skills), {
      sessionId: "s",
      query: "/incident-review"
    })
    expect(skillsShown(off)).toEqual([])
  })
})

describe("knowledge by relevance", () => {
  const blocks = Array.from(
    { length: 30 },
    (_, i) => `# Topic ${i}\n${"Unrelated filler about office logistics. ".repeat(12)}`
  )
  blocks[23] =
    "# Rotating the signing key\nTo rotate the JWT signing key, run `keys rotate --grace 24h` and redeploy."
  const kb = blocks.join("\n\n")

  it("keeps the block that answers the input when not every block fits, in document order", async () => {
    const config = { model: "test/small", knowledge: [{ path: "kb.md" }] }
    const models = {
      models: {
        "test/small": {
          contextWindow: 2000,
          tokenizer: { kind: "exact" as const, encoding: "o200k_base" as const }
        }
      }
    }
    const r = await run(
      session(config, { "kb.md": kb }),
      { sessionId: "s", query: "how do I rotate the JWT key?" },
      models
    )
    const kept = r.report.units
      .filter((u) => u.source === "knowledge" && u.status === "included")
      .map((u) => u.id)
    expect(kept).toContain("kb.md#Rotating the signing key")
    expect(kept.length).toBeLessThan(30)
    const text = r.format === "openai" ? r.request.messages.map((m) => m.content ?? "").join("\n") : ""
    // Kept blocks stand in document order (the prefix stays the same while the same are kept).
    const order = [...text.matchAll(/^# (.+)$/gm)].map((m) =>
      blocks.findIndex((b) => b.startsWith(`# ${m[1]}\n`))
    )
    expect(order).toHaveLength(kept.length)
    expect(order).toEqual([...order].sort((a, b) => a - b))
  })
})

describe("earlier turns the window cannot hold are recalled by relevance", () => {
  const conversation = (facts: Readonly<Record<number, string>>, turns: number): HistoryDocument => {
    let doc: HistoryDocument = { format: "ctxo.history/v1", messages: [], compression: [] }
    for (let i = 1; i <= turns; i++) {
      const b = beginTurn(doc, {
        input: facts[i] ?? `Small talk ${i}: ${"the weather was mild and the train was on time ".repeat(3)}`
      })
      doc = finishTurn(b.doc, b.turn, `Noted (${i}). ${"Sounds like a calm day overall. ".repeat(3)}`).doc
    }
    return doc
  }
  const models = {
    models: {
      "test/small-2k": {
        contextWindow: 2_000,
        tokenizer: { kind: "exact" as const, encoding: "o200k_base" as const }
      }
    }
  }
  const facts = { 4: "By the way, my sister Ingrid just moved to Trondheim for a marine biology job." }

  it("brings back the turn that answers the input, outside the conversation, once", async () => {
    const history = conversation(facts, 60)
    const r = await run(
      session({ model: "test/small-2k" }),
      { sessionId: "s", history, query: "Where did my sister move to?" },
      models
    )
    const recalled = r.report.units.filter((u) => u.source === "recalled_history" && u.status === "included")
    expect(recalled.map((u) => u.id)).toContain("recalled-turn-4")
    const messages = r.format === "openai" ? r.request.messages : []
    const recall = messages.filter(
      (m) => m.role === "system" && (m.content ?? "").includes("Earlier turn 4,")
    )
    expect(recall).toHaveLength(1)
    // The recall stands after the conversation, right before the input.
    expect(messages.indexOf(recall[0]!)).toBe(messages.length - 2)
    // Turn 4 is not also in the conversation, and the request is within the budget.
    expect(messages.filter((m) => (m.content ?? "").includes("Trondheim"))).toHaveLength(1)
    expect(r.report.total!).toBeLessThanOrEqual(r.report.available)
    // Recency alone (no relevance) does not reach it.
    const recency = await run(
      session({ model: "test/small-2k" }),
      { sessionId: "s", history, query: "Where did my sister move to?", rank: () => [] },
      models
    )
    const text =
      recency.format === "openai" ? recency.request.messages.map((m) => m.content ?? "").join("\n") : ""
    expect(text).not.toContain("Trondheim")
  })

  it("recalls nothing when everything fits or nothing left out is relevant", async () => {
    const short = await run(
      session({ model: "test/small-2k" }),
      { sessionId: "s", history: conversation(facts, 5), query: "Where did my sister move to?" },
      models
    )
    expect(short.report.units.some((u) => u.source === "recalled_history")).toBe(false)
    const unrelated = await run(
      session({ model: "test/small-2k" }),
      {
        sessionId: "s",
        history: conversation(facts, 60),
        query: "Which compiler flags speed up Rust builds?"
      },
      models
    )
    expect(unrelated.report.units.some((u) => u.source === "recalled_history")).toBe(false)
  })
})
