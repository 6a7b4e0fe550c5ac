/**
 * The data root's knowledge index in compiles: the block that answers the input is kept when not
 * all fit, only changed files are indexed again, a restart indexes nothing, and with an embedder
 * the ranking is hybrid.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as ModelRegistry from "@ctxo/budget/ModelRegistry"
import * as Tokenizer from "@ctxo/budget/Tokenizer"
import { compile } from "@ctxo/compiler/Compile"
import { KnowledgeIndex } from "@ctxo/compiler/ContextSource"
import * as Workspace from "@ctxo/compiler/Workspace"
import { makeHashed } from "@ctxo/retrieval/Embedder"
import * as Store from "@ctxo/store/Store"
import { Effect, Layer } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import * as Index from "../src/KnowledgeIndex.ts"

const roots: Array<string> = []
afterAll(() => {
  for (const r of roots) rmSync(r, { recursive: true, force: true })
})

const filler = (topic: string, n: number) =>
  Array.from(
    { length: n },
    (_, i) => `# ${topic} note ${i}\n${"Routine notes about office logistics and lunch plans. ".repeat(10)}`
  ).join("\n\n")

/** A data root with a session whose knowledge is three files, one block of which answers the query. */
const dataRoot = () => {
  const root = mkdtempSync(join(tmpdir(), "ctxo-knowledge-"))
  roots.push(root)
  writeFileSync(
    join(root, "sessions.json"),
    JSON.stringify([{ id: "kb", concept: "docs", createdAt: "2026-11-01T00:00:00.000Z" }])
  )
  mkdirSync(join(root, "kb", "docs"), { recursive: true })
  writeFileSync(
    join(root, "kb", "context-config.json"),
    JSON.stringify({ model: "test/small", knowledge: [{ path: "docs/*.md" }] })
  )
  writeFileSync(join(root, "kb", "docs", "a.md"), filler("A", 30))
  writeFileSync(
    join(root, "kb", "docs", "b.md"),
    `${filler("B", 6)}\n\n# Rotating the signing key\nRun \`keys rotate --grace 24h\`, then redeploy the auth service.`
  )
  writeFileSync(join(root, "kb", "docs", "c.md"), filler("C", 12))
  return root
}

const models = {
  overrides: [
    {
      origin: "test",
      config: {
        models: {
          "test/small": {
            contextWindow: 3_000,
            tokenizer: { kind: "exact" as const, encoding: "o200k_base" as const }
          }
        }
      }
    }
  ]
}

/** One process over the data root: its store, its index, compiles that rank with it. */
const processOver = (root: string, embedder?: ReturnType<typeof makeHashed>) =>
  Effect.gen(function* () {
    const store = Store.makeUnsafe(root)
    const index = yield* Index.make(embedder === undefined ? {} : { embedder }).pipe(
      Effect.provide(Layer.succeed(Store.Store, store))
    )
    const layer = Layer.mergeAll(
      Layer.succeed(Store.Store, store),
      Layer.succeed(Workspace.Workspace, Workspace.fromStore(store)),
      Layer.succeed(KnowledgeIndex, { rank: index.rank }),
      ModelRegistry.layer(models),
      Tokenizer.layer()
    )
    const run = (query: string) => compile({ sessionId: "kb", query }).pipe(Effect.provide(layer))
    const stats = index.stats.pipe(Effect.provide(Layer.succeed(Store.Store, store)))
    return { run, stats }
  })

const kept = (r: { report: { units: ReadonlyArray<{ source: string; status: string; id: string }> } }) =>
  r.report.units.filter((u) => u.source === "knowledge" && u.status === "included").map((u) => u.id)

describe("the knowledge index of a data root", () => {
  it("keeps the answering block, re-indexes only what changed, and nothing after a restart", async () => {
    const root = dataRoot()
    await Effect.runPromise(
      Effect.gen(function* () {
        const first = yield* processOver(root)
        const r = yield* first.run("how do I rotate the signing key?")
        expect(kept(r)).toContain("docs/b.md#Rotating the signing key")
        expect(kept(r).length).toBeLessThan(30)
        expect((yield* first.stats).lastSync).toMatchObject({ added: 3, updated: 0, unchanged: 0 })
        yield* first.run("lunch plans")
        expect((yield* first.stats).lastSync).toMatchObject({ added: 0, updated: 0, unchanged: 3 })
        writeFileSync(join(root, "kb", "docs", "c.md"), filler("C", 3))
        yield* first.run("lunch plans")
        expect((yield* first.stats).lastSync).toMatchObject({ added: 0, updated: 1, unchanged: 2 })
        expect((yield* first.stats).ranking).toBe("bm25")

        // A new process over the same data root: the saved index answers, nothing is indexed again.
        const second = yield* processOver(root)
        const again = yield* second.run("how do I rotate the signing key?")
        expect(kept(again)).toContain("docs/b.md#Rotating the signing key")
        expect((yield* second.stats).lastSync).toMatchObject({
          added: 0,
          updated: 0,
          removed: 0,
          unchanged: 3
        })
      })
    )
  })

  it("ranks hybrid with an embedder", async () => {
    const root = dataRoot()
    await Effect.runPromise(
      Effect.gen(function* () {
        const p = yield* processOver(root, makeHashed())
        const r = yield* p.run("rotate the signing key")
        expect(kept(r)).toContain("docs/b.md#Rotating the signing key")
        expect((yield* p.stats).ranking).toBe("hybrid")
      })
    )
  })
})
