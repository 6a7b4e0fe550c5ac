import { cpSync, existsSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import * as ModelRegistry from "@ctxo/budget/ModelRegistry"
import * as Tokenizer from "@ctxo/budget/Tokenizer"
import type { HistoryDocument } from "@ctxo/history/Message"
import { appendStep, appendToolResult, beginTurn, finishTurn } from "@ctxo/history/Turns"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Layer } from "effect"
import type { CompileOptions } from "../src/Compile.ts"
import { compile } from "../src/Compile.ts"
import { parseManifest } from "../src/Manifest.ts"
import * as Workspace from "../src/Workspace.ts"

const exampleData = fileURLToPath(new URL("../../../fixtures/data", import.meta.url))
const golden = (name: string) => fileURLToPath(new URL(`./golden/${name}`, import.meta.url))

const layerFor = (root: string, models?: ModelRegistry.ModelsConfig) =>
  Layer.mergeAll(
    Workspace.layer(root).pipe(Layer.provide(NodeContext.layer)),
    ModelRegistry.layer(models === undefined ? {} : { overrides: [{ origin: "test", config: models }] }),
    Tokenizer.layer()
  )
const run = (root: string, options: CompileOptions, models?: ModelRegistry.ModelsConfig) =>
  Effect.runPromise(compile(options).pipe(Effect.provide(layerFor(root, models))))
const fail = (root: string, options: CompileOptions) =>
  Effect.runPromise(Effect.flip(compile(options)).pipe(Effect.provide(layerFor(root))))
const copyOfExamples = () => {
  const root = mkdtempSync(join(tmpdir(), "ctxo-data-"))
  cpSync(exampleData, root, { recursive: true })
  return root
}

describe("compile on the example data", () => {
  const notebookManifest = Either.getOrThrow(
    parseManifest(readFileSync(join(exampleData, "notebook-physics", "context-config.json"), "utf8"))
  )
  const cases = [
    { policy: "notebook", session: "notebook-physics" },
    { policy: "code-agent", session: "code-agent-auth" },
    {
      policy: "layered",
      session: "notebook-physics",
      manifest: { ...notebookManifest, policy: "layered" as const }
    }
  ] as const

  for (const c of cases) {
    for (const format of ["openai", "anthropic", "react"] as const) {
      it(`${c.policy} × ${format} matches its golden file, byte for byte, every time`, async () => {
        const options = { sessionId: c.session, format, ...("manifest" in c ? { manifest: c.manifest } : {}) }
        const first = await run(exampleData, options)
        const second = await run(exampleData, options)
        const text = `${JSON.stringify({ model: first.model, request: first.request }, null, 2)}\n`
        expect(`${JSON.stringify({ model: second.model, request: second.request }, null, 2)}\n`).toBe(text)
        const file = golden(`${c.policy}.${format}.json`)
        if (process.env.CTXO_UPDATE_GOLDEN === "1") writeFileSync(file, text)
        expect(existsSync(file), `${file} is missing: run with CTXO_UPDATE_GOLDEN=1 to write it`).toBe(true)
        expect(text).toBe(readFileSync(file, "utf8"))
        expect(first.report.total).toBeLessThanOrEqual(first.report.available)
      })
    }
  }

  it("resolves references and mentions into the one user input", async () => {
    const result = await run(exampleData, { sessionId: "notebook-physics", format: "openai" })
    const messages = (result.request as unknown as { messages: Array<{ role: string; content: string }> })
      .messages
    const last = messages.at(-1)!
    expect(last.role).toBe("user")
    expect(last.content).toContain(
      '<reference ref="[ground-truth.md#薛定谔方程]" path="ground-truth.md" lines="5-10">'
    )
    expect(messages.filter((m) => m.content.includes("用 [guidance.md#Tutor guidance/Style]"))).toHaveLength(
      1
    )
    expect(result.warnings).toEqual([
      '"薛定谔方程" is a heading, not a full id in ground-truth.md; using "量子力学/薛定谔方程"'
    ])
  })
})

describe("compile under a budget", () => {
  const longHistory = (turns: number): HistoryDocument => {
    let doc: HistoryDocument = { format: "ctxo.history/v1", messages: [], compression: [] }
    for (let i = 1; i <= turns; i++) {
      const b = beginTurn(doc, { input: `Question ${i}: ${"why does this fail again and again ".repeat(8)}` })
      doc = appendStep(b.doc, b.turn, {
        text: "Action: Bash[pnpm test]",
        toolCall: { callId: `c${i}`, name: "Bash", input: { command: "pnpm test" } }
      }).doc
      doc = appendToolResult(doc, b.turn, {
        callId: `c${i}`,
        name: "Bash",
        status: "error",
        error: { message: "1 failing test" },
        data: { stderrTail: "expected 1 to be 2 ".repeat(10) }
      }).doc
      doc = finishTurn(doc, b.turn, `Answer ${i}: ${"the cause is the comparison ".repeat(6)}`).doc
    }
    return doc
  }
  const tiny = {
    models: {
      "acme/tiny-4k": {
        contextWindow: 4_000,
        tokenizer: { kind: "exact" as const, encoding: "cl100k_base" as const }
      }
    }
  }

  it("trims history from the oldest whole turn, keeps the required layers, and stays under the limit", async () => {
    const root = copyOfExamples()
    writeFileSync(join(root, "code-agent-auth", "messages.json"), JSON.stringify(longHistory(30)))
    const result = await run(
      root,
      { sessionId: "code-agent-auth", model: "acme/tiny-4k", format: "openai" },
      tiny
    )
    expect(result.report.total).toBeLessThanOrEqual(result.report.available)
    const kept = result.report.units
      .filter((u) => u.source === "recent_history" && u.status === "included")
      .map((u) => Number(u.id.slice(5)))
    expect(kept.length).toBeGreaterThan(0)
    expect(kept).toEqual(Array.from({ length: kept.length }, (_, i) => 30 - i))
    const dropped = result.report.units.filter(
      (u) => u.source === "recent_history" && u.status !== "included"
    )
    expect(dropped.length).toBeGreaterThan(0)
    expect(result.report.units.find((u) => u.id === "system_prompt")?.status).toBe("included")
    expect(result.report.units.find((u) => u.id === "query")?.status).toBe("included")
    // Tool calls and results stay together.
    const messages = (
      result.request as unknown as {
        messages: Array<{ role: string; tool_calls?: Array<{ id: string }>; tool_call_id?: string }>
      }
    ).messages
    messages.forEach((m, i) => {
      for (const call of m.tool_calls ?? []) expect(messages[i + 1]?.tool_call_id).toBe(call.id)
    })
  })

  it("keeps the cut point for the next turns (hysteresis) and reports the unchanged prefix", async () => {
    const root = copyOfExamples()
    const file = join(root, "code-agent-auth", "messages.json")
    writeFileSync(file, JSON.stringify(longHistory(30)))
    const first = await run(
      root,
      { sessionId: "code-agent-auth", model: "acme/tiny-4k", format: "openai" },
      tiny
    )
    expect(first.state.historyStartTurn).toBeDefined()
    // One more finished turn: the history now starts at the same turn as before.
    const next = longHistory(31)
    writeFileSync(file, JSON.stringify(next))
    const second = await run(
      root,
      { sessionId: "code-agent-auth", model: "acme/tiny-4k", format: "openai", previous: first.state },
      tiny
    )
    expect(second.state.historyStartTurn).toBe(first.state.historyStartTurn)
    expect(second.prefix.hash).toBe(first.prefix.hash)
    expect(second.prefix.unchangedMessages).toBeGreaterThan(3)
    expect(second.prefix.unchangedTokens).toBeGreaterThan(second.prefix.tokens)
  })

  it("refuses an input that cannot fit, with the numbers", async () => {
    const error = await fail(exampleData, { sessionId: "notebook-physics", query: "x ".repeat(200_000) })
    expect(error._tag).toBe("BudgetExceeded")
    expect(error.message).toMatch(/^Required context does not fit openai\/gpt-4o: \d+ tokens/)
  })
})

describe("compile errors and the sandbox", () => {
  it("names the field of an invalid manifest and the reference that is missing", async () => {
    const root = copyOfExamples()
    writeFileSync(join(root, "notebook-physics", "context-config.json"), '{"policy":"fancy"}')
    const manifest = await fail(root, { sessionId: "notebook-physics" })
    expect(manifest.message).toMatch(/^Invalid manifest notebook-physics\/context-config\.json: policy: /)
    const missing = await fail(exampleData, { sessionId: "notebook-physics", query: "see [nothere.md:1:2]" })
    expect(missing.message).toBe("Reference [nothere.md:1:2]: nothere.md does not exist")
    const range = await fail(exampleData, { sessionId: "notebook-physics", query: "see [guidance.md:1:999]" })
    expect(range.message).toMatch(/^Reference \[guidance\.md:1:999\]: lines 1-999 are outside guidance\.md/)
  })

  it.each([
    ["[../profile.md:1:2]", "leaves the session directory"],
    ["[/etc/passwd:1:1]", "absolute paths"],
    ["[%2e%2e/profile.md:1:1]", "percent-encoded"]
  ])("refuses %s", async (ref, reason) => {
    const error = await fail(exampleData, { sessionId: "notebook-physics", query: `read ${ref}` })
    expect(error.message).toContain(reason)
  })

  it("refuses a symlink that leads out of the session", async () => {
    const root = copyOfExamples()
    const outside = mkdtempSync(join(tmpdir(), "ctxo-outside-"))
    writeFileSync(join(outside, "secret.md"), "# Secret\ntoken=abc\n")
    symlinkSync(join(outside, "secret.md"), join(root, "notebook-physics", "linked.md"))
    const error = await fail(root, { sessionId: "notebook-physics", query: "read [linked.md:1:2]" })
    expect(error.message).toBe(
      "Reference [linked.md:1:2]: the path leads out of its directory through a symlink"
    )
    const session = await fail(root, { sessionId: "../notebook-physics" })
    expect(session._tag).toBe("UnresolvedReference")
  })
})

describe("invariant 6 over generated sessions", () => {
  it("never sends more than the model takes, and never cuts the system prompt or the input", async () => {
    const fc = await import("fast-check")
    const root = copyOfExamples()
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: 40 }),
        fc.integer({ min: 1_500, max: 12_000 }),
        fc.constantFrom("openai" as const, "anthropic" as const, "react" as const),
        async (turns, window, format) => {
          let doc: HistoryDocument = { format: "ctxo.history/v1", messages: [], compression: [] }
          for (let i = 1; i <= turns; i++) {
            const b = beginTurn(doc, { input: `q${i} ${"word ".repeat((i * 37) % 120)}` })
            doc = finishTurn(b.doc, b.turn, `a${i} ${"answer ".repeat((i * 53) % 150)}`).doc
          }
          writeFileSync(join(root, "code-agent-auth", "messages.json"), JSON.stringify(doc))
          const models = {
            models: {
              "acme/m": {
                contextWindow: window,
                tokenizer: { kind: "exact" as const, encoding: "o200k_base" as const }
              }
            }
          }
          const outcome = await Effect.runPromise(
            Effect.either(compile({ sessionId: "code-agent-auth", model: "acme/m", format })).pipe(
              Effect.provide(layerFor(root, models))
            )
          )
          if (Either.isLeft(outcome)) {
            expect(outcome.left._tag).toBe("BudgetExceeded")
            return
          }
          const result = outcome.right
          expect(result.report.total).toBeLessThanOrEqual(result.report.available)
          expect(result.report.available).toBeLessThanOrEqual(window - Math.ceil(window * 0.1))
          for (const id of ["system_prompt", "query"])
            expect(result.report.units.find((u) => u.id === id)?.status).toBe("included")
        }
      ),
      { numRuns: 40 }
    )
  })
})
