/**
 * The plan-execute-reflect orchestrator on the turn engine, with a scripted model per role: the
 * state machine's paths (simple, planned, adjusted, the reflection and step limits), what each
 * specialist sees, what is recorded once, and a run that fails and resumes.
 */

import * as HistoryStore from "@ctxo/history/HistoryStore"
import { textOf } from "@ctxo/history/Message"
import * as MemoryStore from "@ctxo/store/MemoryStore"
import type { EnhancedState } from "@ctxo/store/Runs"
import type * as Store from "@ctxo/store/Store"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { localRunReply } from "../src/FakeUpstream.ts"
import {
  DEFAULT_LIMITS,
  type RunEvent,
  type RunModel,
  type RunRole,
  run,
  TRANSITIONS
} from "../src/Orchestrator.ts"
import { servicesOver } from "./services.ts"

interface Script {
  readonly judge?: ReadonlyArray<string>
  readonly planner?: ReadonlyArray<string>
  readonly replanner?: ReadonlyArray<string>
  readonly reflector?: ReadonlyArray<string>
  readonly answerer?: ReadonlyArray<string>
  /** A specialist's answer by step id (default: "result of <id>"). */
  readonly specialists?: Readonly<Record<string, string>>
}

const json = (value: unknown) => JSON.stringify(value)
const steps = (...list: ReadonlyArray<readonly [string, ReadonlyArray<string>]>) =>
  json({
    steps: list.map(([id, dependsOn]) => ({ id, title: `Step ${id}`, instruction: `Do ${id}`, dependsOn }))
  })

/** A scripted model: each role answers its next scripted words; what every request held is kept. */
const scripted = (script: Script) => {
  const asked: Array<RunRole> = []
  const specialistRequests = new Map<string, string>()
  const queues = new Map<RunRole, Array<string>>(
    (["judge", "planner", "replanner", "reflector", "answerer"] as const).map((r) => [
      r,
      [...(script[r] ?? [])]
    ])
  )
  const model: RunModel<Error, never> = {
    ask: (role) =>
      Effect.suspend(() => {
        asked.push(role)
        const text = queues.get(role)!.shift()
        return text === undefined
          ? Effect.fail(new Error(`nothing scripted for the ${role}`))
          : Effect.succeed({ text })
      }),
    specialist: ({ step }) =>
      Effect.succeed({
        model: (compiled) =>
          Effect.sync(() => {
            if (compiled.format === "openai")
              specialistRequests.set(
                step.id,
                compiled.request.messages.map((m) => JSON.stringify(m.content)).join("\n")
              )
            return { text: script.specialists?.[step.id] ?? `result of ${step.id}`, toolCalls: [] }
          })
      })
  }
  return { model, asked, specialistRequests }
}

const setup = () => {
  const store = MemoryStore.makeMemory()
  const layer = servicesOver(store)
  return { store, layer }
}

const play = (
  store: Store.Service,
  layer: ReturnType<typeof servicesOver>,
  model: RunModel<Error, never>,
  goal: string,
  options: { readonly key?: string; readonly limits?: Partial<typeof DEFAULT_LIMITS> } = {}
) => {
  const events: Array<RunEvent> = []
  const effect = run(
    { sessionId: "s", goal, ...(options.key === undefined ? {} : { idempotencyKey: options.key }) },
    model,
    {
      defaultModel: "openai/gpt-4o",
      limits: { ...DEFAULT_LIMITS, ...options.limits },
      maxToolSteps: 4,
      emit: (e) => Effect.sync(() => void events.push(e))
    }
  ).pipe(Effect.provide(layer))
  return { effect, events, store }
}

const phasesOf = (state: EnhancedState) => [state.transitions[0]?.from, ...state.transitions.map((t) => t.to)]

const legal = (state: EnhancedState) =>
  state.transitions.every(
    (t) => t.to === "failed" || t.from === "failed" || TRANSITIONS[t.from].includes(t.to)
  )

const historyOf = (layer: ReturnType<typeof servicesOver>, sessionId: string) =>
  Effect.runPromise(
    Effect.flatMap(HistoryStore.HistoryStore, (h) => h.load(sessionId)).pipe(Effect.provide(layer))
  )

describe("the orchestrator", () => {
  it("answers a simple goal directly: one turn, the goal and the answer once, no specialist", async () => {
    const { store, layer } = setup()
    await Effect.runPromise(store.createSession({ id: "s", concept: "" }))
    const { model, asked } = scripted({
      judge: [json({ complexity: "simple", reason: "one fact" })],
      answerer: ["Paris."]
    })
    const { effect, events } = play(store, layer, model, "What is the capital of France?")
    const state = await Effect.runPromise(effect)
    expect(phasesOf(state)).toEqual(["start", "analyze", "judge", "answer-directly", "done"])
    expect(state).toMatchObject({
      complexity: "simple",
      finalAnswer: "Paris.",
      isCompleted: true,
      reflectionCount: 0
    })
    expect(asked).toEqual(["judge", "answerer"])
    expect(events.at(-1)).toMatchObject({ type: "done", text: "Paris.", replayed: false })
    const doc = await historyOf(layer, "s")
    expect(doc.messages.filter((m) => m.meta.kind === "input").map(textOf)).toEqual([
      "What is the capital of France?"
    ])
    expect(doc.messages.filter((m) => m.meta.kind === "final").map(textOf)).toEqual(["Paris."])
    expect((await Effect.runPromise(store.listSessions)).map((s) => s.id)).toEqual(["s"])
  })

  it("runs a 3-step plan: each specialist on its child session sees its step and its dependencies' results, no sibling's", async () => {
    const { store, layer } = setup()
    await Effect.runPromise(store.createSession({ id: "s", concept: "" }))
    const { model, asked, specialistRequests } = scripted({
      judge: [json({ complexity: "complex", reason: "three parts" })],
      planner: [steps(["s1", []], ["s2", ["s1"]], ["s3", ["s1"]])],
      reflector: [json({ decision: "finish", feedback: "all three are in" })],
      answerer: ["Done: A, B, C."],
      specialists: { s1: "ALPHA-RESULT", s2: "BRAVO-RESULT", s3: "CHARLIE-RESULT" }
    })
    const { effect, events } = play(store, layer, model, "Plan the release", { key: "k1" })
    const state = await Effect.runPromise(effect)
    expect(legal(state)).toBe(true)
    expect(phasesOf(state)).toEqual([
      "start",
      "analyze",
      "judge",
      "plan",
      "execute",
      "collect",
      "feedback",
      "reflect",
      "final-answer",
      "done"
    ])
    expect(asked).toEqual(["judge", "planner", "reflector", "answerer"])
    expect(Object.keys(state.specialistResults).sort()).toEqual(["s1", "s2", "s3"])
    expect(state.executionHistory.filter((e) => e.event === "finished").map((e) => e.stepId)).toEqual([
      "s1",
      "s2",
      "s3"
    ])
    expect(state.executionStatus).toEqual({ s1: "done", s2: "done", s3: "done" })
    const s2 = specialistRequests.get("s2")!
    expect(s2).toContain("Do s2")
    expect(s2).toContain("ALPHA-RESULT")
    expect(s2).not.toContain("CHARLIE-RESULT")
    const s3 = specialistRequests.get("s3")!
    expect(s3).toContain("ALPHA-RESULT")
    expect(s3).not.toContain("BRAVO-RESULT")
    expect(specialistRequests.get("s1")).not.toMatch(/BRAVO|CHARLIE/)
    const child = await Effect.runPromise(store.getSession(state.specialistResults.s2!.childSession))
    expect(child.metadata).toMatchObject({ parent: "s", run: state.runId, step: "s2", role: "specialist" })
    expect(events.filter((e) => e.type === "step-finished")).toHaveLength(3)
    expect(await Effect.runPromise(store.readRun("s", state.runId))).toEqual(state)
    expect(state.version).toBe(state.transitions.at(-1)!.version)
  })

  it("adjusts the plan after a reflection: a kept step is not run again, the new one runs", async () => {
    const { store, layer } = setup()
    await Effect.runPromise(store.createSession({ id: "s", concept: "" }))
    const { model, asked } = scripted({
      judge: [json({ complexity: "complex" })],
      planner: [steps(["s1", []], ["s2", ["s1"]])],
      replanner: [
        json({
          steps: [
            { id: "s1", title: "Step s1", instruction: "Do s1" },
            { id: "s2", title: "Step s2 again", instruction: "Do s2 with the numbers", dependsOn: ["s1"] },
            { id: "s3", title: "Check", instruction: "Check s2", dependsOn: ["s2"] }
          ]
        })
      ],
      reflector: [
        json({ decision: "adjust", feedback: "s2 lacks numbers" }),
        json({ decision: "finish", feedback: "good" })
      ],
      answerer: ["Final."]
    })
    const state = await Effect.runPromise(play(store, layer, model, "Estimate the cost", { key: "k" }).effect)
    expect(asked).toEqual(["judge", "planner", "reflector", "replanner", "reflector", "answerer"])
    expect(state.planHistory.map((p) => p.version)).toEqual([1, 2])
    // s2 was reused for other work: it got a new id, so no step id has two results.
    expect(state.currentPlan!.steps.map((s) => s.id)).toEqual(["s1", "s2-v2", "s3"])
    expect(state.currentPlan!.steps[2]!.dependsOn).toEqual(["s2-v2"])
    const started = state.executionHistory.filter((e) => e.event === "started").map((e) => e.stepId)
    expect(started).toEqual(["s1", "s2", "s2-v2", "s3"])
    expect(state.executionHistory.filter((e) => e.event === "kept").map((e) => e.stepId)).toEqual(["s1"])
    expect(state.reflectionCount).toBe(2)
    expect(legal(state)).toBe(true)
  })

  it("stops at the reflection limit and answers with what it has (the loop always ends)", async () => {
    const { store, layer } = setup()
    await Effect.runPromise(store.createSession({ id: "s", concept: "" }))
    const { model, asked } = scripted({
      judge: [json({ complexity: "complex" })],
      planner: [steps(["a", []])],
      replanner: [steps(["a", []], ["b", ["a"]]), steps(["a", []], ["b", ["a"]], ["c", ["b"]])],
      reflector: [json({ decision: "adjust" }), json({ decision: "adjust" }), json({ decision: "adjust" })],
      answerer: ["Best effort."]
    })
    const state = await Effect.runPromise(
      play(store, layer, model, "Never satisfied", { limits: { maxReflections: 2 } }).effect
    )
    expect(state.reflectionCount).toBe(2)
    expect(asked.filter((r) => r === "reflector")).toHaveLength(2)
    expect(state.feedbackHistory.at(-1)).toMatchObject({ decision: "finish" })
    expect(state.feedbackHistory.at(-1)!.forced).toContain("reflection limit (2)")
    expect(state.finalAnswer).toBe("Best effort.")
    expect(state.executionHistory.filter((e) => e.event === "started").map((e) => e.stepId)).toEqual([
      "a",
      "b",
      "c"
    ])
  })

  it("skips the steps beyond the step limit and says so to the reflector", async () => {
    const { store, layer } = setup()
    await Effect.runPromise(store.createSession({ id: "s", concept: "" }))
    const { model } = scripted({
      judge: [json({ complexity: "complex" })],
      planner: [steps(["a", []], ["b", []], ["c", []])],
      reflector: [json({ decision: "continue" })],
      answerer: ["Partial."]
    })
    const state = await Effect.runPromise(
      play(store, layer, model, "Three things", { limits: { maxSteps: 2 } }).effect
    )
    expect(state.executionStatus).toEqual({ a: "done", b: "done", c: "skipped" })
    expect(state.feedbackHistory[0]!.notes).toContain(
      "Step c was skipped: the run's limit of 2 specialist steps is reached"
    )
    expect(state.feedbackHistory[0]!.forced).toContain("step limit (2)")
  })

  it("records a planner's answer that is not a plan as failed, and the same key resumes without asking again", async () => {
    const { store, layer } = setup()
    await Effect.runPromise(store.createSession({ id: "s", concept: "" }))
    const first = scripted({ judge: [json({ complexity: "complex" })], planner: ["I would start by..."] })
    const failure = await Effect.runPromise(
      Effect.flip(play(store, layer, first.model, "Goal", { key: "same" }).effect)
    )
    expect(failure.message).toMatch(/^The planner's answer is not usable: expected a JSON object/)
    const runs = await Effect.runPromise(store.listRuns("s"))
    const failed = await Effect.runPromise(store.readRun("s", runs[0]!))
    expect(failed.phase).toBe("failed")
    expect(failed.error?.tag).toBe("RunReplyInvalid")

    const second = scripted({
      planner: [steps(["s1", []])],
      reflector: [json({ decision: "finish" })],
      answerer: ["Recovered."]
    })
    const state = await Effect.runPromise(play(store, layer, second.model, "Goal", { key: "same" }).effect)
    expect(second.asked).toEqual(["planner", "reflector", "answerer"])
    expect(state.finalAnswer).toBe("Recovered.")
    expect(legal(state)).toBe(true)
    const doc = await historyOf(layer, "s")
    expect(doc.messages.filter((m) => m.meta.kind === "input")).toHaveLength(1)
    expect(doc.messages.filter((m) => m.meta.kind === "final").map(textOf)).toEqual(["Recovered."])

    // A finished run asked again answers from history: no model call, nothing recorded twice.
    const third = scripted({})
    const again = play(store, layer, third.model, "Goal", { key: "same" })
    const replayed = await Effect.runPromise(again.effect)
    expect(third.asked).toEqual([])
    expect(replayed.version).toBe(state.version)
    expect(again.events.at(-1)).toMatchObject({ type: "done", text: "Recovered.", replayed: true })
  })

  it("redoes a finished step whose dependency is redone, and records a specialist out of tool steps as failed", async () => {
    const { store, layer } = setup()
    await Effect.runPromise(store.createSession({ id: "s", concept: "" }))
    const { model, asked } = scripted({
      judge: [json({ complexity: "complex" })],
      planner: [steps(["a", []], ["b", ["a"]])],
      replanner: [
        json({
          steps: [
            { id: "a", title: "Step a", instruction: "Do a better" },
            { id: "b", title: "Step b", instruction: "Do b", dependsOn: ["a"] }
          ]
        })
      ],
      reflector: [json({ decision: "adjust" }), json({ decision: "finish" })],
      answerer: ["Done."]
    })
    const state = await Effect.runPromise(play(store, layer, model, "Two things", { key: "dep" }).effect)
    expect(asked.filter((r) => r === "replanner")).toHaveLength(1)
    // a's work changed, so b (built on the old a) is new work too.
    expect(state.currentPlan!.steps.map((x) => [x.id, x.dependsOn])).toEqual([
      ["a-v2", []],
      ["b-v2", ["a-v2"]]
    ])
    expect(Object.keys(state.specialistResults).sort()).toEqual(["a", "a-v2", "b", "b-v2"])

    const looping: RunModel<Error, never> = {
      ...scripted({}).model,
      ask: (role) =>
        Effect.succeed({
          text:
            role === "judge"
              ? json({ complexity: "complex" })
              : role === "planner"
                ? steps(["x", []])
                : role === "reflector"
                  ? json({ decision: "finish" })
                  : "Gave up."
        }),
      specialist: () =>
        Effect.succeed({
          model: () =>
            Effect.succeed({
              text: "",
              toolCalls: [{ id: `c${Math.random()}`, name: "ls", arguments: "{}" }]
            }),
          runTool: () => Effect.succeed({ status: "success", data: { entries: [] } })
        })
    }
    const stuck = await Effect.runPromise(play(store, layer, looping, "Loop forever", { key: "loop" }).effect)
    expect(stuck.executionStatus).toEqual({ x: "failed" })
    expect(stuck.specialistResults).toEqual({})
    expect(stuck.executionHistory.at(-1)?.message).toBe(
      "the specialist used its 4 tool steps without an answer"
    )
    expect(stuck.feedbackHistory[0]!.notes).toContain(
      "Step x failed: the specialist used its 4 tool steps without an answer"
    )
  })

  it("does not let a run with another key take over the unfinished turn of a failed run", async () => {
    const { store, layer } = setup()
    await Effect.runPromise(store.createSession({ id: "s", concept: "" }))
    const first = scripted({ judge: ["no JSON here"] })
    await Effect.runPromise(Effect.flip(play(store, layer, first.model, "Goal", { key: "k1" }).effect))
    const second = scripted({ judge: [json({ complexity: "simple" })], answerer: ["Taken."] })
    const error = await Effect.runPromise(
      Effect.flip(play(store, layer, second.model, "Goal", { key: "k2" }).effect)
    )
    expect(error.message).toMatch(
      /^Turn 1 of session s belongs to run r-[0-9a-f]{16}, which has not finished: resume it/
    )
    expect(second.asked).toEqual([])
  })

  it("refuses a run in a paused session before anything is recorded", async () => {
    const { store, layer } = setup()
    await Effect.runPromise(store.createSession({ id: "s", concept: "" }))
    await Effect.runPromise(store.updateSession("s", { state: "paused" }))
    const { model } = scripted({})
    const error = await Effect.runPromise(Effect.flip(play(store, layer, model, "Goal").effect))
    expect(error).toMatchObject({ _tag: "SessionNotActive" })
    expect(await Effect.runPromise(store.listRuns("s"))).toEqual([])
  })
})

describe("the local model's run answers", () => {
  const body = (role: string, goal: string, extra = "") => ({
    model: "m",
    messages: [
      { role: "user", content: goal },
      { role: "system", content: `[ctxo run: ${role}]\nInstructions\n\nGoal: ${goal}${extra}` }
    ]
  })
  it("judges, plans one step a part, reflects to finish and answers from the results", () => {
    const goal = "Summarise the release notes, then draft the upgrade checklist"
    expect(localRunReply(body("judge", goal))).toEqual({
      type: "text",
      text: json({ complexity: "complex", reason: "the goal has 2 parts" })
    })
    const plan = localRunReply(body("plan", goal))
    expect(plan?.type === "text" && JSON.parse(plan.text).steps).toEqual([
      {
        id: "s1",
        title: "Summarise the release notes",
        instruction: "Summarise the release notes",
        dependsOn: []
      },
      {
        id: "s2",
        title: "draft the upgrade checklist",
        instruction: "draft the upgrade checklist",
        dependsOn: ["s1"]
      }
    ])
    expect(localRunReply(body("judge", "What is ctxo?"))).toMatchObject({
      text: expect.stringContaining("simple")
    })
    const answer = localRunReply(
      body("answer", goal, "\n\n### Result of s1 (Summarise)\nThree changes.\nMore.")
    )
    expect(answer).toMatchObject({ text: expect.stringContaining("- s1: Three changes.") })
    expect(localRunReply({ model: "m", messages: [{ role: "user", content: "hi" }] })).toBeUndefined()
  })
})
