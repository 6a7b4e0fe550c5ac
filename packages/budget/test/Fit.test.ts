import { describe, expect, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import fc from "fast-check"
import type { Unit } from "../src/Fit.ts"
import { fitLines, fitUnits, repair } from "../src/Fit.ts"
import * as ModelRegistry from "../src/ModelRegistry.ts"
import * as Tokenizer from "../src/Tokenizer.ts"

const tokenizer = Tokenizer.makeUnsafe()
const registry = Either.getOrThrow(ModelRegistry.make())
const counter = Effect.runSync(tokenizer.counter(Effect.runSync(registry.resolve("gpt-4o"))))

const unit = (id: string, tokens: number, extra: Partial<Unit> = {}): Unit => ({
  id,
  source: "history",
  text: id,
  tokens,
  ...extra
})

describe("fitUnits", () => {
  const units = [unit("t3", 40), unit("t2", 70), unit("t1", 20)]

  it("keeps whole units in order; contiguous stops at the first that does not fit", () => {
    expect(fitUnits({ units, budget: 100, contiguous: true }).included.map((u) => u.id)).toEqual(["t3"])
    const loose = fitUnits({ units, budget: 100 })
    expect([loose.included.map((u) => u.id), loose.dropped.map((u) => u.id), loose.used]).toEqual([
      ["t3", "t1"],
      ["t2"],
      60
    ])
  })
})

describe("fitLines", () => {
  const text = Array.from({ length: 400 }, (_, i) => `line ${i + 1}: some log output here`).join("\n")

  it("cuts at line boundaries, marks the cut, and fits", () => {
    const head = fitLines({ text, budget: 200, count: counter.count })
    expect(head.tokens).toBeLessThanOrEqual(200)
    expect(head.tokens).toBe(counter.count(head.text))
    expect(head.text.startsWith("line 1: ")).toBe(true)
    expect(head.text.endsWith(`[… ${400 - head.keptLines} of 400 lines cut to fit the token budget]`)).toBe(
      true
    )
    expect(head.keptLines).toBeGreaterThan(10)
    const tail = fitLines({ text, budget: 200, count: counter.count, keep: "tail" })
    expect(tail.text.endsWith("line 400: some log output here")).toBe(true)
    expect(tail.text.startsWith("[… ")).toBe(true)
  })

  it("leaves text that fits alone and gives up cleanly when nothing fits", () => {
    expect(fitLines({ text: "short", budget: 10, count: counter.count })).toEqual({
      text: "short",
      tokens: 1,
      keptLines: 1,
      totalLines: 1
    })
    expect(fitLines({ text, budget: 3, count: counter.count }).text).toBe("")
  })

  it("always fits the budget", () => {
    fc.assert(
      fc.property(
        fc.array(fc.string({ maxLength: 40 }), { maxLength: 60 }),
        fc.integer({ min: 0, max: 300 }),
        (lines, budget) => {
          const result = fitLines({ text: lines.join("\n"), budget, count: counter.count })
          expect(counter.count(result.text)).toBeLessThanOrEqual(budget)
        }
      ),
      { numRuns: 300 }
    )
  })
})

describe("repair", () => {
  // A request whose whole costs more than its parts: 2 tokens per join, as framing can.
  const countTotal = (included: ReadonlyArray<Unit>) =>
    included.reduce((sum, u) => sum + u.tokens, 0) + 2 * Math.max(0, included.length - 1)

  it("drops the lowest-priority unit until the exact total fits, then refills the slack", () => {
    const result = repair({
      included: [
        unit("system", 30, { required: true, priority: 100 }),
        unit("old-turn", 30, { priority: 1 }),
        unit("recent-turn", 30, { priority: 5 })
      ],
      candidates: [unit("tiny-note", 1, { priority: 0 })],
      limit: 93,
      countTotal
    })
    expect(result.included.map((u) => u.id)).toEqual(["system", "recent-turn", "tiny-note"])
    expect([result.total, result.fits]).toEqual([65, true])
    // 90 tokens of parts + 4 of joins = 94 > 93. The old turn goes; it cannot come back, the note can.
    expect(result.repairs).toEqual([
      { action: "dropped", unit: "old-turn", totalBefore: 94, totalAfter: 62 },
      { action: "restored", unit: "tiny-note", totalBefore: 62, totalAfter: 65 }
    ])
  })

  it("never drops a required unit and says when it cannot fit", () => {
    const result = repair({ included: [unit("system", 80, { required: true })], limit: 50, countTotal })
    expect([result.fits, result.included.length, result.total]).toEqual([false, 1, 80])
  })

  it("the final exact count of real text never exceeds the limit", () => {
    fc.assert(
      fc.property(
        fc.array(fc.string({ unit: "grapheme", minLength: 1, maxLength: 30 }), {
          minLength: 1,
          maxLength: 20
        }),
        fc.integer({ min: 0, max: 120 }),
        (texts, limit) => {
          const units = texts.map((text, i) => ({
            id: `u${i}`,
            source: "s",
            text,
            tokens: counter.count(text),
            priority: i % 3
          }))
          const countAll = (included: ReadonlyArray<Unit>) =>
            counter.count(included.map((u) => u.text).join(""))
          const result = repair({ included: units, limit, countTotal: countAll })
          expect(result.total).toBe(countAll(result.included))
          expect(result.total).toBeLessThanOrEqual(limit)
        }
      ),
      { numRuns: 500 }
    )
  })
})
