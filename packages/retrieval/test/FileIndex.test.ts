import { assert, describe, expect, it } from "@effect/vitest"
import { Effect, Either, Ref } from "effect"
import * as Embedder from "../src/Embedder.ts"
import type { FileBlock } from "../src/FileIndex.ts"
import * as FileIndex from "../src/FileIndex.ts"
import { EmbeddingError } from "../src/RetrievalErrors.ts"
import { blockSource, memoryPersistence } from "./helpers.ts"

const files = () =>
  new Map<string, ReadonlyArray<FileBlock>>([
    [
      "deploy.md",
      [
        { id: "Deploy", text: "# Deploy\nHow the gateway reaches production.", title: "Deploy" },
        {
          id: "Deploy/Rollback",
          text: "## Rollback\nAbort the canary with argo rollouts abort.",
          title: "Deploy / Rollback"
        }
      ]
    ],
    [
      "faq.md",
      [{ id: "Refunds", text: "## Refunds\nAnnual plans are refunded within 30 days.", title: "Refunds" }]
    ],
    ["值班.md", [{ id: "值班补贴", text: "## 值班补贴\n周末值班每天补贴 300 元。", title: "值班补贴" }]]
  ])
const listing = (versions: Record<string, string>) =>
  Object.entries(versions).map(([path, version]) => ({ path, version }))
const v1 = { "deploy.md": "a1", "faq.md": "b1", "值班.md": "c1" }

/** An embedder that counts the texts it embeds and can be told to fail. */
const countingEmbedder = (model = "hashed-test") =>
  Effect.gen(function* () {
    const embedded = yield* Ref.make(0)
    const failing = yield* Ref.make(false)
    const inner = Embedder.makeHashed({ dimensions: 64 })
    const service: Embedder.Service = {
      model,
      embed: (texts) =>
        Effect.gen(function* () {
          if (yield* Ref.get(failing))
            return yield* new EmbeddingError({ model, reason: "connection refused" })
          yield* Ref.update(embedded, (n) => n + texts.length)
          return yield* inner.embed(texts)
        })
    }
    return { service, embedded, failing }
  })

describe("FileIndex.sync", () => {
  it.effect("indexes every file the first time and reports what it did", () =>
    Effect.gen(function* () {
      const { persistence, saves } = yield* memoryPersistence()
      const source = blockSource(files())
      const index = yield* FileIndex.make({ persistence })
      const report = yield* index.sync(listing(v1), source.blocksOf)
      assert.deepStrictEqual(report, { added: 3, updated: 0, removed: 0, unchanged: 0, blocks: 4 })
      assert.strictEqual(yield* Ref.get(saves), 1)
      const result = yield* index.search("how do I abort the canary")
      assert.strictEqual(result.ranking, "bm25")
      assert.deepStrictEqual(result.hits[0], {
        id: "deploy.md#Deploy/Rollback",
        path: "deploy.md",
        block: "Deploy/Rollback",
        score: result.hits[0]!.score
      })
      assert.strictEqual((yield* index.search("周末值班补贴多少")).hits[0]?.path, "值班.md")
    })
  )

  it.effect("after a restart over unchanged files, asks for no blocks and saves nothing", () =>
    Effect.gen(function* () {
      const { persistence, saves } = yield* memoryPersistence()
      const first = yield* FileIndex.make({ persistence })
      yield* first.sync(listing(v1), blockSource(files()).blocksOf)
      const before = yield* first.search("refunded annual plans")

      const source = blockSource(files())
      const restarted = yield* FileIndex.make({ persistence })
      const report = yield* restarted.sync(listing(v1), source.blocksOf)
      assert.deepStrictEqual(source.asked, [])
      assert.deepStrictEqual(report, { added: 0, updated: 0, removed: 0, unchanged: 3, blocks: 4 })
      assert.strictEqual(yield* Ref.get(saves), 1)
      assert.deepStrictEqual(yield* restarted.search("refunded annual plans"), before)
      assert.deepStrictEqual(yield* restarted.files, [
        { path: "deploy.md", version: "a1" },
        { path: "faq.md", version: "b1" },
        { path: "值班.md", version: "c1" }
      ])
    })
  )

  it.effect("re-reads only changed files and drops vanished ones", () =>
    Effect.gen(function* () {
      const { persistence } = yield* memoryPersistence()
      const index = yield* FileIndex.make({ persistence })
      yield* index.sync(listing(v1), blockSource(files()).blocksOf)

      const changed = files()
      changed.set("faq.md", [
        { id: "Refunds", text: "## Refunds\nMonthly plans are never refunded.", title: "Refunds" }
      ])
      changed.set("new.md", [{ id: "Vacuum", text: "## Vacuum\nAutovacuum cleans dead tuples." }])
      const source = blockSource(changed)
      const report = yield* index.sync(
        listing({ "faq.md": "b2", "值班.md": "c1", "new.md": "d1" }),
        source.blocksOf
      )
      assert.deepStrictEqual([...source.asked].sort(), ["faq.md", "new.md"])
      assert.deepStrictEqual(report, { added: 1, updated: 1, removed: 1, unchanged: 1, blocks: 3 })
      assert.deepStrictEqual((yield* index.search("canary rollback")).hits, [])
      assert.deepStrictEqual((yield* index.search("annual")).hits, [])
      assert.strictEqual((yield* index.search("monthly plans")).hits[0]?.id, "faq.md#Refunds")
      assert.strictEqual((yield* index.search("dead tuples")).hits[0]?.id, "new.md#Vacuum")
    })
  )

  it.effect("a file whose block disappears loses that block only", () =>
    Effect.gen(function* () {
      const { persistence } = yield* memoryPersistence()
      const index = yield* FileIndex.make({ persistence })
      yield* index.sync(listing(v1), blockSource(files()).blocksOf)
      const changed = files()
      changed.set("deploy.md", [changed.get("deploy.md")![0]!])
      yield* index.sync(listing({ ...v1, "deploy.md": "a2" }), blockSource(changed).blocksOf)
      assert.deepStrictEqual((yield* index.search("argo abort")).hits, [])
      assert.strictEqual((yield* index.search("gateway production")).hits[0]?.id, "deploy.md#Deploy")
    })
  )

  it.effect("filters hits by path", () =>
    Effect.gen(function* () {
      const { persistence } = yield* memoryPersistence()
      const index = yield* FileIndex.make({ persistence })
      yield* index.sync(listing(v1), blockSource(files()).blocksOf)
      const result = yield* index.search("deploy refunds", { paths: (p) => p === "faq.md" })
      assert.deepStrictEqual(
        result.hits.map((h) => h.id),
        ["faq.md#Refunds"]
      )
    })
  )

  it.effect("rebuilds from a corrupt saved index and says why", () =>
    Effect.gen(function* () {
      for (const [saved, reason] of [
        ["{not json", /not valid JSON/],
        [JSON.stringify({ format: "ctxo.retrieval/file-index", version: 7 }), /version 7 is not supported/],
        [
          JSON.stringify({ format: "ctxo.retrieval/file-index", version: 1, files: {}, index: {} }),
          /format is/
        ]
      ] as const) {
        const { persistence, stored } = yield* memoryPersistence(saved)
        const source = blockSource(files())
        const index = yield* FileIndex.make({ persistence })
        const report = yield* index.sync(listing(v1), source.blocksOf)
        assert.strictEqual(report.added, 3)
        expect(report.reset).toMatch(/^The saved file index cannot be loaded: /)
        expect(report.reset).toMatch(reason)
        assert.strictEqual(source.asked.length, 3)
        // saved again in a good shape: the next start loads it
        const again = yield* FileIndex.make({ persistence })
        const next = yield* again.sync(listing(v1), blockSource(files()).blocksOf)
        assert.strictEqual(next.reset, undefined)
        assert.strictEqual(next.unchanged, 3)
        assert.isTrue((yield* Ref.get(stored))!.startsWith('{"format":"ctxo.retrieval/file-index"'))
      }
    })
  )

  it.effect("refuses a file listed twice or two blocks with one id, changing nothing", () =>
    Effect.gen(function* () {
      const { persistence, saves } = yield* memoryPersistence()
      const index = yield* FileIndex.make({ persistence })
      yield* index.sync(listing(v1), blockSource(files()).blocksOf)

      const twice = yield* Effect.flip(
        index.sync([...listing(v1), { path: "faq.md", version: "x" }], blockSource(files()).blocksOf)
      )
      assert.strictEqual(twice._tag, "InvalidBlocks")
      assert.strictEqual(twice.message, "The blocks of faq.md cannot be indexed: the file is listed twice")

      const duplicated = files()
      duplicated.set("faq.md", [
        { id: "Refunds", text: "one" },
        { id: "Refunds", text: "two" }
      ])
      const error = yield* Effect.flip(
        index.sync(listing({ ...v1, "faq.md": "b2" }), blockSource(duplicated).blocksOf)
      )
      assert.strictEqual(error._tag, "InvalidBlocks")
      expect(error.message).toMatch(/two blocks have the id "Refunds"/)
      assert.strictEqual((yield* index.search("annual plans")).hits[0]?.id, "faq.md#Refunds")
      assert.strictEqual(yield* Ref.get(saves), 1)
    })
  )

  it.effect("a failing blocksOf fails the sync and applies nothing", () =>
    Effect.gen(function* () {
      const { persistence } = yield* memoryPersistence()
      const index = yield* FileIndex.make({ persistence })
      yield* index.sync(listing(v1), blockSource(files()).blocksOf)
      const result = yield* Effect.either(
        index.sync(listing({ "faq.md": "b2", "deploy.md": "a1" }), (path) =>
          path === "faq.md" ? Effect.fail("faq.md is unreadable" as const) : Effect.succeed([])
        )
      )
      assert.deepStrictEqual(result, Either.left("faq.md is unreadable"))
      // 值班.md was not removed, faq.md keeps its old blocks
      assert.strictEqual((yield* index.search("周末值班补贴")).hits[0]?.path, "值班.md")
      assert.strictEqual((yield* index.search("annual")).hits[0]?.id, "faq.md#Refunds")
    })
  )
})

describe("FileIndex with an embedder", () => {
  it.effect("ranks hybrid, embeds each block once, also across restarts", () =>
    Effect.gen(function* () {
      const { persistence } = yield* memoryPersistence()
      const { service, embedded } = yield* countingEmbedder()
      const index = yield* FileIndex.make({ persistence, embedder: service })
      const report = yield* index.sync(listing(v1), blockSource(files()).blocksOf)
      assert.deepStrictEqual(report.embedding, { embedded: 4 })
      assert.strictEqual(yield* Ref.get(embedded), 4)
      const result = yield* index.search("abort the canary")
      assert.strictEqual(result.ranking, "hybrid")
      assert.strictEqual(result.hits[0]?.id, "deploy.md#Deploy/Rollback")

      // a restart: vectors come from the saved index
      const restarted = yield* FileIndex.make({ persistence, embedder: service })
      const source = blockSource(files())
      const again = yield* restarted.sync(listing(v1), source.blocksOf)
      assert.deepStrictEqual(source.asked, [])
      assert.deepStrictEqual(again.embedding, { embedded: 0 })
      assert.strictEqual(yield* Ref.get(embedded), 4 + 1) // + the query above
      assert.deepStrictEqual(yield* restarted.search("abort the canary"), result)

      // a changed file whose other block kept its text: only the changed block is embedded
      const changed = files()
      changed.set("deploy.md", [
        changed.get("deploy.md")![0]!,
        {
          id: "Deploy/Rollback",
          text: "## Rollback\nPromote the previous release.",
          title: "Deploy / Rollback"
        }
      ])
      const third = yield* restarted.sync(
        listing({ ...v1, "deploy.md": "a2" }),
        blockSource(changed).blocksOf
      )
      assert.deepStrictEqual(third.embedding, { embedded: 1 })
    })
  )

  it.effect("drops vectors of another model and embeds again", () =>
    Effect.gen(function* () {
      const { persistence } = yield* memoryPersistence()
      const first = yield* countingEmbedder("model-a")
      const index = yield* FileIndex.make({ persistence, embedder: first.service })
      yield* index.sync(listing(v1), blockSource(files()).blocksOf)
      const second = yield* countingEmbedder("model-b")
      const other = yield* FileIndex.make({ persistence, embedder: second.service })
      const source = blockSource(files())
      const report = yield* other.sync(listing(v1), source.blocksOf)
      assert.deepStrictEqual(report.embedding, { embedded: 4 })
      assert.strictEqual(report.unchanged, 3)
      assert.strictEqual(source.asked.length, 3)
    })
  )

  it.effect("an embedding failure keeps the full-text update, says so, and is repaired next sync", () =>
    Effect.gen(function* () {
      const { persistence } = yield* memoryPersistence()
      const { service, failing, embedded } = yield* countingEmbedder()
      yield* Ref.set(failing, true)
      const index = yield* FileIndex.make({ persistence, embedder: service })
      const report = yield* index.sync(listing(v1), blockSource(files()).blocksOf)
      assert.strictEqual(report.added, 3)
      assert.deepStrictEqual(report.embedding, {
        embedded: 0,
        error: "Embedding with hashed-test failed: connection refused"
      })
      const search = yield* index.search("abort the canary")
      assert.strictEqual(search.ranking, "bm25")
      assert.strictEqual(search.note, "no block has a vector yet: sync with the embedder first")
      assert.strictEqual(search.hits[0]?.id, "deploy.md#Deploy/Rollback")

      yield* Ref.set(failing, false)
      const source = blockSource(files())
      const repaired = yield* index.sync(listing(v1), source.blocksOf)
      assert.deepStrictEqual(repaired.embedding, { embedded: 4 })
      assert.deepStrictEqual(repaired.unchanged, 3)
      assert.deepStrictEqual([...source.asked].sort(), ["deploy.md", "faq.md", "值班.md"])
      assert.strictEqual(yield* Ref.get(embedded), 4)

      yield* Ref.set(failing, true)
      const fallback = yield* index.search("abort the canary")
      assert.strictEqual(fallback.ranking, "bm25")
      expect(fallback.note).toMatch(/connection refused; ranked by full text alone/)
      assert.deepStrictEqual(fallback.hits, search.hits)
    })
  )
})
