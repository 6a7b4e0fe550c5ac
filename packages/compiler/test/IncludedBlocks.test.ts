/**
 * The blocks of a compiled request read back with their text: every context block is exactly the
 * text of its ledger row (by hash), the blocks of a layer make up the layer, turns come with their
 * words, and what is no block (system prompt, input, tool definitions) is not one.
 */

import { contentHash } from "@ctxo/budget/Fit"
import * as ModelRegistry from "@ctxo/budget/ModelRegistry"
import * as Tokenizer from "@ctxo/budget/Tokenizer"
import type { HistoryDocument } from "@ctxo/history/Message"
import { beginTurn, finishTurn } from "@ctxo/history/Turns"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import type { CompileOptions, CompileResult } from "../src/Compile.ts"
import { compile } from "../src/Compile.ts"
import { contentOf, includedBlocks } from "../src/IncludedBlocks.ts"
import * as Workspace from "../src/Workspace.ts"

const models = {
  models: {
    "test/small": {
      contextWindow: 2_000,
      tokenizer: { kind: "exact" as const, encoding: "o200k_base" as const }
    }
  }
}
const run = (files: Workspace.MemoryFiles, options: CompileOptions) =>
  Effect.runPromise(
    compile(options).pipe(
      Effect.provide(
        Layer.mergeAll(
          Workspace.layerMemory(files),
          ModelRegistry.layer({ overrides: [{ origin: "test", config: models }] }),
          Tokenizer.layer()
        )
      )
    )
  )

const history = (n: number): HistoryDocument => {
  let doc: HistoryDocument = { format: "ctxo.history/v1", messages: [], compression: [] }
  for (let t = 1; t <= n; t++) {
    const input =
      t === 2
        ? "Please remember: the vault combination is 31-07-19."
        : `Turn ${t}: another look at the build logs, the flaky test and the dashboards.`
    const b = beginTurn(doc, { input })
    doc = finishTurn(b.doc, b.turn, t === 2 ? "Noted, combination 31-07-19." : `Looked again (${t}).`).doc
  }
  return doc
}

const docs = [
  "# Vault\n\nThe vault is in the basement.\n\nIts combination changes every quarter.",
  "# Build\n\nThe build runs on every push.\n\nFlaky tests are retried once.",
  "# Unrelated\n\nNothing about vaults here."
].join("\n\n")

const files: Workspace.MemoryFiles = {
  global: { "system-prompt.md": "You help." },
  sessions: {
    s: {
      "context-config.json": JSON.stringify({
        policy: "layered",
        systemPrompt: [{ type: "global", file: "system-prompt.md" }],
        knowledge: [{ path: "docs.md" }]
      }),
      "docs.md": docs
    }
  }
}

/** What holds of every compile's blocks: each is its ledger row's text, and a layer's blocks are the layer. */
const checkBlocks = (r: CompileResult) => {
  const blocks = includedBlocks(r)
  const rows = new Map(r.report.units.map((u) => [`${u.source}\u0000${u.id}`, u]))
  for (const b of blocks) {
    const row = rows.get(`${b.source}\u0000${b.id}`)
    expect(row, b.id).toBeDefined()
    expect(row!.status === "included" || row!.status === "cut").toBe(true)
    expect(b.tokens).toBe(row!.tokens)
    if (b.kind === "context") {
      expect(b.whole).toBeUndefined()
      expect(contentHash(b.text)).toBe(row!.hash)
      expect(b.content).toBe(contentOf(b.layer, b.text))
    }
  }
  for (const layer of r.composition.layers)
    if (layer._tag === "system" && layer.id !== "system_prompt")
      expect(
        blocks
          .filter((b) => b.layer === layer.id)
          .map((b) => b.text)
          .join("\n\n")
      ).toBe(layer.text)
  // Not blocks: the system prompt, the input, tool definitions.
  expect(blocks.map((b) => b.id)).not.toContain("system_prompt")
  expect(blocks.map((b) => b.id)).not.toContain("query")
  expect(blocks.some((b) => b.id.startsWith("tool:"))).toBe(false)
  return blocks
}

describe("includedBlocks", () => {
  it("reads knowledge blocks and memories back with exactly the text their ledger rows counted", async () => {
    const r = await run(files, {
      sessionId: "s",
      query: "Where is the vault, who has its key?",
      history: history(3),
      memory: [
        {
          id: "L3:aaaaaaaaaaaaaaaa",
          level: "L3",
          text: "User: the vault moved to the basement last year.\nAssistant: Noted.",
          importance: 0.8,
          sources: [{ session: "other", turn: 3 }]
        },
        {
          id: "L2:s:t999",
          level: "L2",
          text: "User: the vault key is with the facilities team.\nAssistant: Noted.",
          importance: 0.7,
          sources: [{ session: "other", turn: 999 }]
        }
      ],
      tools: [
        {
          spec: { type: "function", function: { name: "open_vault", description: "Open the vault." } },
          alwaysOn: true
        }
      ]
    })
    expect(r.format === "openai" && r.request.tools?.length).toBe(1)
    const blocks = checkBlocks(r)
    expect([...new Set(blocks.map((b) => b.layer))].sort()).toEqual(
      ["checkpoint_messages", "important_memory__context", "knowledge__context", "memory__context"].sort()
    )
    // Three knowledge blocks of one file, each its own block.
    expect(
      blocks
        .filter((b) => b.layer === "knowledge__context")
        .map((b) => b.id)
        .sort()
    ).toEqual(["docs.md#Build", "docs.md#Unrelated", "docs.md#Vault"])
    // Content without the compiler's provenance line.
    const memory = blocks.find((b) => b.id === "L3:aaaaaaaaaaaaaaaa")!
    expect(memory.text.startsWith("[L3 memory, from session other turn 3]\n")).toBe(true)
    expect(memory.content).toBe("User: the vault moved to the basement last year.\nAssistant: Noted.")
    // A turn: its messages as text, its words as content.
    const turn = blocks.find((b) => b.id === "turn-3")!
    expect(turn).toMatchObject({ kind: "turn", source: "recent_history" })
    expect(turn.content).toBe(
      "User: Turn 3: another look at the build logs, the flaky test and the dashboards.\nAssistant: Looked again (3)."
    )
    expect(turn.text).toMatch(/^\[user\] Turn 3/)
  })

  it("reads a recalled turn back as the turn's words", async () => {
    const r = await run(files, {
      sessionId: "s",
      model: "test/small",
      query: "What is the vault combination?",
      history: history(120)
    })
    const blocks = checkBlocks(r)
    const recalled = blocks.find((b) => b.layer === "recall__context")!
    expect(recalled.id).toBe("recalled-turn-2")
    expect(recalled.text.startsWith("Earlier turn 2, recalled")).toBe(true)
    expect(recalled.content).toBe(
      "User: Please remember: the vault combination is 31-07-19.\nAssistant: Noted, combination 31-07-19."
    )
    // The note on left-out turns is a block of compression__context.
    expect(blocks.find((b) => b.id === "history-note")).toMatchObject({ layer: "compression__context" })
  })

  it("names a layer that is no join of its units' texts as one whole block", async () => {
    const r = await run(files, { sessionId: "s", query: "vault?", history: history(1) })
    const knowledge = r.composition.layers.find((l) => l.id === "knowledge__context")!
    const tampered = {
      ...r,
      composition: {
        ...r.composition,
        layers: r.composition.layers.map((l) =>
          l === knowledge && l._tag === "system" ? { ...l, text: `${l.text} (edited)` } : l
        )
      }
    }
    const blocks = includedBlocks(tampered).filter((b) => b.layer === "knowledge__context")
    expect(blocks).toEqual([
      expect.objectContaining({ id: "knowledge__context", whole: true, source: "knowledge" })
    ])
  })
})
