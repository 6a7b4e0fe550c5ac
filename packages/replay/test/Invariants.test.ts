import { mkdtempSync, readdirSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { EXTRA_CONTEXTS, policies } from "@ctxo/compiler/Composer"
import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import { get_encoding } from "tiktoken"
import { generateSession, generateSessions, writeGeneratedSessions } from "../src/Generate.ts"
import type { FailureEvidence, PointEvidence, ReplayEvidence } from "../src/Invariants.ts"
import {
  check,
  EXPECTED_ORDER,
  expectedAvailable,
  expectedMentions,
  PROFILE_LIMITS,
  recountOpenAI
} from "../src/Invariants.ts"
import { parseSession } from "../src/Session.ts"

const point = (over: Partial<PointEvidence> = {}): PointEvidence => ({
  session: "s",
  model: "gpt-4",
  turn: 5,
  step: 0,
  phase: "input",
  policy: "code-agent",
  format: "openai",
  layers: ["system_prompt", "rules__context", "checkpoint_messages"],
  input: "go on",
  queryLayers: 0,
  historyInputs: 1,
  renderedInputs: 1,
  sameInputElsewhere: 0,
  sequence: [],
  toolResults: [],
  tokens: 1_000,
  available: 7_372,
  window: 8_192,
  outputReserve: 820,
  systemPromptWhole: true,
  inputWhole: true,
  identical: true,
  contextKeys: ["rules__context"],
  recount: 990,
  total: 1_000,
  countMethod: "exact",
  margin: 0,
  identicalAcrossClocks: true,
  prefixStable: true,
  historyExpected: true,
  runningTurn: 5,
  earlierTurns: [1, 2, 3, 4],
  liveTurns: [1, 2, 3, 4],
  presentTurns: [1, 2, 3, 4],
  partialTurns: [],
  reducedTurns: [],
  pinnedTurns: [],
  keepTurns: 10,
  summaries: [],
  olderSummariesNote: false,
  notedTurns: [],
  rulesExpected: true,
  rulesPresent: true,
  ...over
})
const evidence = (
  points: ReadonlyArray<PointEvidence>,
  over: Partial<ReplayEvidence> = {}
): ReplayEvidence => ({
  session: "s",
  model: "gpt-4",
  points,
  compactions: [],
  failures: [],
  ...over
})
const refusal = (over: Partial<FailureEvidence> = {}): FailureEvidence => ({
  session: "s",
  model: "gpt-4",
  turn: 3,
  step: 1,
  phase: "input",
  tag: "BudgetExceeded",
  message: "Required context does not fit",
  refusal: true,
  minimum: 9_000,
  available: 7_372,
  ...over
})
const names = (e: ReplayEvidence) => check(e).map((v) => v.invariant)

describe("expectations written apart from the product", () => {
  it("recounts an OpenAI request with tiktoken: 3 per request, 4 per message, tool-call names and arguments", () => {
    const enc = get_encoding("cl100k_base")
    const n = (t: string) => enc.encode_ordinary(t).length
    const args = JSON.stringify({ path: "src/auth.ts", content: "x".repeat(200) })
    const messages = [
      { role: "system", content: "You are a careful coding agent." },
      { role: "user", content: "修复登录 bug" },
      { role: "assistant", content: "", tool_calls: [{ function: { name: "write_file", arguments: args } }] },
      { role: "tool", content: '{"status":"success"}' }
    ]
    expect(recountOpenAI("cl100k_base", messages)).toBe(
      3 +
        4 * 4 +
        n("You are a careful coding agent.") +
        n("修复登录 bug") +
        n("write_file") +
        n(args) +
        n('{"status":"success"}')
    )
    enc.free()
    // The model's own encoding: o200k counts Chinese differently from cl100k.
    const zh = [
      { role: "user", content: "波函数描述了量子系统的状态，它的模的平方给出测量到粒子的概率密度。" }
    ]
    expect(recountOpenAI("o200k_base", zh)).not.toBe(recountOpenAI("cl100k_base", zh))
  })

  it("recomputes available from its own table of windows and reserves", () => {
    expect(expectedAvailable(PROFILE_LIMITS["gpt-4"]!)).toBe(7_372)
    expect(expectedAvailable(PROFILE_LIMITS["gpt-3.5-turbo"]!)).toBe(14_746)
    expect(expectedAvailable(PROFILE_LIMITS["gpt-4o"]!)).toBe(115_200)
    expect(expectedAvailable(PROFILE_LIMITS["claude-sonnet-4-5"]!)).toBe(176_400)
    expect(EXPECTED_ORDER["code-agent"].indexOf("rules__context")).toBeLessThan(
      EXPECTED_ORDER["code-agent"].indexOf("checkpoint_messages")
    )
  })

  it("writes the same layer orders as the composer's policies, independently (a drift in either shows)", () => {
    for (const [name, policy] of Object.entries(policies))
      expect(
        EXPECTED_ORDER[name as keyof typeof EXPECTED_ORDER].map((slot) =>
          slot === "*" ? EXTRA_CONTEXTS : slot
        ),
        name
      ).toEqual(policy.order)
  })

  it("finds @file mentions as design.md says: in order, deduplicated, sentence ends dropped", () => {
    expect(expectedMentions("see @a.ts and @b/c.md, then @a.ts again. mail x@y.z @d.")).toEqual([
      "a.ts",
      "b/c.md",
      "d"
    ])
  })
})

describe("the checks", () => {
  it("passes a clean point", () => {
    expect(check(evidence([point()]))).toEqual([])
  })

  it("budget: over the recomputed available, undercounted, or an ignored margin", () => {
    expect(names(evidence([point({ recount: 7_400 })]))).toContain("budget")
    expect(names(evidence([point({ recount: 1_100, total: 1_000 })]))).toContain("budget")
    expect(names(evidence([point({ available: 8_192 })]))).toContain("budget")
    // Counted with another encoding: far more than tiktoken's count in the model's own.
    expect(names(evidence([point({ recount: 900, total: 1_000 })]))).toContain("budget")
    expect(
      check(evidence([point({ recount: 975, total: 1_000, toolCalls: 2, callMessages: 2 })]), "budget")
    ).toEqual([])
    expect(
      names(
        evidence(
          [
            point({
              model: "claude-sonnet-4-5",
              format: "anthropic",
              countMethod: "estimate",
              margin: 0,
              available: 180_000
            })
          ],
          { model: "claude-sonnet-4-5" }
        )
      )
    ).toContain("budget")
  })

  it("summary coverage: an absent turn needs a shown summary, the older-summaries note, or a note naming it", () => {
    const absent = point({ presentTurns: [3, 4], liveTurns: [1, 2, 3, 4] })
    expect(names(evidence([absent]))).toContain("summary-coverage")
    const summarized = point({
      presentTurns: [3, 4],
      liveTurns: [3, 4],
      summaries: [{ id: "s1", fromTurn: 1, toTurn: 2, shown: true }]
    })
    expect(check(evidence([summarized]), "summary-coverage")).toEqual([])
    const onFile = point({
      presentTurns: [5 - 1],
      liveTurns: [4],
      earlierTurns: [1, 2, 3, 4],
      olderSummariesNote: true,
      summaries: [
        { id: "s1", fromTurn: 1, toTurn: 2, shown: false },
        { id: "s2", fromTurn: 3, toTurn: 3, shown: true }
      ]
    })
    expect(check(evidence([onFile]), "summary-coverage")).toEqual([])
    expect(
      check(evidence([point({ presentTurns: [3, 4], notedTurns: [1, 2] })]), "summary-coverage")
    ).toEqual([])
    expect(
      check(evidence([point({ presentTurns: [], historyExpected: false })]), "summary-coverage")
    ).toEqual([])
  })

  it("keep what fits: the newest turns, contiguous, whole or reduced, keepTurns when they fit", () => {
    expect(names(evidence([point({ presentTurns: [1, 2, 4] })]))).toContain("keep-what-fits")
    expect(names(evidence([point({ partialTurns: [4] })]))).toContain("keep-what-fits")
    const tooFew = point({ presentTurns: [4], nextOlder: { turn: 3, minTokens: 300, free: 5_000 } })
    expect(names(evidence([tooFew]))).toContain("keep-what-fits")
    const noRoom = point({ presentTurns: [4], nextOlder: { turn: 3, minTokens: 6_000, free: 5_000 } })
    expect(check(evidence([noRoom]), "keep-what-fits")).toEqual([])
    // A pinned old turn may stand apart from the newest run.
    expect(check(evidence([point({ presentTurns: [1, 3, 4], pinnedTurns: [1] })]), "keep-what-fits")).toEqual(
      []
    )
  })

  it("rules and pinned turns are on every compile", () => {
    expect(names(evidence([point({ rulesPresent: false })]))).toContain("always-present")
    expect(names(evidence([point({ pinnedTurns: [1], presentTurns: [2, 3, 4] })]))).toContain(
      "always-present"
    )
  })

  it("refusals: justified by the minimum, declared by the fixture, and never all of a profile", () => {
    const declared = { refusals: [{ turn: 3, step: 1 }] }
    expect(check(evidence([point()], { failures: [refusal()], expected: declared }))).toEqual([])
    expect(names(evidence([point()], { failures: [refusal()] }))).toContain("compiles")
    expect(
      names(evidence([point()], { failures: [refusal({ minimum: 5_000 })], expected: declared }))
    ).toEqual(["refusal-justified"])
    expect(
      check(evidence([point()], { failures: [refusal()], expected: { justifiedRefusals: true } }), "compiles")
    ).toEqual([])
    expect(names(evidence([], { failures: [refusal()], expected: declared }))).toContain("compiles")
    expect(names(evidence([point()], { expected: { minCompiles: 2 } }))).toContain("compiles")
  })

  it("determinism: another clock and a fresh cache, and the prefix when only the query changes", () => {
    expect(names(evidence([point({ identicalAcrossClocks: false })]))).toContain("determinism")
    expect(names(evidence([point({ prefixStable: false })]))).toContain("determinism")
    expect(names(evidence([point({ systemPromptExact: false })]))).toContain("determinism")
  })

  it("reminders: at most 5 named, deduplicated, the rest counted", () => {
    const input = "Check @a @b @c @d @e @f @a"
    const good = point({
      input,
      reminder: { expected: ["a", "b", "c", "d", "e", "f"], named: ["a", "b", "c", "d", "e"], more: 1 }
    })
    expect(check(evidence([good]), "reminders")).toEqual([])
    const uncapped = point({
      input,
      reminder: { expected: ["a", "b", "c", "d", "e", "f"], named: ["a", "b", "c", "d", "e", "f"], more: 0 }
    })
    expect(names(evidence([uncapped]))).toContain("reminders")
    const repeated = point({ input, reminder: { expected: ["a", "b"], named: ["a", "b", "a"], more: 0 } })
    expect(names(evidence([repeated]))).toContain("reminders")
  })

  it("errors whole: the recorded code must survive", () => {
    const result = {
      callId: "c1",
      tool: "Bash",
      fields: ["status", "data", "error"],
      dataFields: [],
      size: 0,
      running: false,
      error: "failed",
      recordedError: "failed",
      recordedErrorCode: "EXIT_1",
      excerpt: ""
    }
    expect(names(evidence([point({ toolResults: [result] })]))).toContain("compression")
    expect(
      check(evidence([point({ toolResults: [{ ...result, errorCode: "EXIT_1" }] })]), "compression")
    ).toEqual([])
  })
})

describe("generated sessions", () => {
  it("are reproducible from their seed and valid recorded sessions", () => {
    const a = JSON.stringify(generateSessions(7, 32))
    expect(JSON.stringify(generateSessions(7, 32))).toBe(a)
    expect(JSON.stringify(generateSessions(8, 32))).not.toBe(a)
    for (const s of generateSessions(7, 32))
      expect(Either.isRight(parseSession(JSON.stringify(s), `${s.id}.json`))).toBe(true)
    const long = generateSession(3, { long: true, curate: true, turns: 30 })
    expect(long.turns.length).toBe(30)
    expect(long.turns.some((t) => t.actions?.some((x) => x.type === "pin"))).toBe(true)
    expect(long.turns.some((t) => t.actions?.some((x) => x.type === "dismiss"))).toBe(true)
  })

  it("are written as fixture files with the seed of CTXO_EVAL_SEED", () => {
    const dir = mkdtempSync(join(tmpdir(), "ctxo-generated-"))
    try {
      const written = writeGeneratedSessions({ dir, count: 3, seed: 99 })
      expect(written.seed).toBe(99)
      expect(written.files).toHaveLength(3)
      expect(readdirSync(dir).sort()).toEqual(["gen-99-01.json", "gen-99-02.json", "gen-99-03.json"])
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it("holds history's results to the compression limits, not the running turn's full observations", () => {
    const read = {
      callId: "c1",
      tool: "Read",
      fields: ["status", "data"],
      dataFields: ["content"],
      size: 3_000,
      running: false,
      excerpt: ""
    }
    expect(names(evidence([point({ toolResults: [read] })]))).toContain("compression")
    expect(check(evidence([point({ toolResults: [{ ...read, running: true }] })]), "compression")).toEqual([])
  })
})
