import { readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import * as ModelRegistry from "@ctxo/budget/ModelRegistry"
import * as Tokenizer from "@ctxo/budget/Tokenizer"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Layer } from "effect"
import type { BreakerName } from "../src/Breakers.ts"
import { breakers, brokenLayer } from "../src/Breakers.ts"
import { check } from "../src/Invariants.ts"
import { defaultProfiles, live, replaySession } from "../src/Replay.ts"
import { parseSession, sessionJsonSchema } from "../src/Session.ts"

const fixture = (id: string) => {
  const file = fileURLToPath(new URL(`../../../fixtures/sessions/${id}.json`, import.meta.url))
  return Either.getOrThrow(parseSession(readFileSync(file, "utf8"), file))
}
const budget = Layer.merge(ModelRegistry.layer(), Tokenizer.layer())
const replay = (id: string, profile = defaultProfiles[0]!, layer = live) =>
  Effect.runPromise(replaySession(fixture(id), profile).pipe(Effect.provide(Layer.merge(layer, budget))))

describe("recorded sessions", () => {
  it("publishes the JSON Schema it validates with", () => {
    const published = JSON.parse(
      readFileSync(fileURLToPath(new URL("../session.schema.json", import.meta.url)), "utf8")
    )
    expect(published).toEqual(JSON.parse(JSON.stringify(sessionJsonSchema())))
  })

  it("names the file and the field of an invalid session", () => {
    const bad = parseSession(
      JSON.stringify({ format: "ctxo.session/v1", id: "x", description: "", policy: "fancy" }),
      "x.json"
    )
    expect(Either.isLeft(bad) && bad.left.message).toMatch(/^Invalid session x\.json: policy: /)
    const extra = parseSession(JSON.stringify({ ...fixture("fix-login-bug"), surprise: 1 }), "y.json")
    expect(Either.isLeft(extra) && extra.left.message).toContain("surprise")
  })
})

describe("replay", () => {
  it("replays a session turn by turn with no violation, compiling at every input and tool result", async () => {
    const evidence = await replay("fix-login-bug")
    expect(check(evidence)).toEqual([])
    // 2 inputs and 6 tool results.
    expect(evidence.points.map((p) => `${p.turn}.${p.step}`)).toEqual([
      "1.0",
      "1.1",
      "1.2",
      "1.3",
      "1.4",
      "2.0",
      "2.1",
      "2.2"
    ])
    const read = evidence.points[1]!.toolResults[0]!
    expect(read.fields).not.toContain("text")
  })

  it("compacts a long session several times and keeps every earlier summary", async () => {
    const evidence = await replay("long-migration-compacts")
    expect(check(evidence)).toEqual([])
    expect(evidence.compactions.filter((c) => c.status === "compacted").length).toBeGreaterThanOrEqual(2)
    const last = evidence.compactions.at(-1)!
    expect(last.summariesAfter.length).toBeGreaterThanOrEqual(2)
  })

  it("keeps the input once after a crash and the client's retry", async () => {
    const evidence = await replay("crash-and-retry")
    expect(check(evidence)).toEqual([])
    const retry = evidence.points.find((p) => p.phase === "retry")!
    expect(retry.historyInputs).toBe(1)
    expect(retry.renderedInputs).toBe(1)
  })

  it("finds the reminder after the running input when an earlier turn had the same words", async () => {
    const session = fixture("fix-login-bug")
    const again = {
      ...session,
      turns: [session.turns[0]!, { ...session.turns[1]!, user: session.turns[0]!.user }]
    }
    for (const profile of defaultProfiles.filter((p) => p.id === "gpt-4o" || p.id === "claude-sonnet-4-5")) {
      const evidence = await Effect.runPromise(
        replaySession(again, profile).pipe(Effect.provide(Layer.merge(live, budget)))
      )
      expect(check(evidence, "reminders")).toEqual([])
      const second = evidence.points.find((p) => p.turn === 2 && p.step === 0)!
      expect(second.reminder?.named).toEqual(["src/auth.ts"])
    }
  })

  it("refuses, with a clear error, an input that cannot fit an 8k model", async () => {
    const evidence = await replay("write-300-lines", defaultProfiles.find((p) => p.id === "gpt-4")!)
    expect(evidence.failures.every((f) => f.refusal && f.tag === "BudgetExceeded")).toBe(true)
    expect(evidence.failures.length).toBeGreaterThan(0)
    expect(check(evidence, "compiles")).toEqual([])
    // Justified: the required minimum, counted with tiktoken, is over gpt-4's 7,372.
    expect(check(evidence, "refusal-justified")).toEqual([])
    expect(evidence.failures[0]!.minimum).toBeGreaterThan(7_372)
  })

  it("compiles twice (cold, another clock) to the same bytes, keeps the prefix when only the query changes, and recounts with tiktoken", async () => {
    const evidence = await replay("fix-login-bug")
    expect(evidence.points.every((p) => p.identicalAcrossClocks)).toBe(true)
    expect(evidence.points.filter((p) => p.prefixStable !== undefined).length).toBeGreaterThan(0)
    expect(evidence.points.every((p) => p.prefixStable !== false)).toBe(true)
    for (const p of evidence.points) expect(p.recount).toBeLessThanOrEqual(p.total!)
    expect(evidence.points.every((p) => p.rulesExpected && p.rulesPresent)).toBe(true)
  })

  it.each(Object.keys(breakers) as Array<BreakerName>)(
    "catches a broken piece (%s) and names the invariant",
    async (name) => {
      const session = breakers[name].catches === "keep-turns" ? "long-migration-compacts" : "fix-login-bug"
      const evidence = await replay(session, defaultProfiles[0]!, brokenLayer(name))
      const violations = check(evidence)
      expect(violations.length).toBeGreaterThan(0)
      expect(violations.map((v) => v.invariant)).toContain(breakers[name].catches)
    }
  )
})
