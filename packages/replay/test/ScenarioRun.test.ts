/**
 * The scenario runner: it plays steps through the real services over files, measures what the
 * invariants judge (compiles inside an aggregate included), restarts on the same data directory
 * with the memory's clock moved on, and reports a scenario it cannot play as evidence.
 */
import { existsSync, readFileSync, rmSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import * as ModelRegistry from "@ctxo/budget/ModelRegistry"
import * as Tokenizer from "@ctxo/budget/Tokenizer"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Either, Layer, ManagedRuntime } from "effect"
import { defaultProfiles } from "../src/Replay.ts"
import { parseScenario, SCENARIO_FORMAT, type Scenario } from "../src/Scenario.ts"
import { checkScenario } from "../src/ScenarioInvariants.ts"
import { existingSessions, runScenario, type ScenarioOptions } from "../src/ScenarioRun.ts"

const repo = fileURLToPath(new URL("../../..", import.meta.url))
const runtime = ManagedRuntime.make(Layer.mergeAll(ModelRegistry.layer(), Tokenizer.layer()))
afterAll(() => runtime.dispose())
const gpt4o = defaultProfiles.find((p) => p.id === "gpt-4o")!

const decode = (scenario: unknown) => {
  const text = JSON.stringify(scenario)
  const parsed = parseScenario(text, "test.json", existingSessions(JSON.parse(text), repo))
  if (Either.isLeft(parsed)) throw parsed.left
  return parsed.right
}
const play = (scenario: Scenario, options: Partial<ScenarioOptions> = {}) =>
  runtime.runPromise(runScenario(scenario, gpt4o, { root: repo, ...options }))
const fixture = (id: string) =>
  decode(JSON.parse(readFileSync(join(repo, "fixtures", "scenarios", `${id}.json`), "utf8")))

const say = (session: string, input: string, answer = "Noted.", extra: Record<string, unknown> = {}) => ({
  type: "chat" as const,
  session,
  input,
  replies: [{ type: "assistant" as const, text: answer }],
  ...extra
})

describe("ScenarioRun", () => {
  it("plays turns, lifecycle and memory through the services, over files it leaves when asked", async () => {
    const e = await play(
      decode({
        format: SCENARIO_FORMAT,
        id: "tiny",
        description: "two tenants, a pause, an end",
        data: { files: { "system-prompt.md": "You help." } },
        tenants: { acme: { files: { "system-prompt.md": "You help Acme." } } },
        sessions: [
          { id: "a", concept: "A" },
          { id: "b", concept: "B", tenant: "acme" }
        ],
        steps: [
          say("a", "Remember: the standup moves to 09:30 from Monday."),
          { type: "pause", session: "a" },
          { ...say("a", "Still there?"), expect: { error: "SessionNotActive" } },
          { type: "resume", session: "a" },
          say("b", "We decided the Acme freeze starts 2026-12-01, remember it.", "Noted.", {
            tenant: "acme"
          }),
          { type: "end", session: "a" },
          { type: "restart" }
        ]
      }),
      { keep: true }
    )
    const dataDir = e.dataDir!
    try {
      expect(checkScenario(e)).toEqual([])
      expect(existsSync(join(dataDir, "tenants", "default", "a", "messages.json"))).toBe(true)
      expect(existsSync(join(dataDir, "tenants", "acme", "b", "messages.json"))).toBe(true)
      // The refused turn recorded nothing.
      const refused = e.turns.find((t) => t.stateBefore === "paused")!
      expect(refused.turnsAfter).toBe(refused.turnsBefore)
      // The end was persisted by the event bus's subscriber: L4 holds the important turn, on file.
      expect(e.ends[0]!.l4.map((x) => x.sources)).toEqual([[{ session: "a", turn: 1 }]])
      const onFile = readFileSync(join(dataDir, "tenants", "default", "memory.json"), "utf8")
      expect(onFile).toContain("standup moves to 09:30")
      expect(e.restarts[0]!.before.default).toHaveLength(1)
      expect(e.restarts[0]!.after).toEqual(e.restarts[0]!.before)
      // Each tenant's L4 is its own.
      expect(e.restarts[0]!.after.acme).toEqual([])
    } finally {
      rmSync(dataDir, { recursive: true, force: true })
    }
  })

  it("measures the compiles of every listed session inside an aggregate, and the aggregate's own fit", async () => {
    const e = await play(fixture("aggregate-three-sessions"))
    const step = e.aggregates.find((a) => a.listed.includes("legacy") && a.blocks !== undefined)!.step
    const compiled = e.budgets.filter((b) => b.step === step && b.what === "compile").map((b) => b.session)
    expect(new Set(compiled)).toEqual(new Set(["release", "infra", "code-agent-auth"]))
    expect(e.budgets.filter((b) => b.step === step && b.what === "aggregate")).toHaveLength(1)
    expect(e.aggregates.find((a) => a.step === step)!.skipped).toEqual([
      { session: "legacy", reason: "ended" }
    ])
  })

  it("restarts later on the memory's clock: expired L2 and L3 are no source, L4 still is", async () => {
    const e = await play(fixture("restart-keeps-l4"))
    const after = e.turns.filter((t) => t.restarts > 0)
    expect(after.length).toBe(2)
    for (const t of after) {
      expect(t.memory!.length).toBeGreaterThan(0)
      expect(new Set(t.memory!.map((m) => m.level))).toEqual(new Set(["L4"]))
    }
    expect(e.restarts.map((r) => r.advanceMs)).toEqual([8 * 24 * 3_600_000, 0])
  })

  it("reports a step it cannot take, and a scenario it cannot play, as evidence the steps invariant reads", async () => {
    const cannotTake = await play(
      decode({
        format: SCENARIO_FORMAT,
        id: "no-entry",
        description: "an L4 entry nobody made",
        data: { files: { "system-prompt.md": "You help." } },
        sessions: [{ id: "a", concept: "A" }],
        steps: [{ type: "pinMemory", level: "L4", matching: "nothing like this" }]
      })
    )
    expect(checkScenario(cannotTake, "steps").map((v) => v.message)).toEqual([
      'pinMemory failed: ScenarioStepError: no L4 entries of tenant default contain "nothing like this" (one must)'
    ])
    const cannotPlay = await play(
      decode({
        format: SCENARIO_FORMAT,
        id: "no-data",
        description: "a data folder that is not there",
        data: { from: "fixtures/nowhere" },
        sessions: [],
        steps: [{ type: "persist" }]
      })
    )
    expect(cannotPlay.steps).toEqual([])
    expect(checkScenario(cannotPlay, "steps").map((v) => v.message)).toEqual([
      "the scenario could not be played: ScenarioStepError: data.from: no folder fixtures/nowhere"
    ])
  })
})
