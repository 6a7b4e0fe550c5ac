import { assert, describe, expect, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import fc from "fast-check"
import { get_encoding } from "tiktoken"
import type { ModelInfo } from "../src/ModelRegistry.ts"
import * as ModelRegistry from "../src/ModelRegistry.ts"
import * as Tokenizer from "../src/Tokenizer.ts"

const registry = Either.getOrThrow(ModelRegistry.make())
const model = (name: string): ModelInfo => Effect.runSync(registry.resolve(name))

// Counts produced by tiktoken 1.0.22 `encode_ordinary` for each sample.
const samples = [
  "Hello, world!",
  "tiktoken is great!",
  "基本信息：25岁，计算机专业研究生",
  "function add(a: number, b: number) {\n  return a + b\n}",
  '{"chatHistory": {"maxTurns": 10}}',
  "<|endoftext|> is just text here",
  "\uFEFFbyte order mark",
  "  \n\n\t mixed   whitespace \r\n",
  "🦀 emoji and ünïcödé",
  ""
]
const known = {
  o200k_base: [4, 6, 11, 18, 11, 11, 4, 6, 9, 0],
  cl100k_base: [4, 6, 18, 18, 12, 11, 4, 6, 12, 0]
}

describe("Tokenizer", () => {
  for (const engine of ["gpt-tokenizer", "tiktoken"] as const) {
    it(`${engine}: counts o200k_base and cl100k_base exactly as tiktoken does`, () => {
      const service = Tokenizer.makeUnsafe({ engine })
      try {
        const gpt4o = Effect.runSync(service.counter(model("gpt-4o")))
        const gpt4 = Effect.runSync(service.counter(model("gpt-4")))
        expect([gpt4o.tokenizer, gpt4o.method, gpt4o.margin]).toEqual(["o200k_base", "exact", 0])
        expect(gpt4.tokenizer).toBe("cl100k_base")
        expect(samples.map(gpt4o.count)).toEqual(known.o200k_base)
        expect(samples.map(gpt4.count)).toEqual(known.cl100k_base)
      } finally {
        service.dispose()
      }
    })
  }

  it("agrees with tiktoken on arbitrary text, byte order marks and special-token strings included", () => {
    const service = Tokenizer.makeUnsafe({ cacheCapacity: 0 })
    const reference = { o200k_base: get_encoding("o200k_base"), cl100k_base: get_encoding("cl100k_base") }
    try {
      const counters = {
        o200k_base: Effect.runSync(service.counter(model("gpt-4o"))),
        cl100k_base: Effect.runSync(service.counter(model("gpt-4")))
      }
      const pieces = fc.oneof(
        fc.string({ unit: "grapheme", maxLength: 30 }),
        fc.string({ unit: "binary", maxLength: 30 }),
        fc.constantFrom(
          "\uFEFF",
          "<|endoftext|>",
          "<|fim_prefix|>",
          "<|endofprompt|>",
          "基本信息",
          "  ",
          "\r\n",
          "'s",
          "123456"
        )
      )
      fc.assert(
        fc.property(fc.array(pieces, { maxLength: 8 }), (parts) => {
          const text = parts.join("")
          for (const encoding of ["o200k_base", "cl100k_base"] as const) {
            expect(counters[encoding].count(text)).toBe(reference[encoding].encode_ordinary(text).length)
          }
        }),
        { numRuns: 1500 }
      )
    } finally {
      reference.o200k_base.free()
      reference.cl100k_base.free()
      service.dispose()
    }
  })

  it("caches counts by content and reports the hit ratio", () =>
    Effect.gen(function* () {
      const tokenizer = yield* Tokenizer.Tokenizer
      const counter = yield* tokenizer.counter(model("gpt-4o"))
      const long = "A long message about budgets. ".repeat(50)
      expect(counter.count(long)).toBe(counter.count(long))
      counter.count("short")
      counter.count("short")
      const stats = yield* tokenizer.cacheStats
      expect({ hits: stats.hits, misses: stats.misses, size: stats.size }).toEqual({
        hits: 2,
        misses: 2,
        size: 2
      })
      expect(stats.hitRatio).toBe(0.5)
    }).pipe(Effect.provide(Tokenizer.layer()), Effect.runPromise))

  it("keeps the cache bounded", () => {
    const service = Tokenizer.makeUnsafe({ cacheCapacity: 3 })
    const counter = Effect.runSync(service.counter(model("gpt-4o")))
    for (const text of ["a", "b", "c", "d", "e"]) counter.count(text)
    expect(Effect.runSync(service.cacheStats).size).toBe(3)
    service.dispose()
  })

  it("estimates models without a local tokenizer, on the safe side, and says so", () => {
    const service = Tokenizer.makeUnsafe()
    const claude = Effect.runSync(service.counter(model("claude-sonnet-4-5")))
    const gpt4 = Effect.runSync(service.counter(model("gpt-4")))
    const text = "Summarise the design of the context compiler in three sentences."
    expect(claude.method).toBe("estimate")
    expect(claude.tokenizer).toBe("estimate:anthropic (cl100k_base × 1.300)")
    expect(claude.count(text)).toBe(Math.ceil(gpt4.count(text) * 1.3))
    expect(claude.margin).toBe(Tokenizer.DEFAULT_ESTIMATE_MARGIN)
    service.dispose()
  })

  it("learns a bounded correction from reported usage, so estimates converge", () => {
    const service = Tokenizer.makeUnsafe()
    const claude = model("claude-sonnet-4-5")
    const text = "word ".repeat(400)
    const trueCount = (estimate: number) => Math.round(estimate * 0.8) // the provider counts 20% fewer
    let errorBefore = 0
    let errorAfter = 0
    for (let i = 0; i < 25; i++) {
      const estimate = Effect.runSync(service.counter(claude)).count(text)
      const actual = trueCount(Math.ceil(Effect.runSync(service.counter(model("gpt-4"))).count(text) * 1.3))
      if (i === 0) errorBefore = Math.abs(estimate - actual) / actual
      errorAfter = Math.abs(estimate - actual) / actual
      Effect.runSync(service.observeUsage(claude, estimate, actual))
    }
    expect(errorBefore).toBeGreaterThan(0.2)
    expect(errorAfter).toBeLessThan(0.02)
    const corrections = Effect.runSync(service.corrections)
    const learned = corrections[claude.id]!
    expect(learned.observations).toBe(25)
    expect(learned.residuals.length).toBeLessThanOrEqual(32)
    // The margin comes from the measured error once there is enough of it.
    expect(Effect.runSync(service.counter(claude)).margin).toBe(Tokenizer.marginOf(learned))

    // Persisted corrections come back in a new process.
    const restored = Tokenizer.makeUnsafe({ corrections })
    expect(Effect.runSync(restored.counter(claude)).count(text)).toBe(
      Effect.runSync(service.counter(claude)).count(text)
    )
    service.dispose()
    restored.dispose()
  })

  it("never lets a correction run away", () => {
    let correction: Tokenizer.Correction | undefined
    for (let i = 0; i < 100; i++) correction = Tokenizer.learn(correction, 100, 10_000)
    expect(correction!.factor).toBe(Tokenizer.MAX_FACTOR)
    for (let i = 0; i < 100; i++) correction = Tokenizer.learn(correction, 10_000, 1)
    expect(correction!.factor).toBe(Tokenizer.MIN_FACTOR)
    expect(Tokenizer.learn(correction, 0, 10)).toEqual(correction)
  })

  it("counts chat requests with the provider's framing", () => {
    const service = Tokenizer.makeUnsafe()
    const counter = Effect.runSync(service.counter(model("gpt-4o")))
    const messages = [
      { role: "system", content: "You are helpful." },
      { role: "user", content: "Hi", name: "ada" }
    ] as const
    // 3 per message + role + content, 1 + name for the named one, 3 to prime the reply.
    const expected =
      3 +
      counter.count("system") +
      counter.count("You are helpful.") +
      3 +
      counter.count("user") +
      counter.count("Hi") +
      1 +
      counter.count("ada") +
      3
    expect(counter.countMessages(messages)).toBe(expected)
    assert.isAbove(
      counter.countMessages(messages, { tools: [{ name: "read_file", description: "Read a file." }] }),
      expected
    )
    service.dispose()
  })
})
