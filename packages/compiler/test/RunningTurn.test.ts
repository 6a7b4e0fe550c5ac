import * as ModelRegistry from "@ctxo/budget/ModelRegistry"
import * as Tokenizer from "@ctxo/budget/Tokenizer"
import type { HistoryDocument } from "@ctxo/history/Message"
import { emptyHistory } from "@ctxo/history/Message"
import { appendStep, appendToolResult, beginTurn, finishTurn } from "@ctxo/history/Turns"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import type { CompileOptions, CompileResult } from "../src/Compile.ts"
import { compile } from "../src/Compile.ts"
import type { Reference } from "../src/Manifest.ts"
import type { OpenAIMessage } from "../src/Render.ts"
import * as Workspace from "../src/Workspace.ts"

const tiny = (contextWindow: number) => ({
  models: {
    "acme/tiny": { contextWindow, tokenizer: { kind: "exact" as const, encoding: "cl100k_base" as const } }
  }
})
const layerFor = (files: Workspace.MemoryFiles, models?: ModelRegistry.ModelsConfig) =>
  Layer.mergeAll(
    Workspace.layerMemory(files),
    ModelRegistry.layer(models === undefined ? {} : { overrides: [{ origin: "test", config: models }] }),
    Tokenizer.layer()
  )
const run = (files: Workspace.MemoryFiles, options: CompileOptions, models?: ModelRegistry.ModelsConfig) =>
  Effect.runPromise(compile(options).pipe(Effect.provide(layerFor(files, models))))
const fail = (files: Workspace.MemoryFiles, options: CompileOptions, models?: ModelRegistry.ModelsConfig) =>
  Effect.runPromise(Effect.flip(compile(options)).pipe(Effect.provide(layerFor(files, models))))

const openAI = (result: CompileResult): ReadonlyArray<OpenAIMessage> => {
  if (result.format !== "openai") throw new Error(`expected an openai request, got ${result.format}`)
  return result.request.messages
}
const toolContents = (result: CompileResult) =>
  openAI(result)
    .filter((m) => m.role === "tool")
    .map((m) => JSON.parse(m.content) as { status: string; data?: { content?: string; readBack?: string } })

const session = {
  "notes.md": "# Plan\nShip the compiler.\n\n# Risks\nThe budget is tight.\n",
  "src/a.ts": "export const a = 1\n"
}
const files = (extra: Record<string, string> = {}): Workspace.MemoryFiles => ({
  global: {},
  sessions: { s: { ...session, ...extra } }
})

/** One finished turn before the one that runs. */
const earlier = (() => {
  const began = beginTurn(emptyHistory, { input: "Hello" })
  return finishTurn(began.doc, began.turn, "Hi, what shall we do?").doc
})()

describe("the running turn's input", () => {
  const input = "Check @src/a.ts against [notes.md#Plan]."
  const references: ReadonlyArray<Reference> = [{ path: "notes.md", block: "Risks" }]

  for (const format of ["openai", "anthropic", "react"] as const) {
    it(`step 1 shows exactly what a compile of the same query shows (${format})`, async () => {
      const asQuery = await run(files(), {
        sessionId: "s",
        format,
        history: earlier,
        query: input,
        references
      })
      const running = beginTurn(earlier, { input, references }).doc
      const step1 = await run(files(), { sessionId: "s", format, history: running, query: "" })
      expect(step1.request).toEqual(asQuery.request)
      const text = JSON.stringify(step1.request)
      expect(text).toContain("The user mentioned @src/a.ts.")
      expect(text).toContain('ref=\\"[notes.md#Plan]\\"')
      expect(text).toContain('ref=\\"[notes.md#Risks]\\"')
    })
  }

  it("every later step shows the same expanded input, its references resolved again", async () => {
    const began = beginTurn(earlier, { input, references })
    const stepped = appendStep(began.doc, began.turn, {
      text: "Action: read_file",
      toolCall: { callId: "c1", name: "read_file", input: { path: "src/a.ts" } }
    }).doc
    const done = appendToolResult(stepped, began.turn, {
      callId: "c1",
      name: "read_file",
      status: "success",
      data: "export const a = 1"
    }).doc
    const step2 = await run(files(), { sessionId: "s", format: "openai", history: done, query: "" })
    const users = openAI(step2).filter((m) => m.role === "user")
    expect(users).toHaveLength(2)
    expect(users[1]!.content).toMatch(/^Check @src\/a\.ts against \[notes\.md#Plan\]\.\n\n<system-reminder>/)
    expect(users[1]!.content).toContain("The budget is tight.")
  })
})

const messageIdOf = (doc: HistoryDocument, callId: string) =>
  doc.messages.find((m) => m.parts.some((p) => p._tag === "tool-result" && p.callId === callId))!.id

describe("the running turn's observations", () => {
  const fullLines = Array.from({ length: 600 }, (_, i) => `line ${i + 1}`).join("\n")
  const compressed = (callId: string) => ({
    content: fullLines.split("\n").slice(0, 5).join("\n"),
    readBack: `full result: read_file tool-results/${callId}.json`
  })
  const fullFile = (callId: string) => ({
    [`tool-results/${callId}.json`]: JSON.stringify({
      status: "success",
      data: { content: fullLines },
      text: "raw"
    })
  })
  /** A running turn with `calls` reads, each result compressed in history with its full form on file. */
  const running = (calls: ReadonlyArray<string>, base: HistoryDocument = earlier) => {
    const began = beginTurn(base, { input: "Summarize the log files." })
    let doc = began.doc
    for (const callId of calls) {
      doc = appendStep(doc, began.turn, {
        toolCall: { callId, name: "Read", input: { path: `${callId}.log` } }
      }).doc
      doc = appendToolResult(doc, began.turn, {
        callId,
        name: "Read",
        status: "success",
        data: compressed(callId),
        full: `tool-results/${callId}.json`
      }).doc
    }
    return { doc, turn: began.turn }
  }

  it("the running step sees the full result; once the turn is history, the compressed one", async () => {
    const { doc, turn } = running(["c1"])
    const step = await run(files(fullFile("c1")), {
      sessionId: "s",
      format: "openai",
      history: doc,
      query: ""
    })
    expect(toolContents(step)).toEqual([{ status: "success", data: { content: fullLines } }])
    expect(step.warnings).toEqual([])

    const finished = finishTurn(doc, turn, "Done.").doc
    const next = await run(files(fullFile("c1")), {
      sessionId: "s",
      format: "openai",
      history: finished,
      query: "Next question"
    })
    expect(toolContents(next)).toEqual([{ status: "success", data: compressed("c1") }])
  })

  it("a full result that is missing falls back to the compressed one, with a warning", async () => {
    const { doc } = running(["c1"])
    const step = await run(files(), { sessionId: "s", format: "openai", history: doc, query: "" })
    expect(toolContents(step)).toEqual([{ status: "success", data: compressed("c1") }])
    expect(step.warnings).toEqual([
      "tool-results/c1.json: the full result of Read (c1) is missing; the running step sees the compressed one"
    ])
  })

  it("a full-result path outside the session is never read; the step still compiles", async () => {
    const { doc } = running(["c1"])
    const tampered: HistoryDocument = {
      ...doc,
      messages: doc.messages.map((m) => ({
        ...m,
        parts: m.parts.map((p) => (p._tag === "tool-result" ? { ...p, full: "../other/secret.json" } : p))
      }))
    }
    const step = await run(
      {
        global: {},
        sessions: { s: session, other: { "secret.json": '{"status":"success","data":"secret"}' } }
      },
      { sessionId: "s", format: "openai", history: tampered, query: "" }
    )
    expect(toolContents(step)).toEqual([{ status: "success", data: compressed("c1") }])
    expect(step.warnings).toHaveLength(1)
    expect(step.warnings[0]).toMatch(
      /^\.\.\/other\/secret\.json: the full result of Read \(c1\) cannot be read \(/
    )
    expect(JSON.stringify(step.request)).not.toContain('secret"')
  })

  it("when the turn does not fit, older observations are compressed first, the newest stays whole", async () => {
    const { doc } = running(["c1", "c2", "c3"])
    const all = files({ ...fullFile("c1"), ...fullFile("c2"), ...fullFile("c3") })
    // Room for every full observation: all three whole.
    const roomy = await run(
      all,
      { sessionId: "s", format: "openai", history: doc, query: "", model: "acme/tiny" },
      tiny(40_000)
    )
    expect(toolContents(roomy).map((r) => r.data?.readBack === undefined)).toEqual([true, true, true])
    // Room for one full observation (about 2,400 tokens each) and two compressed ones.
    const tight = await run(
      all,
      { sessionId: "s", format: "openai", history: doc, query: "", model: "acme/tiny" },
      tiny(4_000)
    )
    expect(toolContents(tight).map((r) => r.data?.readBack === undefined)).toEqual([false, false, true])
    expect(toolContents(tight)[2]!.data?.content).toBe(fullLines)
    expect(tight.report.total).toBeLessThanOrEqual(tight.report.available)
    expect(tight.warnings).toContain(
      "the running turn's 2 older tool results are shown compressed to fit the budget (the newest is whole)"
    )
    // Not even the newest whole fits: the budget is exceeded, nothing is cut silently.
    const error = await fail(
      all,
      { sessionId: "s", format: "openai", history: doc, query: "", model: "acme/tiny" },
      tiny(2_000)
    )
    expect(error._tag).toBe("BudgetExceeded")
  })

  it("when compressed older observations still do not fit, they become placeholders; only then is it refused", async () => {
    // Three reads whose compressed results are large (no full file: nothing was cut).
    const began = beginTurn(earlier, { input: "Summarize the log files." })
    let doc = began.doc
    for (const callId of ["r1", "r2", "r3"]) {
      doc = appendStep(doc, began.turn, {
        toolCall: { callId, name: "Read", input: { path: `${callId}.log` } }
      }).doc
      doc = appendToolResult(doc, began.turn, {
        callId,
        name: "Read",
        status: "success",
        data: { content: fullLines.split("\n").slice(0, 400).join("\n") }
      }).doc
    }
    const options = { sessionId: "s", format: "openai", history: doc, query: "", model: "acme/tiny" } as const
    // Room for one read (about 1,600 tokens) and two placeholders, not for three reads.
    const tight = await run(files(), options, tiny(3_000))
    const contents = toolContents(tight)
    expect(contents.slice(0, 2).map((r) => r.data as unknown)).toEqual([
      `[Read(r1.log) result — not shown to fit the budget; the full result is on file: messages.json (message ${messageIdOf(doc, "r1")})]`,
      `[Read(r2.log) result — not shown to fit the budget; the full result is on file: messages.json (message ${messageIdOf(doc, "r2")})]`
    ])
    expect(contents[2]!.data?.content?.split("\n")).toHaveLength(400)
    expect(tight.report.total).toBeLessThanOrEqual(tight.report.available)
    expect(tight.warnings).toContain(
      "the running turn's 2 older tool results are shown as placeholders to fit the budget (the newest is whole; the full results are on file)"
    )
    // The newest whole does not fit: refused.
    const error = await fail(files(), options, tiny(1_500))
    expect(error._tag).toBe("BudgetExceeded")
  })
})
