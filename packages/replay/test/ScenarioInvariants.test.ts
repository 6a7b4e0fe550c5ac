/**
 * The many-session invariants: none on the evidence the fixture scenarios give (played for gpt-4,
 * the tightest window), and each finds its violation, with a readable message, on that evidence
 * doctored the way the bug it guards against would change it.
 */
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import * as ModelRegistry from "@ctxo/budget/ModelRegistry"
import * as Tokenizer from "@ctxo/budget/Tokenizer"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Either, Layer, ManagedRuntime } from "effect"
import { defaultProfiles } from "../src/Replay.ts"
import { parseScenario } from "../src/Scenario.ts"
import type {
  AggregateEvidence,
  BudgetEvidence,
  DistributionEvidence,
  ScenarioEvidence,
  ScenarioInvariant
} from "../src/ScenarioInvariants.ts"
import {
  checkScenario,
  expectedTargets,
  formatScenarioViolation,
  parseHeading,
  SCENARIO_INVARIANTS,
  sectionsOf
} from "../src/ScenarioInvariants.ts"
import { existingSessions, runScenario } from "../src/ScenarioRun.ts"

const repo = fileURLToPath(new URL("../../..", import.meta.url))
const dir = join(repo, "fixtures", "scenarios")
const runtime = ManagedRuntime.make(Layer.mergeAll(ModelRegistry.layer(), Tokenizer.layer()))
const runs = new Map<string, ScenarioEvidence>()

beforeAll(async () => {
  const profile = defaultProfiles.find((p) => p.id === "gpt-4")!
  for (const f of readdirSync(dir).filter((x) => x.endsWith(".json"))) {
    const text = readFileSync(join(dir, f), "utf8")
    const scenario = parseScenario(text, f, existingSessions(JSON.parse(text), repo))
    if (Either.isLeft(scenario)) throw scenario.left
    runs.set(
      scenario.right.id,
      await runtime.runPromise(runScenario(scenario.right, profile, { root: repo }))
    )
  }
}, 120_000)
afterAll(() => runtime.dispose())

/** A fresh copy of a fixture's evidence, to doctor. */
const evidence = (id: string): ScenarioEvidence => structuredClone(runs.get(id)!) as ScenarioEvidence
/** Evidence as a test doctors it: every array and field writable. */
type Mutable<T> =
  T extends ReadonlyArray<infer U>
    ? Array<Mutable<U>>
    : T extends object
      ? { -readonly [K in keyof T]: Mutable<T[K]> }
      : T
const mutable = <T>(x: T) => x as Mutable<T>

const messages = (e: ScenarioEvidence, invariant: ScenarioInvariant) =>
  checkScenario(e, invariant).map((v) => v.message)

/** The first aggregate (that answered) listing these sessions, or exactly these. */
const aggregateWith = (e: ScenarioEvidence, listed: ReadonlyArray<string>, exactly = false) =>
  mutable(
    e.aggregates.find(
      (a) =>
        a.blocks !== undefined &&
        listed.every((s) => a.listed.includes(s)) &&
        (!exactly || a.listed.length === listed.length)
    )!
  )
const budgetWith = (e: ScenarioEvidence, source: string): Mutable<BudgetEvidence> =>
  mutable(e.budgets.find((b) => b.sources.some((s) => s.id === source))!)
const sourceOf = (b: Mutable<BudgetEvidence>, id: string) => b.sources.find((s) => s.id === id)!
const inputOf = (e: ScenarioEvidence, tenant: string, session: string) =>
  e.turns.find((t) => t.tenant === tenant && t.session === session)!.input

describe("the fixture scenarios", () => {
  it("break no invariant, and each invariant had something to judge", () => {
    expect([...runs.keys()].sort()).toEqual([
      "aggregate-three-sessions",
      "distribute-lifecycle",
      "promotion-to-l4",
      "restart-keeps-l4",
      "run-adjusted",
      "run-reflection-limit",
      "run-simple",
      "run-three-steps"
    ])
    for (const e of runs.values())
      expect(checkScenario(e).map(formatScenarioViolation), e.scenario).toEqual([])
    const all = [...runs.values()]
    expect(all.flatMap((e) => e.budgets).length).toBeGreaterThan(40)
    expect(
      all.flatMap((e) => e.aggregates).filter((a) => (a.sections ?? []).length > 0).length
    ).toBeGreaterThan(4)
    expect(all.flatMap((e) => e.turns).filter((t) => t.important !== undefined).length).toBeGreaterThan(8)
    expect(all.flatMap((e) => e.restarts).length).toBe(2)
    expect(all.flatMap((e) => e.distributions).length).toBeGreaterThan(4)
    expect(all.flatMap((e) => e.steps).filter((s) => s.expectError !== undefined).length).toBeGreaterThan(4)
    expect(all.flatMap((e) => e.runs ?? []).length).toBe(8)
    expect(all.flatMap((e) => e.runs ?? []).flatMap((r) => r.specialistContexts).length).toBe(12)
    expect(SCENARIO_INVARIANTS).toHaveLength(12)
  })
})

describe("the run invariants (seed 004)", () => {
  const runOf = (e: ScenarioEvidence, i = 0) => mutable(e.runs![i]!)
  const stateOf = (e: ScenarioEvidence, i = 0) => runOf(e, i).state!

  it("run-transitions: finds an illegal transition, a run that did not finish, and a path other than expected", () => {
    const e = evidence("run-three-steps")
    const s = stateOf(e)
    s.transitions[4]!.to = "reflect"
    expect(messages(e, "run-transitions")).toContain(
      `run ${s.runId} of default/release: execute -> reflect is not a transition of the state diagram`
    )
    const stopped = evidence("run-simple")
    const t = stateOf(stopped)
    t.phase = "judge"
    t.isCompleted = false
    expect(messages(stopped, "run-transitions")).toContain(
      `run ${t.runId} of default/release ended at judge (completed: false, should continue: false); expected done`
    )
    const other = evidence("run-adjusted")
    const u = stateOf(other)
    u.planHistory.pop()
    u.reflectionCount = 1
    expect(messages(other, "run-transitions")).toEqual([
      `run ${u.runId} of default/release made 1 plans; the scenario expects 2`,
      `run ${u.runId} of default/release reflected 1 times; the scenario expects 2`
    ])
  })

  it("run-transitions: finds a resumed run that does not go back to the phase that failed", () => {
    const e = evidence("run-simple")
    const r = e
      .runs!.map((x) => mutable(x))
      .find((x) => x.state?.transitions.some((t) => t.to === "failed") && x.state.phase === "done")!
    const t = r.state!.transitions.find((x) => x.from === "failed")!
    expect(t.to).toBe("plan")
    t.to = "final-answer"
    expect(messages(e, "run-transitions")).toContain(
      `run ${r.runId} of default/release: failed -> final-answer is not a transition of the state diagram`
    )
  })

  it("run-limits: finds reflections over the limit, one not asked, and a specialist sent more than its budget", () => {
    const e = evidence("run-reflection-limit")
    const r = runOf(e)
    r.asked.push("reflector")
    expect(messages(e, "run-limits")).toEqual([
      `run ${r.runId} of default/release reflected 3 times; its limit is 2`,
      `run ${r.runId} of default/release asked the reflector 3 times and counts 2 reflections`
    ])
    const budget = evidence("run-three-steps")
    const s = stateOf(budget)
    s.specialistResults.notes!.contextTokens = s.limits.specialistBudget + 1
    expect(messages(budget, "run-limits")).toEqual([
      `run ${s.runId} of default/release: the specialist of notes was sent 8001 tokens; the specialist budget is 8000`
    ])
  })

  it("run-results-once: finds a step collected twice and a result without its step finishing", () => {
    const e = evidence("run-three-steps")
    const s = stateOf(e)
    s.executionHistory.push({ ...s.executionHistory.find((x) => x.event === "finished")! })
    expect(messages(e, "run-results-once")[0]).toBe(
      `run ${s.runId} of default/release: step changes finished 2 times (a step's result is collected once)`
    )
    const extra = evidence("run-adjusted")
    const t = stateOf(extra)
    t.specialistResults.ghost = { ...t.specialistResults.research!, stepId: "ghost" }
    expect(messages(extra, "run-results-once")).toContain(
      `run ${t.runId} of default/release: step ghost has a result but its status is (none)`
    )
  })

  it("specialist-isolation: finds a sibling's result in a specialist's request, and a dependency's missing", () => {
    const e = evidence("run-three-steps")
    const r = runOf(e)
    const s = r.state!
    const checklist = r.specialistContexts.find((c) => c.stepId === "checklist")!
    checklist.texts.push(s.specialistResults.notes!.text)
    const notes = r.specialistContexts.find((c) => c.stepId === "notes")!
    notes.texts = notes.texts.map((t) => t.replace(s.specialistResults.changes!.text.trim(), "(dropped)"))
    const missing = evidence("run-adjusted")
    const m = runOf(missing)
    m.specialistContexts.pop()
    expect(messages(missing, "specialist-isolation")).toEqual([
      `run ${m.runId} of default/release: 4 specialists started and 3 of their requests were recorded`
    ])
    expect(messages(e, "specialist-isolation")).toEqual([
      `run ${s.runId} of default/release: the specialist of notes was not given the result of changes, which it depends on`,
      `run ${s.runId} of default/release: the specialist of checklist was given the result of notes, which it does not depend on`
    ])
  })

  it("run-answer-once: finds the final answer recorded twice and the goal recorded twice", () => {
    const e = evidence("run-three-steps")
    const r = runOf(e)
    r.finals.push(r.finals[0]!)
    r.answerOccurrences = 2
    r.goalInputs = 2
    expect(messages(e, "run-answer-once")).toEqual([
      `run ${r.runId} of default/release: the goal is 2 inputs of the session's history (it is one turn's input)`,
      `run ${r.runId} of default/release: its turn holds 2 final answers (the final answer is recorded once)`,
      `run ${r.runId} of default/release: the final answer is in 2 assistant messages of the session`
    ])
  })
})

describe("shares-respected", () => {
  it("finds a source that uses more than its grant (its included units counted again)", () => {
    const e = evidence("aggregate-three-sessions")
    const knowledge = sourceOf(budgetWith(e, "knowledge"), "knowledge")
    knowledge.includedTokens = knowledge.grant + 25
    expect(messages(e, "shares-respected")).toContainEqual(
      expect.stringMatching(
        /source knowledge uses \d+ tokens, over its grant of \d+ \(its included units take/
      )
    )
  })

  it("finds a grant beyond the cap and the surplus received", () => {
    const e = evidence("aggregate-three-sessions")
    const tools = sourceOf(budgetWith(e, "tools"), "tools")
    tools.grant = tools.cap + 100
    tools.surplusReceived = 0
    expect(messages(e, "shares-respected")).toContainEqual(
      expect.stringMatching(/source tools is granted \d+ tokens, more than its cap \d+ and the 0 of surplus/)
    )
  })

  it("finds a share above the default shares, and a cap above the share", () => {
    const e = evidence("aggregate-three-sessions")
    const b = budgetWith(e, "tools")
    sourceOf(b, "tools").share = 0.3
    const other = budgetWith(evidence("restart-keeps-l4"), "tools")
    expect(other).toBeDefined()
    const later = mutable(e.budgets.filter((x) => x.sources.some((s) => s.id === "tools"))[1]!)
    sourceOf(later, "tools").cap = later.available
    const found = messages(e, "shares-respected")
    expect(found).toContainEqual(
      expect.stringMatching(
        /source tools has a share of 30\.0%, more than the 15\.0% the default shares give it/
      )
    )
    expect(found).toContainEqual(
      expect.stringMatching(/source tools is promised 7372 tokens, more than its 15\.0% share of 7372/)
    )
  })

  it("finds surplus handed out that nobody left: grants over what is available", () => {
    const e = evidence("aggregate-three-sessions")
    const b = budgetWith(e, "knowledge")
    const knowledge = sourceOf(b, "knowledge")
    knowledge.grant += b.available
    knowledge.surplusReceived += b.available
    expect(messages(e, "shares-respected")).toContainEqual(
      expect.stringMatching(/the grants add up to \d+ tokens, more than the 7372 available/)
    )
  })

  it("finds a request over the profile's available input, by the report and by the tiktoken recount", () => {
    const e = evidence("aggregate-three-sessions")
    const agg = mutable(e.budgets.find((b) => b.what === "aggregate" && b.recount !== undefined)!)
    agg.recount = 7_373
    const compile = budgetWith(e, "tools")
    compile.total = 8_000
    const found = messages(e, "shares-respected")
    expect(found).toContainEqual(
      expect.stringMatching(
        /^the aggregate \(gpt-4\): its request recounted with tiktoken takes 7373 tokens, over the 7372 available$/
      )
    )
    expect(found).toContainEqual(
      expect.stringMatching(/its request takes 8000 tokens, over the 7372 available/)
    )
  })

  it("finds a budget larger than what the profile has for input", () => {
    const e = evidence("promotion-to-l4")
    mutable(e.budgets[0]!).available = 8_192
    expect(messages(e, "shares-respected")).toContainEqual(
      expect.stringMatching(/shares 8192 tokens, more than the 7372 gpt-4 has for input/)
    )
  })
})

describe("no-foreign-blocks", () => {
  const withBlock = (a: Mutable<AggregateEvidence>, session: string) =>
    a.blocks!.push({
      id: "b-doctored",
      session,
      level: "L1",
      source: "recent_history",
      status: "included",
      provenance: [{ session, level: "L1", source: "recent_history", unit: "turn-1" }]
    })

  it("finds a block whose provenance is an ended session, and one of a session this tenant does not have", () => {
    const e = evidence("aggregate-three-sessions")
    withBlock(aggregateWith(e, ["legacy"]), "legacy")
    withBlock(aggregateWith(e, ["infra", "release"]), "acme-billing")
    const found = messages(e, "no-foreign-blocks")
    expect(found).toContainEqual("aggregate block b-doctored (included) comes from an ended session: legacy")
    expect(found).toContainEqual(
      "aggregate block b-doctored (included) comes from a session this tenant does not have: acme-billing"
    )
  })

  it("finds the words of an ended session in the request, whatever provenance the block claims", () => {
    const e = evidence("aggregate-three-sessions")
    const a = aggregateWith(e, ["infra", "release"])
    a.sections!.push({
      heading: "### From release · L3 · semantic · L3: session release turn 1",
      text: `[L3 memory]\nUser: ${inputOf(e, "default", "legacy")}`
    })
    expect(messages(e, "no-foreign-blocks")).toContainEqual(
      "the aggregated request carries the words of ended session legacy"
    )
  })

  it("finds another tenant's words, even as a global memory of a listed session", () => {
    const e = evidence("aggregate-three-sessions")
    const a = aggregateWith(e, ["infra", "release"])
    a.sections!.push({
      heading: "### From infra · L4 · semantic · L4:0011",
      text: `User: ${inputOf(e, "acme", "infra")}`
    })
    expect(messages(e, "no-foreign-blocks")).toContainEqual(
      "the aggregated request carries the words of session infra of tenant acme"
    )
  })

  it("lets a global memory (L3, L4) carry the words of a session not listed, never a turn of it", () => {
    const e = evidence("aggregate-three-sessions")
    const a = aggregateWith(e, ["infra", "release"], true)
    const words = `User: ${e.aggregates.find((x) => x.sessions.length > 0)!.sessions.find((s) => s.id === "code-agent-auth")!.inputs[0]}`
    a.sections!.push({ heading: "### From release · L3 · semantic · L3:ab12", text: words })
    expect(messages(e, "no-foreign-blocks")).toEqual([])
    a.sections!.push({ heading: "### From release · L1 · recent_history · turn-7", text: words })
    expect(messages(e, "no-foreign-blocks")).toEqual([
      "the aggregated request carries the words of session code-agent-auth, not listed"
    ])
  })
})

describe("provenance", () => {
  it("finds a block without provenance, and one whose provenance names no listed session", () => {
    const e = evidence("aggregate-three-sessions")
    const a = aggregateWith(e, ["infra", "release"])
    a.blocks![0]!.provenance = []
    a.blocks![1]!.provenance = [{ session: "", source: "recent_history", unit: "turn-1" }]
    const found = messages(e, "provenance")
    expect(found).toContainEqual(`aggregate block ${a.blocks![0]!.id} names no provenance`)
    expect(found).toContainEqual(
      expect.stringMatching(
        /names a provenance without a listed session and a level or source: \(no session\)/
      )
    )
  })

  it("finds a memory unit with the wrong level, and a block that misreports its first provenance", () => {
    const e = evidence("aggregate-three-sessions")
    const a = aggregateWith(e, ["infra", "release"])
    a.blocks![0]!.provenance = [{ session: "infra", level: "L1", source: "semantic", unit: "L4:0011" }]
    a.blocks![1]!.session = "release-x"
    const found = messages(e, "provenance")
    expect(found).toContainEqual(expect.stringMatching(/infra · L1 · semantic · L4:0011$/))
    expect(found).toContainEqual(expect.stringMatching(/says it comes from release-x/))
  })

  it("finds a block of the request whose heading names no session, and a block the request does not show", () => {
    const e = evidence("aggregate-three-sessions")
    const a = aggregateWith(e, ["infra", "release"])
    a.sections![0] = { ...a.sections![0]!, heading: "### From recent_history · turn-1" }
    a.sections!.pop()
    const found = messages(e, "provenance")
    expect(found).toContainEqual(
      "a block of the aggregated request does not name a listed session and its level or source"
    )
    expect(found).toContainEqual(
      expect.stringMatching(/shows \d+ blocks under a "### From" heading, the answer says \d+ are included/)
    )
  })
})

describe("promotion", () => {
  const turn = (e: ScenarioEvidence, input: RegExp) => mutable(e.turns.find((t) => input.test(t.input))!)

  it("keeps a pinned entry of low importance (the good evidence has one)", () => {
    const e = evidence("promotion-to-l4")
    const pinned = e.finalL2.flatMap((s) => s.entries).filter((x) => x.pinned === true && x.importance <= 0.6)
    expect(pinned.length).toBeGreaterThan(0)
    expect(messages(e, "promotion")).toEqual([])
  })

  it("finds an L2 entry at the threshold, not over it (a promotion at 0.5)", () => {
    const e = evidence("promotion-to-l4")
    const t = turn(e, /keep it short/)
    t.l2After.push({
      ...t.l2After[0]!,
      id: `L2:planner:t${t.turn}`,
      importance: 0.6,
      sources: [{ session: "planner", turn: t.turn! }]
    })
    const found = messages(e, "promotion")
    expect(found).toContainEqual(
      `after the turn, default/planner's L2 holds L2:planner:t${t.turn} with importance 0.6, not over 0.6, and it is not pinned`
    )
    expect(found).toContainEqual(
      expect.stringMatching(
        /is small talk \(the scenario says so\) and was promoted to L2 \(importance 0\.6\)/
      )
    )
  })

  it("finds a turn over the threshold that is not in L2 after its turn", () => {
    const e = evidence("promotion-to-l4")
    const t = turn(e, /metric units/)
    t.l2After = t.l2After.filter((x) => !x.sources.some((s) => s.turn === t.turn))
    const found = messages(e, "promotion")
    expect(found).toContainEqual(
      `turn ${t.turn} of default/planner has importance 0.65, over 0.6, and is not in L2 after its turn`
    )
    expect(found).toContainEqual(
      expect.stringMatching(/is important \(the scenario says so\) and is not in L2 after its turn/)
    )
  })

  it("finds an ended session whose L2 did not reach L4", () => {
    const e = evidence("promotion-to-l4")
    const end = mutable(e.ends[0]!)
    end.l4 = end.l4.slice(1)
    expect(messages(e, "promotion")).toContainEqual(
      expect.stringMatching(/^default\/planner ended and its L2 entry L2:planner:t\d+ did not reach L4/)
    )
  })
})

describe("l4-survives-restart", () => {
  it("finds L4 changed across a restart: an entry lost, an entry unpinned", () => {
    const e = evidence("restart-keeps-l4")
    const r = mutable(e.restarts[0]!)
    expect(r.before.default!.length).toBe(2)
    r.after.default = [{ ...r.after.default![1]!, pinned: false }]
    expect(messages(e, "l4-survives-restart")).toEqual([
      "tenant default's L4 changed across the restart: 2 entries before, 1 after (2 lost or changed, 1 new or changed)"
    ])
  })

  it("finds a turn after a restart that does not draw on the L4 memory it must", () => {
    const e = evidence("restart-keeps-l4")
    const [first, second] = e.turns.filter((t) => t.fromL4 !== undefined).map(mutable)
    first!.memory = []
    second!.memory = second!.memory!.map((m) => ({ ...m, inRequest: false }))
    const found = messages(e, "l4-survives-restart")
    expect(found).toContainEqual(
      'turn 1 of default/travel-2 (after a restart) must draw on L4 memory "Lisbon on 2026-05-14" and no live L4 entry with it was a source of its compile'
    )
    expect(found).toContainEqual(
      'turn 2 of default/travel-2 was offered the L4 memory "Lisbon on 2026-05-14" and its request does not show it'
    )
  })
})

describe("distribution", () => {
  const dist = (e: ScenarioEvidence, title: string, retry = false) =>
    mutable(e.distributions.find((d) => d.title === title && d.retry === retry)!)
  const tasksAfter = (d: Mutable<DistributionEvidence>, tenant: string, id: string) =>
    d.after.find((s) => s.tenant === tenant && s.id === id)!

  it("says who a distribution must reach by the mode and filter: active and paused, not ended, not the sender", () => {
    const e = evidence("distribute-lifecycle")
    expect(expectedTargets(dist(e, "Write a status note"))).toEqual([
      "physics-a",
      "physics-b",
      "ops",
      "physics-old"
    ])
    expect(expectedTargets(dist(e, "Check the units"))).toEqual(["physics-a", "physics-b"])
    expect(expectedTargets(dist(e, "Intro problems only"))).toEqual(["physics-a"])
    expect(expectedTargets(dist(e, "Hand over to physics"))).toEqual(["physics-a", "physics-b"])
  })

  it("finds a selected session (paused) that did not get the task", () => {
    const e = evidence("distribute-lifecycle")
    const d = dist(e, "Write a status note")
    tasksAfter(d, "default", "physics-b").withTitle = 0
    expect(messages(e, "distribution")).toContainEqual(
      'session physics-b (paused) must receive "Write a status note" once (broadcast) and got it 0 times'
    )
  })

  it("finds an ended session, another tenant's and a retry by key that got the task", () => {
    const e = evidence("distribute-lifecycle")
    tasksAfter(dist(e, "Check the units"), "default", "physics-old").withTitle = 1
    tasksAfter(dist(e, "Check the units"), "acme", "physics-a").withTitle = 1
    tasksAfter(dist(e, "Write a status note", true), "default", "ops").withTitle = 2
    const found = messages(e, "distribution")
    expect(found).toContainEqual(
      'ended session physics-old must not receive "Check the units" and got it 1 times'
    )
    expect(found).toContainEqual(
      'session physics-a of tenant acme must not receive "Check the units" and got it 1 times'
    )
    expect(found).toContainEqual(
      'session ops (active) must not receive "Write a status note" (a retry by key) and got it 1 times'
    )
  })

  it("finds a result that reports a selected session as skipped", () => {
    const e = evidence("distribute-lifecycle")
    const d = dist(e, "Intro problems only")
    d.results = d.results!.map((r) =>
      r.session === "physics-a" ? { session: r.session, skipped: "not_matched" } : r
    )
    expect(messages(e, "distribution")).toContainEqual(
      "the distribution reports physics-a as skipped (not_matched), but it is one the mode and filter select"
    )
  })
})

describe("steps", () => {
  it("finds a step that failed unexpectedly, one that succeeded where an error was expected, and a wrong error", () => {
    const e = mutable(evidence("distribute-lifecycle"))
    e.steps[0]!.error = { tag: "StoreIOError", message: "disk full" }
    const expected = e.steps.filter((s) => s.expectError !== undefined)
    delete expected[0]!.error
    expected[1]!.error = { tag: "TaskNotFound", message: "Session physics-a has no task t-1" }
    const found = messages(e as ScenarioEvidence, "steps")
    expect(found).toContainEqual("chat default/physics-a failed: StoreIOError: disk full")
    expect(found).toContainEqual("chat default/physics-b succeeded; the scenario expects SessionNotActive")
    expect(found).toContainEqual(
      "updateTask default/physics-a failed with TaskNotFound (Session physics-a has no task t-1); the scenario expects SessionNotActive"
    )
  })

  it("finds a turn that ran in a paused session, and a scenario that could not be played", () => {
    const e = mutable(evidence("distribute-lifecycle"))
    const refused = e.turns.find((t) => t.stateBefore === "paused")!
    refused.turn = 2
    refused.turnsAfter = refused.turnsBefore + 1
    e.failure = "ScenarioStepError: data.from: no folder fixtures/nowhere"
    const found = messages(e as ScenarioEvidence, "steps")
    expect(found).toContainEqual(
      "a turn ran in default/physics-b while it was paused (history went from 0 to 1 turns)"
    )
    expect(found).toContainEqual(
      "the scenario could not be played: ScenarioStepError: data.from: no folder fixtures/nowhere"
    )
  })
})

describe("reading the aggregated request", () => {
  it("splits it into blocks under their provenance headings, sessions' headings left out", () => {
    const text = [
      "Context from sessions a, b for the question below; each block names the session, memory level and source it comes from.",
      "## Session a",
      "### From a · L1 · recent_history · turn-1; b · L1 · recent_history · turn-4",
      "User: hi\nAssistant: hello",
      "### From a · knowledge · notes.md#Deploys; and 2 more",
      "# Deploys\n\nFriday.",
      "## Session b",
      "### From b · L3 · semantic · L3: session b turn 1, session c turn 2",
      "[L3 memory]\nUser: x"
    ].join("\n\n")
    const sections = sectionsOf(["You are the agent.", text, "What now?"])
    expect(sections.map((s) => s.text)).toEqual([
      "User: hi\nAssistant: hello",
      "# Deploys\n\nFriday.",
      "[L3 memory]\nUser: x"
    ])
    expect(parseHeading(sections[0]!.heading)).toEqual([
      { session: "a", level: "L1", rest: ["recent_history", "turn-1"] },
      { session: "b", level: "L1", rest: ["recent_history", "turn-4"] }
    ])
    expect(parseHeading(sections[1]!.heading)).toEqual([
      { session: "a", rest: ["knowledge", "notes.md#Deploys"] }
    ])
    expect(parseHeading("### From a · knowledge · notes.md#A; B")).toEqual([
      { session: "a", rest: ["knowledge", "notes.md#A; B"] }
    ])
  })
})
