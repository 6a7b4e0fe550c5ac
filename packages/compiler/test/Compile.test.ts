import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import * as ModelRegistry from "@ctxo/budget/ModelRegistry"
import * as Tokenizer from "@ctxo/budget/Tokenizer"
import type { HistoryDocument } from "@ctxo/history/Message"
import { appendStep, appendToolResult, beginTurn, finishTurn } from "@ctxo/history/Turns"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect, Either, Layer } from "effect"
import type { CompileOptions } from "../src/Compile.ts"
import { compile } from "../src/Compile.ts"
import { openAIChatMessage } from "../src/internal/units.ts"
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
const temps: Array<string> = []
const tempDir = (prefix: string) => {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  temps.push(dir)
  return dir
}
afterAll(() => {
  for (const dir of temps) rmSync(dir, { recursive: true, force: true })
})
const copyOfExamples = () => {
  const root = tempDir("ctxo-data-")
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
    if (result.format !== "openai") throw new Error("expected an openai request")
    const messages = result.request.messages.map((m) => ({ role: m.role, content: m.content ?? "" }))
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

  const historyOf = (result: Awaited<ReturnType<typeof run>>) => {
    const rows = result.report.units.filter((u) => u.source === "recent_history")
    const turn = (u: { id: string }) => Number(u.id.slice(5))
    return {
      whole: rows.filter((u) => u.status === "included").map(turn),
      reduced: rows.filter((u) => u.status === "cut").map(turn),
      shown: rows
        .filter((u) => u.status !== "dropped")
        .map(turn)
        .sort((a, b) => b - a),
      dropped: rows.filter((u) => u.status === "dropped"),
      systemTexts:
        result.format === "openai"
          ? result.request.messages.filter((m) => m.role === "system").map((m) => m.content ?? "")
          : []
    }
  }
  const expectPairs = (result: Awaited<ReturnType<typeof run>>) => {
    if (result.format !== "openai") throw new Error("expected an openai request")
    const messages = result.request.messages
    messages.forEach((m, i) => {
      const next = messages[i + 1]
      if (m.role === "assistant")
        for (const call of m.tool_calls ?? [])
          expect(next?.role === "tool" ? next.tool_call_id : undefined).toBe(call.id)
    })
  }

  it("shows the newest turns, contiguous, whole or reduced, names those that do not fit even reduced, and stays under the limit", async () => {
    const root = copyOfExamples()
    writeFileSync(join(root, "code-agent-auth", "messages.json"), JSON.stringify(longHistory(30)))
    const result = await run(
      root,
      { sessionId: "code-agent-auth", model: "acme/tiny-4k", format: "openai" },
      tiny
    )
    expect(result.report.total).toBeLessThanOrEqual(result.report.available)
    const h = historyOf(result)
    expect(h.shown.length).toBeGreaterThan(0)
    expect(h.shown).toEqual(Array.from({ length: h.shown.length }, (_, i) => 30 - i))
    expect(h.dropped.length).toBeGreaterThan(0)
    expect(h.dropped[0]!.reason).toMatch(/^does not fit even reduced/)
    for (const u of h.dropped.slice(1))
      expect(u.reason).toMatch(/^older than turn \d+, which does not fit even reduced/)
    // The turns left out are named, with where they are on file.
    const oldestShown = h.shown.at(-1)!
    expect(h.systemTexts.join("\n")).toContain(
      `(Earlier ${oldestShown === 2 ? "turn 1" : `turns 1-${oldestShown - 1}`} left out to fit the budget, with no summary shown for them; on file in messages.json`
    )
    expect(result.report.units.find((u) => u.id === "system_prompt")?.status).toBe("included")
    expect(result.report.units.find((u) => u.id === "query")?.status).toBe("included")
    expect(result.report.units.find((u) => u.id === "CODE_LAW.md")?.status).toBe("included")
    expectPairs(result)
  })

  it("shows an oversized turn reduced, so it never costs the turns before it", async () => {
    const root = copyOfExamples()
    let doc = longHistory(6)
    const big = beginTurn(doc, { input: "Read the whole generated schema." })
    doc = appendStep(big.doc, big.turn, {
      text: "Action: Read[src/schema.ts]",
      toolCall: { callId: "big", name: "Read", input: { path: "src/schema.ts" } }
    }).doc
    doc = appendToolResult(doc, big.turn, {
      callId: "big",
      name: "Read",
      status: "success",
      data: {
        file: "src/schema.ts",
        content: "export const field = { type: 'string', nullable: true }\n".repeat(400)
      },
      full: "tool-results/big.json"
    }).doc
    doc = finishTurn(doc, big.turn, "The schema has 400 nullable string fields.").doc
    const last = beginTurn(doc, { input: "And the next step?" })
    doc = finishTurn(last.doc, last.turn, "Make them required one by one.").doc
    writeFileSync(join(root, "code-agent-auth", "messages.json"), JSON.stringify(doc))
    const result = await run(
      root,
      { sessionId: "code-agent-auth", model: "acme/tiny-4k", format: "openai" },
      tiny
    )
    expect(result.report.total).toBeLessThanOrEqual(result.report.available)
    const h = historyOf(result)
    expect(h.reduced).toEqual([7])
    expect(h.shown).toEqual([8, 7, 6, 5, 4, 3, 2, 1])
    expect(h.dropped).toEqual([])
    const row = result.report.units.find((u) => u.id === "turn-7")!
    expect(row.reason).toMatch(/^reduced to fit the budget: tool results shown as placeholders/)
    if (result.format !== "openai") throw new Error("expected an openai request")
    const placeholder = result.request.messages.find((m) => m.role === "tool" && m.tool_call_id === "big")
    expect(JSON.parse(placeholder!.content ?? "").data).toBe(
      "[Read(src/schema.ts) result — not shown to fit the budget; the full result is on file: tool-results/big.json]"
    )
    // The input and the answer of the reduced turn are kept.
    const texts = result.request.messages.map((m) => m.content ?? "")
    expect(texts).toContain("Read the whole generated schema.")
    expect(texts).toContain("The schema has 400 nullable string fields.")
    expect(result.warnings).toContain(
      "history: turn 7 shown reduced (tool results as placeholders) to fit the budget"
    )
    expectPairs(result)
  })

  it("shows summaries first: the newest that fit, a note that older ones are on file, and names turns archived without one", async () => {
    const root = copyOfExamples()
    let doc = longHistory(8)
    const summary = (n: number, from: number, to: number) => ({
      id: `s${n}-t${from}-${to}`,
      text: `## Summary ${n}\n${"The user and the agent worked through the failing tests. ".repeat(40)}`,
      fromTurn: from,
      toTurn: to,
      messageCount: 4
    })
    doc = {
      ...doc,
      messages: doc.messages.map((m) =>
        m.meta.turn <= 2
          ? { ...m, meta: { ...m.meta, archivedBy: "s1-t1-1" } }
          : m.meta.turn === 3
            ? { ...m, meta: { ...m.meta, archivedBy: "dropped-t3-3" } }
            : m.meta.turn <= 5
              ? { ...m, meta: { ...m.meta, archivedBy: "s2-t4-5" } }
              : m
      ),
      compression: [summary(1, 1, 2), summary(2, 4, 5)]
    }
    writeFileSync(join(root, "code-agent-auth", "messages.json"), JSON.stringify(doc))
    const result = await run(
      root,
      { sessionId: "code-agent-auth", model: "acme/tiny-4k", format: "openai" },
      tiny
    )
    expect(result.report.total).toBeLessThanOrEqual(result.report.available)
    const h = historyOf(result)
    expect(h.shown).toEqual([8, 7, 6])
    const rules = h.systemTexts.findIndex((t) => t.startsWith("# Code law"))
    const compression = h.systemTexts.find((t) => t.includes("## Summary 2"))!
    expect(rules).toBeGreaterThanOrEqual(0)
    expect(compression).not.toContain("## Summary 1")
    expect(compression).toContain("(1 older summary is kept on file in messages.json.)")
    expect(compression).toContain(
      "(Earlier turn 3 left out to fit the budget, with no summary shown for it; on file in messages.json"
    )
    expect(result.report.units.find((u) => u.id === "s1-t1-2")?.status).toBe("dropped")
    expect(result.report.units.find((u) => u.id === "s2-t4-5")?.status).toBe("included")
  })

  it("keeps pinned turns and the rules on a budget that cannot hold the rest", async () => {
    const root = copyOfExamples()
    let doc = longHistory(30)
    const pinned = doc.messages.find((m) => m.meta.turn === 2 && m.meta.kind === "input")!
    doc = {
      ...doc,
      messages: doc.messages.map((m) => (m === pinned ? { ...m, meta: { ...m.meta, pinned: true } } : m))
    }
    writeFileSync(join(root, "code-agent-auth", "messages.json"), JSON.stringify(doc))
    const result = await run(
      root,
      { sessionId: "code-agent-auth", model: "acme/tiny-4k", format: "openai" },
      tiny
    )
    expect(result.report.units.find((u) => u.id === "turn-2")).toMatchObject({
      source: "pinned_history",
      status: "included"
    })
    expect(result.report.units.find((u) => u.id === "CODE_LAW.md")?.status).toBe("included")
    const h = historyOf(result)
    expect(h.shown).toEqual(Array.from({ length: h.shown.length }, (_, i) => 30 - i))
    expect(h.systemTexts.join("\n")).toMatch(/\(Earlier turn 1; turns 3-\d+ left out to fit the budget/)
    // The request shows the pinned turn where it happened: every question in turn order.
    if (result.format !== "openai") throw new Error("expected an openai request")
    const asked = result.request.messages.flatMap((m) =>
      m.role === "user" ? [Number(/^Question (\d+):/.exec(m.content ?? "")?.[1] ?? Number.NaN)] : []
    )
    expect(asked.filter((n) => !Number.isNaN(n))).toEqual([2, ...[...h.shown].reverse()])
    expectPairs(result)
  })

  it("keeps a cut over summarized turns for the next compiles, never one over turns no summary covers", async () => {
    const root = copyOfExamples()
    const file = join(root, "code-agent-auth", "messages.json")
    // Turns 1-20 are live but a summary covers them (a restored session, say).
    const covered = (doc: HistoryDocument): HistoryDocument => ({
      ...doc,
      compression: [
        {
          id: "s1-t1-20",
          text: "## Summary\nTurns 1-20: the tests were fixed.",
          fromTurn: 1,
          toTurn: 20,
          messageCount: 80
        }
      ]
    })
    writeFileSync(file, JSON.stringify(covered(longHistory(30))))
    const first = await run(
      root,
      { sessionId: "code-agent-auth", model: "acme/tiny-4k", format: "openai" },
      tiny
    )
    const start = first.state.historyStartTurn!
    expect(start).toBeGreaterThan(1)
    expect(start).toBeLessThanOrEqual(21)
    const h = historyOf(first)
    expect(h.shown).toEqual(Array.from({ length: 31 - start }, (_, i) => 30 - i))
    for (const u of h.dropped) expect(u.reason).toMatch(/^covered by summary s1-t1-20/)
    // One more finished turn: the history still starts where it did.
    writeFileSync(file, JSON.stringify(covered(longHistory(31))))
    const second = await run(
      root,
      { sessionId: "code-agent-auth", model: "acme/tiny-4k", format: "openai", previous: first.state },
      tiny
    )
    expect(second.state.historyStartTurn).toBe(start)
    expect(second.prefix.hash).toBe(first.prefix.hash)
    expect(second.prefix.unchangedMessages).toBeGreaterThan(3)
    expect(second.prefix.unchangedTokens).toBeGreaterThan(second.prefix.tokens)
    // Exactly what those messages take in the request, counted afresh.
    if (second.format !== "openai") throw new Error("expected an openai request")
    const unchanged = second.request.messages.slice(0, second.prefix.unchangedMessages)
    // Through the same layers as the compile (the tokenizer released after).
    const counted = await Effect.runPromise(
      Effect.gen(function* () {
        const model = yield* (yield* ModelRegistry.ModelRegistry).resolve("acme/tiny-4k")
        const counter = yield* (yield* Tokenizer.Tokenizer).counter(model)
        return counter.countMessages(unchanged.map(openAIChatMessage)) - counter.countMessages([])
      }).pipe(Effect.provide(layerFor(root, tiny)))
    )
    expect(second.prefix.unchangedTokens).toBe(counted)
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
    ["[../profile.md:1:2]", "leaves its directory (..)"],
    ["[/etc/passwd:1:1]", "absolute paths"],
    ["[%2e%2e/profile.md:1:1]", "percent-encoded"]
  ])("refuses %s", async (ref, reason) => {
    const error = await fail(exampleData, { sessionId: "notebook-physics", query: `read ${ref}` })
    expect(error.message).toContain(reason)
  })

  it("refuses a symlink that leads out of the session", async () => {
    const root = copyOfExamples()
    const outside = tempDir("ctxo-outside-")
    writeFileSync(join(outside, "secret.md"), "# Secret\ntoken=abc\n")
    symlinkSync(join(outside, "secret.md"), join(root, "notebook-physics", "linked.md"))
    const error = await fail(root, { sessionId: "notebook-physics", query: "read [linked.md:1:2]" })
    expect(error.message).toBe(
      "Reference [linked.md:1:2]: leads out of what the session may read through a symlink"
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
