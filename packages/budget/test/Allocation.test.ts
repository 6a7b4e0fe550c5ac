import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import fc from "fast-check"
import type { SourceRequest } from "../src/Allocation.ts"
import { allocate, DEFAULT_SHARES } from "../src/Allocation.ts"

const seedSources = (ask: number): Array<SourceRequest> =>
  Object.keys(DEFAULT_SHARES).map((id) => ({ id, ask }))

describe("allocate", () => {
  it("reproduces seed 003's worked example (200K window, 10% reserve)", () => {
    const result = Either.getOrThrow(allocate({ window: 200_000, sources: seedSources(1_000_000) }))
    expect([result.outputReserve, result.available]).toEqual([20_000, 180_000])
    expect(result.grants.system_prompt).toBe(21_600)
    const memory = result.grants.recent_history! + result.grants.important_history! + result.grants.semantic!
    expect(memory).toBe(64_800)
    expect(Object.values(result.grants).reduce((a, b) => a + b, 0)).toBe(180_000)
  })

  it.each([
    // The seed's table: window, reserve (10%), available, prompt (12%), memory (36%).
    [200_000, 20_000, 180_000, 21_600, 64_800],
    [128_000, 12_800, 115_200, 13_824, 41_472],
    [8_000, 800, 7_200, 864, 2_592]
  ])("reproduces seed 003's table for a %i-token window", (window, reserve, available, prompt, memory) => {
    const result = Either.getOrThrow(allocate({ window, sources: seedSources(10 * window) }))
    expect([result.outputReserve, result.available]).toEqual([reserve, available])
    expect(result.grants.system_prompt).toBe(prompt)
    expect(result.grants.recent_history! + result.grants.important_history! + result.grants.semantic!).toBe(
      memory
    )
  })

  it("gives what a source does not use to the others, by priority", () => {
    const result = Either.getOrThrow(
      allocate({
        window: 10_000,
        outputReserve: 1_000,
        sources: [
          { id: "knowledge", ask: 5_000, share: 0.2, priority: 1 },
          { id: "recent_history", ask: 5_000, share: 0.2, priority: 2 },
          { id: "tools", ask: 100, share: 0.6, priority: 3 }
        ]
      })
    )
    // tools uses 100 of its 5,400: history (higher priority) takes its fill first, knowledge the rest.
    expect(result.grants).toEqual({ knowledge: 3_900, recent_history: 5_000, tools: 100 })
    const ledger = Object.fromEntries(result.ledger.map((l) => [l.id, l]))
    expect(ledger.tools).toMatchObject({ cap: 5_400, grant: 100, surplusGiven: 5_300, surplusReceived: 0 })
    expect(ledger.recent_history).toMatchObject({ cap: 1_800, grant: 5_000, surplusReceived: 3_200 })
  })

  it("takes configured shares in place of the defaults; a share of 0 switches a source off", () => {
    const sources = [
      { id: "knowledge", ask: 5_000 },
      { id: "recent_history", ask: 5_000 },
      { id: "tools", ask: 100 }
    ]
    const base = { window: 10_000, outputReserve: 1_000, sources }
    const defaults = Either.getOrThrow(allocate(base))
    expect(defaults.grants.knowledge).toBeGreaterThan(0)
    expect(defaults.off).toEqual([])
    // knowledge half the budget, history nothing: history gets no surplus either.
    const shaped = Either.getOrThrow(allocate({ ...base, shares: { knowledge: 0.5, recent_history: 0 } }))
    expect(shaped.grants).toEqual({ knowledge: 5_000, recent_history: 0, tools: 100 })
    expect(shaped.off).toEqual(["recent_history"])
    expect(shaped.ledger.find((l) => l.id === "knowledge")).toMatchObject({ share: 0.5, cap: 4_500 })
    // A required source is never switched off.
    const required = Either.getOrThrow(
      allocate({
        ...base,
        shares: { user_input: 0 },
        sources: [{ id: "user_input", ask: 300, required: true }]
      })
    )
    expect(required.grants.user_input).toBe(300)
    expect(required.off).toEqual([])
  })

  it("never cuts required sources; when they alone do not fit it says by how much", () => {
    const tight = Either.getOrThrow(
      allocate({
        window: 1_000,
        outputReserve: 100,
        sources: [
          { id: "system_prompt", ask: 500, required: true },
          { id: "user_input", ask: 300, required: true },
          { id: "recent_history", ask: 5_000 }
        ]
      })
    )
    expect(tight.grants).toEqual({ system_prompt: 500, user_input: 300, recent_history: 100 })

    const over = Either.flip(
      allocate({
        model: "openai/gpt-4",
        window: 1_000,
        outputReserve: 100,
        sources: [
          { id: "system_prompt", ask: 700, required: true },
          { id: "user_input", ask: 300, required: true }
        ]
      })
    ).pipe(Either.getOrThrow)
    expect(over._tag).toBe("BudgetExceeded")
    expect([over.available, over.required]).toEqual([900, 1_000])
    expect(over.message).toBe(
      "Required context does not fit openai/gpt-4: 1000 tokens (system_prompt 700, user_input 300) > 900 available"
    )
  })

  it("respects max input below the window and keeps a margin for estimates", () => {
    const gpt5 = Either.getOrThrow(allocate({ window: 400_000, maxInput: 272_000, sources: [] }))
    expect(gpt5.available).toBe(272_000)
    const estimated = Either.getOrThrow(allocate({ window: 200_000, margin: 0.1, sources: [] }))
    expect(estimated.available).toBe(162_000)
  })

  it("never gives a negative budget", () => {
    const result = Either.getOrThrow(
      allocate({ window: 100, outputReserve: 500, sources: [{ id: "knowledge", ask: 10 }] })
    )
    expect(result.available).toBe(0)
    expect(result.grants.knowledge).toBe(0)
  })

  describe("properties", () => {
    const source = fc.record({
      ask: fc.integer({ min: 0, max: 200_000 }),
      share: fc.option(fc.double({ min: 0, max: 0.6, noNaN: true }), { nil: undefined }),
      priority: fc.option(fc.integer({ min: -5, max: 5 }), { nil: undefined }),
      required: fc.boolean()
    })
    const setup = fc.record({
      window: fc.integer({ min: 1, max: 1_000_000 }),
      ratio: fc.double({ min: 0, max: 0.5, noNaN: true }),
      margin: fc.double({ min: 0, max: 0.3, noNaN: true }),
      sources: fc.array(source, { maxLength: 9 })
    })
    type Setup = typeof setup extends fc.Arbitrary<infer T> ? T : never
    const run = (s: Setup, window = s.window) =>
      allocate({
        window,
        outputReserveRatio: s.ratio,
        margin: s.margin,
        sources: s.sources.map(({ share, priority, ...x }, i) => ({
          id: `s${i}`,
          ...x,
          ...(share === undefined ? {} : { share }),
          ...(priority === undefined ? {} : { priority })
        }))
      })

    it("grants never exceed what is available, nor what a source asked", () => {
      fc.assert(
        fc.property(setup, (s) => {
          const result = run(s)
          if (Either.isLeft(result)) return
          const grants = Object.values(result.right.grants)
          expect(grants.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(result.right.available)
          for (const [i, x] of s.sources.entries())
            expect(result.right.grants[`s${i}`]).toBeLessThanOrEqual(x.ask)
        }),
        { numRuns: 2000 }
      )
    })

    it("required sources are untouched, or the whole is refused", () => {
      fc.assert(
        fc.property(setup, (s) => {
          const result = run(s)
          const required = s.sources.map((x, i) => ({ ...x, id: `s${i}` })).filter((x) => x.required)
          if (Either.isLeft(result)) {
            expect(result.left.required).toBe(required.reduce((a, x) => a + x.ask, 0))
            expect(result.left.required).toBeGreaterThan(result.left.available)
          } else {
            for (const x of required) expect(result.right.grants[x.id]).toBe(x.ask)
          }
        }),
        { numRuns: 2000 }
      )
    })

    it("more window never gives any source less", () => {
      fc.assert(
        fc.property(setup, fc.integer({ min: 0, max: 500_000 }), (s, extra) => {
          const small = run(s)
          const large = run(s, s.window + extra)
          if (Either.isLeft(small)) return
          expect(Either.isRight(large)).toBe(true)
          if (Either.isLeft(large)) return
          for (const id of Object.keys(small.right.grants)) {
            expect(large.right.grants[id]).toBeGreaterThanOrEqual(small.right.grants[id]!)
          }
        }),
        { numRuns: 2000 }
      )
    })

    it("same input, same output", () => {
      fc.assert(
        fc.property(setup, (s) => {
          expect(run(s)).toEqual(run(s))
        }),
        { numRuns: 300 }
      )
    })
  })
})
