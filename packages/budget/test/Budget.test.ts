import { describe, expect, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import fc from "fast-check"
import { fitBudget } from "../src/Budget.ts"
import { explain } from "../src/BudgetReport.ts"
import type { ChatMessage } from "../src/ChatFormat.ts"
import type { Unit } from "../src/Fit.ts"
import * as ModelRegistry from "../src/ModelRegistry.ts"
import * as Tokenizer from "../src/Tokenizer.ts"

const tokenizer = Tokenizer.makeUnsafe()
const registry = Either.getOrThrow(ModelRegistry.make())
const setup = (name: string) => {
  const model = Effect.runSync(registry.resolve(name))
  return { model, counter: Effect.runSync(tokenizer.counter(model)) }
}

interface MessageUnit extends Unit {
  readonly message: ChatMessage
}

const { model: gpt4, counter } = setup("gpt-4")
const messageUnit = (
  id: string,
  source: string,
  message: ChatMessage,
  extra: Partial<Unit> = {}
): MessageUnit => ({
  id,
  source,
  text: message.content ?? "",
  tokens: counter.countMessages([message]) - counter.countMessages([]),
  message,
  ...extra
})

const turns = Array.from({ length: 40 }, (_, i) => i + 1).map((n) =>
  messageUnit(`turn-${n}`, "recent_history", {
    role: n % 2 === 0 ? "assistant" : "user",
    content: `Turn ${n}: ${"we discussed the context compiler and its budget in some detail. ".repeat(25)}`
  })
)
const knowledge = ["Raft", "Paxos", "CRDTs"].map((topic) =>
  messageUnit(`kb-${topic}`, "knowledge", {
    role: "system",
    content: `${topic}: ${"background notes ".repeat(200)}`
  })
)
const system = messageUnit(
  "system",
  "system_prompt",
  { role: "system", content: "You are a careful tutor." },
  { required: true }
)
const input = messageUnit(
  "input",
  "user_input",
  { role: "user", content: "Explain Raft leader election." },
  { required: true }
)

const countTotal = (included: ReadonlyArray<MessageUnit>) =>
  counter.countMessages(included.map((u) => u.message))

describe("fitBudget", () => {
  it("fits an 8k model: required whole, newest turns kept, the rest dropped with reasons", () => {
    const result = Either.getOrThrow(
      fitBudget({
        model: gpt4,
        counter,
        countTotal,
        sources: [
          { id: "system_prompt", required: true, units: [system] },
          { id: "knowledge", units: knowledge },
          { id: "recent_history", contiguous: true, units: [...turns].reverse() },
          { id: "user_input", required: true, units: [input] }
        ]
      })
    )
    const { report, included } = result
    expect([report.window.tokens, report.outputReserve, report.available]).toEqual([8_192, 820, 7_372])
    expect(report.total).toBe(countTotal(included))
    expect(report.total).toBeLessThanOrEqual(report.available)
    const ids = included.map((u) => u.id)
    expect(ids[0]).toBe("system")
    expect(ids.at(-1)).toBe("input")
    // History is kept newest-first and contiguous: turns 40, 39, ... down to some turn, no gaps.
    const keptTurns = ids.filter((id) => id.startsWith("turn-")).map((id) => Number(id.slice(5)))
    expect(keptTurns.length).toBeGreaterThan(5)
    expect(keptTurns).toEqual(Array.from({ length: keptTurns.length }, (_, i) => 40 - i))
    const dropped = report.units.filter((u) => u.status === "dropped")
    expect(dropped.find((u) => u.id === "turn-1")?.reason).toMatch(
      /^over the \d+-token grant of recent_history$/
    )
    for (const source of report.sources) expect(source.used).toBeLessThanOrEqual(source.grant)
    expect(report.sources.reduce((sum, s) => sum + s.used, 0)).toBeLessThanOrEqual(report.available)
    expect(report.units.every((u) => u.counted === "exact" && u.hash.length === 16)).toBe(true)
    expect(explain(report)).toContain("model openai/gpt-4: window 8192")
  })

  it("gives a source with a configured share of 0 nothing, and says so for each of its units", () => {
    const sources = [
      { id: "system_prompt", required: true, units: [system] },
      { id: "knowledge", units: knowledge },
      { id: "recent_history", contiguous: true, units: [...turns].reverse().slice(0, 2) },
      { id: "user_input", required: true, units: [input] }
    ]
    // Everything fits without shares: the knowledge blocks are in.
    const open = Either.getOrThrow(fitBudget({ model: gpt4, counter, countTotal, sources }))
    expect(open.included.filter((u) => u.source === "knowledge")).toHaveLength(3)
    const off = Either.getOrThrow(
      fitBudget({ model: gpt4, counter, countTotal, sources, shares: { knowledge: 0 } })
    )
    expect(off.included.filter((u) => u.source === "knowledge")).toEqual([])
    expect(off.report.sources.find((s) => s.id === "knowledge")).toMatchObject({
      share: 0,
      grant: 0,
      used: 0
    })
    for (const id of ["kb-Raft", "kb-Paxos", "kb-CRDTs"]) {
      expect(off.report.units.find((u) => u.id === id)).toMatchObject({
        status: "dropped",
        reason: "knowledge has a share of 0 in the configured shares, so it gets no tokens"
      })
    }
    // The history the slack could take is still there.
    expect(off.included.filter((u) => u.source === "recent_history")).toHaveLength(2)
  })

  it("refuses with the numbers and the report when the required sources alone do not fit", () => {
    const huge = messageUnit(
      "input",
      "user_input",
      { role: "user", content: "lorem ipsum ".repeat(5_000) },
      { required: true }
    )
    const error = Either.flip(
      fitBudget({
        model: gpt4,
        counter,
        countTotal,
        sources: [
          { id: "system_prompt", required: true, units: [system] },
          { id: "user_input", required: true, units: [huge] }
        ]
      })
    ).pipe(Either.getOrThrow)
    expect(error._tag).toBe("BudgetExceeded")
    expect(error.available).toBe(7_372)
    expect(error.required).toBeGreaterThan(10_000)
    expect(error.report?.units.find((u) => u.id === "input")?.tokens).toBe(huge.tokens)
  })

  it("keeps a margin for estimated models and says the counts are estimates", () => {
    const claude = setup("claude-3-5-haiku")
    const result = Either.getOrThrow(
      fitBudget({
        model: claude.model,
        counter: claude.counter,
        countTotal: (included) => claude.counter.countMessages(included.map((u) => u.message)),
        sources: [{ id: "user_input", required: true, units: [input] }]
      })
    )
    expect(result.report.tokenizer).toEqual({
      name: "estimate:anthropic (cl100k_base × 1.300)",
      method: "estimate",
      margin: 0.1
    })
    expect(result.report.available).toBe(Math.floor(180_000 * 0.9))
  })

  it("gives each fit of the same units its own rows' method and status, one fit after another", () => {
    // A warm compile hands the budget the units of the last one: their rows as included are kept,
    // and must still say how this fit counted and whether this fit kept them.
    const claude = setup("claude-3-5-haiku")
    const sources = [
      { id: "system_prompt", required: true, units: [system] },
      { id: "knowledge", units: knowledge },
      { id: "user_input", required: true, units: [input] }
    ]
    const exact = Either.getOrThrow(fitBudget({ model: gpt4, counter, countTotal, sources }))
    const estimated = Either.getOrThrow(
      fitBudget({
        model: claude.model,
        counter: claude.counter,
        countTotal: (included) => claude.counter.countMessages(included.map((u) => u.message)),
        sources
      })
    )
    const off = Either.getOrThrow(
      fitBudget({ model: gpt4, counter, countTotal, sources, shares: { knowledge: 0 } })
    )
    const again = Either.getOrThrow(fitBudget({ model: gpt4, counter, countTotal, sources }))
    const rows = (r: typeof exact) => r.report.units.map((u) => `${u.id} ${u.status} ${u.counted}`)
    expect(rows(exact)).toEqual([
      "system included exact",
      ...knowledge.map((u) => `${u.id} included exact`),
      "input included exact"
    ])
    expect(rows(estimated)).toEqual(rows(exact).map((r) => r.replace(" exact", " estimate")))
    expect(rows(off)).toEqual([
      "system included exact",
      ...knowledge.map((u) => `${u.id} dropped exact`),
      "input included exact"
    ])
    expect(again.report.units).toEqual(exact.report.units)
  })

  it("never sends more than is available, counted whole, whatever the units", () => {
    fc.assert(
      fc.property(
        fc.array(fc.string({ unit: "grapheme", maxLength: 400 }), { maxLength: 30 }),
        fc.integer({ min: 200, max: 3_000 }),
        (texts, window) => {
          const small = { ...gpt4, contextWindow: window, maxInput: window }
          const units = texts.map((content, i) =>
            messageUnit(`m${i}`, i % 2 === 0 ? "recent_history" : "knowledge", { role: "user", content })
          )
          const result = fitBudget({
            model: small,
            counter,
            countTotal,
            sources: [
              { id: "user_input", required: true, units: [input] },
              {
                id: "recent_history",
                contiguous: true,
                units: units.filter((u) => u.source === "recent_history")
              },
              { id: "knowledge", units: units.filter((u) => u.source === "knowledge") }
            ]
          })
          if (Either.isLeft(result)) return
          expect(result.right.report.total).toBe(countTotal(result.right.included))
          expect(result.right.report.total).toBeLessThanOrEqual(result.right.report.available)
          expect(result.right.included.map((u) => u.id)).toContain("input")
        }
      ),
      { numRuns: 150 }
    )
  })
})
