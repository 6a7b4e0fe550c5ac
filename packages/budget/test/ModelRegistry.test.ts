import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Effect, Either, Layer } from "effect"
import * as ModelRegistry from "../src/ModelRegistry.ts"

const registry = Either.getOrThrow(ModelRegistry.make())
const resolve = (name: string) => Effect.runSync(registry.resolve(name))
const failure = (name: string) => Effect.runSync(Effect.flip(registry.resolve(name)))

describe("ModelRegistry", () => {
  it("knows current models of every major provider, each number with its source", () => {
    const providers = new Set(registry.list.map((m) => m.provider))
    expect([...providers].sort()).toEqual([
      "anthropic",
      "deepseek",
      "google",
      "meta",
      "mistral",
      "openai",
      "qwen"
    ])
    for (const model of registry.list) {
      expect(model.maxInput).toBeLessThanOrEqual(model.contextWindow)
      for (const source of Object.values(model.sources)) expect(source.length).toBeGreaterThan(10)
    }
  })

  it("keeps max input apart from the window", () => {
    const gpt5 = resolve("openai/gpt-5")
    expect([gpt5.contextWindow, gpt5.maxInput, gpt5.maxOutput]).toEqual([400_000, 272_000, 128_000])
    expect(gpt5.sources.maxInput).toBe("https://platform.openai.com/docs/models/gpt-5")
    const gemini = resolve("gemini-2.5-pro")
    expect(gemini.maxInput).toBe(1_048_576)
  })

  it("resolves ids, bare names, aliases, snapshots and other provider prefixes", () => {
    expect(resolve("gpt-4o").id).toBe("openai/gpt-4o")
    expect(resolve("OpenAI/GPT-4o").id).toBe("openai/gpt-4o")
    expect(resolve("gpt-4o-2024-08-06").id).toBe("openai/gpt-4o")
    expect(resolve("gpt-4o-mini").id).toBe("openai/gpt-4o-mini")
    expect(resolve("claude-sonnet-4-5-20250929").id).toBe("anthropic/claude-sonnet-4-5")
    expect(resolve("claude-3-7-sonnet-latest").id).toBe("anthropic/claude-3-7-sonnet")
    expect(resolve("claude-opus-4.1").id).toBe("anthropic/claude-opus-4-1")
    expect(resolve("meta-llama/llama-3.3-70b-instruct").id).toBe("meta/llama-3.3-70b-instruct")
    expect(resolve("gpt-4o").requested).toBe("gpt-4o")
  })

  it("resolves a name once: asked again, the same model, each spelling with its own requested name", () => {
    const first = resolve("GPT-4o")
    expect(resolve("GPT-4o")).toBe(first)
    expect(resolve("gpt-4o").requested).toBe("gpt-4o")
    expect(first.requested).toBe("GPT-4o")
    // An unknown name is not kept: asked again, it fails again with its suggestions.
    expect(failure("gpt-4oo").suggestions).toContain("openai/gpt-4o")
    expect(failure("gpt-4oo").suggestions).toContain("openai/gpt-4o")
  })

  it("gives the real windows, not one default for all", () => {
    expect(resolve("gpt-4").contextWindow).toBe(8_192)
    expect(resolve("claude-sonnet-4-5").contextWindow).toBe(200_000)
    expect(resolve("gpt-4.1").contextWindow).toBe(1_047_576)
    expect(resolve("gpt-4").tokenizer).toEqual({ kind: "exact", encoding: "cl100k_base" })
    expect(resolve("claude-sonnet-4-5").tokenizer.kind).toBe("estimate")
  })

  it("names an unknown model, with suggestions, unless a fallback is configured", () => {
    const error = failure("gpt-4oo")
    expect(error._tag).toBe("UnknownModel")
    expect(error.model).toBe("gpt-4oo")
    expect(error.suggestions).toContain("openai/gpt-4o")
    expect(error.message).toContain('Unknown model "gpt-4oo"')

    const withFallback = Either.getOrThrow(ModelRegistry.make({ fallback: "gpt-4o-mini" }))
    const resolved = Effect.runSync(withFallback.resolve("my-private-model"))
    expect(resolved.id).toBe("openai/gpt-4o-mini")
    expect(resolved.fallback).toContain('unknown model "my-private-model"')
  })

  it("applies overrides from a file and the environment, the environment winning, and reports them", () =>
    Effect.gen(function* () {
      const registry = yield* ModelRegistry.ModelRegistry
      const gpt4o = yield* registry.resolve("gpt-4o")
      expect(gpt4o.contextWindow).toBe(64_000)
      expect(gpt4o.sources.contextWindow).toBe("CTXO_MODELS")
      expect(gpt4o.maxOutput).toBe(16_384)
      const custom = yield* registry.resolve("acme/tiny-8k")
      expect([custom.contextWindow, custom.maxInput, custom.tokenizer.kind]).toEqual([
        8_000,
        8_000,
        "estimate"
      ])
      expect(custom.sources.contextWindow).toBe("models.json")
      expect((yield* registry.resolve("tiny")).id).toBe("acme/tiny-8k")
      expect((yield* registry.resolve("nobody-knows")).id).toBe("acme/tiny-8k")
    }).pipe(
      Effect.provide(
        ModelRegistry.layerConfig([
          {
            origin: "models.json",
            text: JSON.stringify({
              fallback: "acme/tiny-8k",
              models: {
                "openai/gpt-4o": { contextWindow: 100_000, maxOutput: 16_384 },
                "acme/tiny-8k": {
                  contextWindow: 8_000,
                  tokenizer: { kind: "estimate", family: "acme", factor: 1.2 },
                  aliases: ["tiny"]
                }
              }
            })
          }
        ]).pipe(
          Layer.provide(
            Layer.setConfigProvider(
              ConfigProvider.fromMap(
                new Map([
                  ["CTXO_MODELS", '{"models":{"openai/gpt-4o":{"contextWindow":64000,"maxOutput":16384}}}']
                ])
              )
            )
          )
        )
      ),
      Effect.runPromise
    ))

  it("rejects invalid overrides with the origin and the field", () => {
    const bad = (config: unknown) =>
      Either.flip(
        ModelRegistry.make({
          overrides: [{ origin: "models.json", config: config as ModelRegistry.ModelsConfig }]
        })
      ).pipe(Either.getOrThrow).message
    expect(bad({ models: { "openai/gpt-4o": { maxInput: 500_000 } } })).toBe(
      'Invalid model configuration in models.json: models["openai/gpt-4o"]: maxInput 500000 exceeds contextWindow 128000'
    )
    expect(bad({ models: { tiny: { contextWindow: 8000 } } })).toContain("provider-qualified")
    expect(bad({ models: { "acme/x": { contextWindow: 8000 } } })).toContain("a new model needs tokenizer")
    const parsed = Either.flip(
      ModelRegistry.parseModelsConfig('{"models":{"a/b":{"contextWindow":-5}}}', "CTXO_MODELS")
    ).pipe(Either.getOrThrow)
    // One sentence naming the origin and the JSON path, never the schema.
    expect(parsed.message).toMatch(
      /^Invalid model configuration in CTXO_MODELS: models\["a\/b"\]\.contextWindow: [^\n]+$/
    )
    expect(parsed.message.length).toBeLessThanOrEqual(300)
    const notJson = Either.flip(ModelRegistry.parseModelsConfig("{models:", "models.json")).pipe(
      Either.getOrThrow
    )
    expect(notJson.message).toMatch(/^Invalid model configuration in models\.json: \(root\): not valid JSON/)
    expect(notJson.message.length).toBeLessThanOrEqual(300)
  })
})
