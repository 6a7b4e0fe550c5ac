/**
 * The compile bench's long session, made once per process: a data root in a temporary folder
 * (removed when the process exits) holding a code-agent session of `messages` messages (about 75
 * tokens each) and 50 knowledge files, and a runtime of one `CompileCache`, as a gateway has. Used by
 * `compile.bench.ts` and by `paired.ts` (`scripts/paired.mjs`).
 */
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import * as ModelRegistry from "@ctxo/budget/ModelRegistry"
import * as Tokenizer from "@ctxo/budget/Tokenizer"
import type { HistoryDocument } from "@ctxo/history/Message"
import { appendStep, appendToolResult, beginTurn, finishTurn } from "@ctxo/history/Turns"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { Effect, Layer, ManagedRuntime } from "effect"
import type { CompileResult, CompileState } from "../src/Compile.ts"
import { compile } from "../src/Compile.ts"
import * as CompileCache from "../src/CompileCache.ts"
import * as Workspace from "../src/Workspace.ts"

export interface LongSession {
  readonly root: string
  /** The session's history as written to its `messages.json`. */
  readonly doc: HistoryDocument
  /** One compile of the session; warm when given the previous compile's state, as a gateway passes it. */
  readonly run: (previous?: CompileState) => Promise<CompileResult>
  /** Ends the runtime and removes the data root. */
  readonly dispose: () => Promise<void>
}

export const makeLongSession = async (messages = 2_000): Promise<LongSession> => {
  const words =
    "context budget compile history turn token block model window summary reference policy layer".split(" ")
  const sentence = (seed: number, n: number) =>
    Array.from({ length: n }, (_, i) => words[(seed * 7 + i * 13) % words.length]).join(" ")

  // --- the data root
  const root = mkdtempSync(join(tmpdir(), "ctxo-compile-bench-"))
  // Removed however the run ends (done, failed, or a process.exit of the bench).
  process.on("exit", () => rmSync(root, { recursive: true, force: true }))
  const examples = fileURLToPath(new URL("../../../fixtures/data", import.meta.url))
  cpSync(join(examples, "system-prompt.md"), join(root, "system-prompt.md"))
  cpSync(join(examples, "profile.md"), join(root, "profile.md"))
  const session = join(root, "bench")
  mkdirSync(join(session, "docs"), { recursive: true })
  for (let f = 0; f < 50; f++) {
    const sections = Array.from(
      { length: 4 },
      (_, s) => `## Section ${s + 1}\n${sentence(f * 10 + s, 60)}.\n`
    ).join("\n")
    writeFileSync(
      join(session, "docs", `doc-${String(f).padStart(2, "0")}.md`),
      `# Document ${f}\n\n${sections}`
    )
  }
  writeFileSync(
    join(session, "context-config.json"),
    JSON.stringify({
      policy: "code-agent",
      model: "gpt-4o",
      systemPrompt: [{ type: "global", file: "system-prompt.md" }],
      knowledge: [{ path: "docs/*.md" }],
      query: "What should we do next?"
    })
  )
  let doc: HistoryDocument = { format: "ctxo.history/v1", messages: [], compression: [] }
  for (let t = 1; doc.messages.length < messages; t++) {
    const b = beginTurn(doc, { input: `Turn ${t}: ${sentence(t, 70)}?` })
    doc = appendStep(b.doc, b.turn, {
      text: `Thought: ${sentence(t + 1, 40)}\nAction: Read[src/f${t}.ts]`,
      toolCall: { callId: `c${t}`, name: "Read", input: { path: `src/f${t}.ts` } }
    }).doc
    doc = appendToolResult(doc, b.turn, {
      callId: `c${t}`,
      name: "Read",
      status: "success",
      data: { file: `src/f${t}.ts`, content: sentence(t + 2, 90) }
    }).doc
    doc = finishTurn(doc, b.turn, `Answer ${t}: ${sentence(t + 3, 70)}.`).doc
  }
  writeFileSync(join(session, "messages.json"), JSON.stringify(doc, null, 2))

  // One compile cache for the run, as a gateway process has: warm compiles reuse the cold one's work.
  const layer = Layer.mergeAll(
    Workspace.layer(root).pipe(Layer.provide(NodeContext.layer)),
    ModelRegistry.layer(),
    Tokenizer.layer(),
    CompileCache.layer
  )
  const runtime = ManagedRuntime.make(layer)
  await runtime.runPromise(
    Effect.flatMap(Tokenizer.Tokenizer, (t) =>
      Effect.flatMap(
        t.counter({
          id: "x",
          provider: "openai",
          name: "x",
          aliases: [],
          contextWindow: 10,
          maxInput: 10,
          maxOutput: 1,
          tokenizer: { kind: "exact", encoding: "o200k_base" },
          chatFormat: "openai",
          sources: { contextWindow: "", maxInput: "", maxOutput: "", tokenizer: "" }
        }),
        (c) => Effect.sync(() => c.count("warm the encoder"))
      )
    )
  )
  // Warm compiles pass the previous compile's state, as a gateway does for the next turn.
  const run = (previous?: CompileState) =>
    runtime.runPromise(
      compile({ sessionId: "bench", format: "openai", ...(previous === undefined ? {} : { previous }) })
    )
  return {
    root,
    doc,
    run,
    dispose: async () => {
      await runtime.dispose()
      rmSync(root, { recursive: true, force: true })
    }
  }
}
