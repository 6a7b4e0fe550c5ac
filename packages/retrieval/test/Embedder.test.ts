import { afterAll, assert, beforeAll, describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Effect, Layer } from "effect"
import * as Embedder from "../src/Embedder.ts"
import * as FileIndex from "../src/FileIndex.ts"
import type { FakeEmbeddingServer } from "./helpers.ts"
import { blockSource, memoryPersistence, startEmbeddingServer } from "./helpers.ts"

let server: FakeEmbeddingServer
beforeAll(async () => {
  server = await startEmbeddingServer()
})
afterAll(async () => {
  await server.close()
})
const reset = (mode: FakeEmbeddingServer["mode"] = "ok") => {
  server.requests.length = 0
  server.authorizations.length = 0
  server.mode = mode
}
const client = (options: Partial<Embedder.OpenAIEmbedderOptions> = {}) =>
  Embedder.makeOpenAI({
    baseURL: server.baseURL,
    apiKey: "sk-test",
    model: "fake-embed",
    maxRetries: 0,
    ...options
  })

describe("Embedder.makeOpenAI against a local OpenAI-compatible server", () => {
  it.effect("returns the server's vectors in order, in batches, as plain floats", () =>
    Effect.gen(function* () {
      reset()
      const texts = Array.from({ length: 130 }, (_, i) => `text number ${i} about deploys`)
      const vectors = yield* client({ batchSize: 64 }).embed(texts)
      assert.strictEqual(vectors.length, 130)
      vectors.forEach((v, i) => {
        assert.deepStrictEqual(v, Embedder.hashedVector(texts[i]!, 64))
      })
      assert.deepStrictEqual(
        server.requests.map((r) => r.input.length),
        [64, 64, 2]
      )
      assert.isTrue(server.requests.every((r) => r.model === "fake-embed" && r.encoding_format === "float"))
      assert.isTrue(server.authorizations.every((a) => a === "Bearer sk-test"))
    })
  )

  it.effect("puts items back in input order by their index", () =>
    Effect.gen(function* () {
      reset("shuffled")
      const vectors = yield* client().embed(["alpha", "beta", "gamma"])
      assert.deepStrictEqual(vectors[0], Embedder.hashedVector("alpha", 64))
      assert.deepStrictEqual(vectors[2], Embedder.hashedVector("gamma", 64))
    })
  )

  it.effect("makes no request for no texts", () =>
    Effect.gen(function* () {
      reset()
      assert.deepStrictEqual(yield* client().embed([]), [])
      assert.strictEqual(server.requests.length, 0)
    })
  )

  it.effect("a server error or a wrong number of vectors is an EmbeddingError naming the model", () =>
    Effect.gen(function* () {
      reset("error")
      const failed = yield* Effect.flip(client().embed(["a"]))
      assert.strictEqual(failed._tag, "EmbeddingError")
      expect(failed.message).toMatch(/^Embedding with fake-embed failed: 500/)
      reset("short")
      const short = yield* Effect.flip(client().embed(["a", "b"]))
      assert.strictEqual(short.message, "Embedding with fake-embed failed: asked for 2 vectors, got 1")
    })
  )

  it.effect("layerOpenAIConfig reads model, base URL and key from configuration", () =>
    Effect.gen(function* () {
      reset()
      const config = ConfigProvider.fromMap(
        new Map([
          ["CTXO_EMBEDDING_MODEL", "configured-model"],
          ["CTXO_UPSTREAM_BASE_URL", server.baseURL],
          ["CTXO_EMBEDDING_API_KEY", "sk-config"],
          ["CTXO_EMBEDDING_BATCH_SIZE", "2"]
        ])
      )
      const embedder = yield* Embedder.Embedder.pipe(
        Effect.provide(Embedder.layerOpenAIConfig.pipe(Layer.provide(Layer.setConfigProvider(config))))
      )
      yield* embedder.embed(["a", "b", "c"])
      assert.strictEqual(embedder.model, "configured-model")
      assert.deepStrictEqual(
        server.requests.map((r) => [r.model, r.input.length]),
        [
          ["configured-model", 2],
          ["configured-model", 1]
        ]
      )
      assert.deepStrictEqual(server.authorizations, ["Bearer sk-config", "Bearer sk-config"])
    })
  )

  it.effect("drives FileIndex's hybrid ranking end to end", () =>
    Effect.gen(function* () {
      reset()
      const { persistence } = yield* memoryPersistence()
      const index = yield* FileIndex.make({ persistence, embedder: client() })
      const files = new Map([
        ["a.md", [{ id: "Backups", text: "Nightly backups are kept for 35 days." }]],
        ["b.md", [{ id: "Rollback", text: "Roll back with argo rollouts abort." }]]
      ])
      const report = yield* index.sync(
        [
          { path: "a.md", version: "1" },
          { path: "b.md", version: "1" }
        ],
        blockSource(files).blocksOf
      )
      assert.deepStrictEqual(report.embedding, { embedded: 2 })
      const result = yield* index.search("how long are backups kept")
      assert.strictEqual(result.ranking, "hybrid")
      assert.strictEqual(result.hits[0]?.id, "a.md#Backups")
      assert.strictEqual(server.requests.length, 2)
    })
  )
})

describe("Embedder.hashedVector", () => {
  it("is deterministic, unit length, and closer for texts that share words", () => {
    const a = Embedder.hashedVector("roll back the production deploy")
    assert.deepStrictEqual(a, Embedder.hashedVector("roll back the production deploy"))
    assert.closeTo(Math.hypot(...a), 1, 1e-9)
    const dot = (x: ReadonlyArray<number>, y: ReadonlyArray<number>) =>
      x.reduce((s, v, i) => s + v * y[i]!, 0)
    const near = Embedder.hashedVector("deploying to production, then rolling back")
    const far = Embedder.hashedVector("annual plans are refunded within thirty days")
    assert.isAbove(dot(a, near), dot(a, far))
    assert.deepStrictEqual(Embedder.hashedVector("the of and", 8), new Array(8).fill(0))
  })
})
