/**
 * Plan-execute-reflect runs over HTTP, against the local deterministic model (the fake upstream
 * answers the orchestrator's questions by its rule: a goal of several parts is planned one step a
 * part): the stream of transitions, the state afterwards, the child sessions, what a specialist is
 * sent, a retry by key, a failed upstream and its resumption, and the refusals.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { call, createSession, historyText, startGateway } from "./harness.ts"

type Gateway = Awaited<ReturnType<typeof startGateway>>

let gw: Gateway
beforeAll(async () => {
  gw = await startGateway()
})
afterAll(() => gw.close())

interface Frame {
  readonly event: string
  // biome-ignore lint/suspicious/noExplicitAny: events of many shapes
  readonly data: any
}

const startRun = async (sessionId: string, body: Record<string, unknown>) => {
  const response = await call(gw, "POST", `/api/sessions/${sessionId}/runs`, body)
  const frames: Array<Frame> =
    response.contentType?.startsWith("text/event-stream") === true
      ? response.text
          .split("\n\n")
          .filter((f) => f.trim() !== "")
          .map((f) => ({
            event: /^event: (.*)$/m.exec(f)?.[1] ?? "",
            data: JSON.parse(/^data: (.*)$/m.exec(f)?.[1] ?? "null")
          }))
      : []
  return { ...response, frames }
}

const GOAL = "List the changes of v2.4, then draft the upgrade checklist"

describe("POST /api/sessions/{id}/runs", () => {
  it("streams every transition of a planned run and keeps its state, the specialists on child sessions", async () => {
    const sid = await createSession(gw, "run-http")
    const before = gw.upstream.requests.length
    const run = await startRun(sid, { goal: GOAL, idempotencyKey: "release-1" })
    expect(run.status).toBe(200)
    expect(run.contentType).toMatch(/^text\/event-stream/)
    const events = run.frames.map((f) => f.event)
    expect(events[0]).toBe("run")
    expect(events.at(-1)).toBe("done")
    expect(events).not.toContain("error")
    const phases = run.frames.filter((f) => f.event === "transition").map((f) => f.data.to)
    expect(phases).toEqual([
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
    expect(run.frames.find((f) => f.event === "complexity")?.data).toMatchObject({ complexity: "complex" })
    const plan = run.frames.find((f) => f.event === "plan")!.data.plan
    expect(plan.steps.map((s: { id: string; dependsOn: Array<string> }) => [s.id, s.dependsOn])).toEqual([
      ["s1", []],
      ["s2", ["s1"]]
    ])
    const finished = run.frames.filter((f) => f.event === "step-finished").map((f) => f.data)
    expect(finished.map((f) => f.stepId)).toEqual(["s1", "s2"])
    expect(run.frames.some((f) => f.event === "text-delta")).toBe(true)
    const done = run.frames.at(-1)!.data
    expect(done.text).toContain("From 2 results")

    const runId = run.frames[0]!.data.runId
    const state = await call(gw, "GET", `/api/sessions/${sid}/runs/${runId}`)
    expect(state.status).toBe(200)
    expect(state.json).toMatchObject({
      format: "ctxo.run/v1",
      runId,
      goal: GOAL,
      phase: "done",
      isCompleted: true,
      shouldContinue: false,
      reflectionCount: 1,
      finalAnswer: done.text,
      executionStatus: { s1: "done", s2: "done" }
    })
    expect(state.json.version).toBe(state.json.transitions.at(-1).version)
    const list = await call(gw, "GET", `/api/sessions/${sid}/runs`)
    expect(list.json.runs).toEqual([
      expect.objectContaining({ runId, goal: GOAL, phase: "done", isCompleted: true, steps: 2 })
    ])

    // The specialists' sessions: children of this one; s2 was sent s1's result as a conclusion.
    const sessions = await call(gw, "GET", "/api/sessions")
    const children = sessions.json.filter(
      (s: { metadata: Record<string, string> }) => s.metadata.parent === sid
    )
    expect(children.map((c: { id: string }) => c.id).sort()).toEqual([`${runId}-s1`, `${runId}-s2`])
    const s1Result = state.json.specialistResults.s1.text as string
    const requests = gw.upstream.requests.slice(before)
    const userText = (r: (typeof requests)[number]) => r.body.messages.at(-1)?.content
    const s2Request = requests.find((r) => userText(r) === "draft the upgrade checklist")!
    const sent = JSON.stringify(s2Request.body.messages)
    expect(sent).toContain("## 1. Task background\\nYou are a specialist")
    expect(sent).toContain(JSON.stringify(s1Result).slice(1, -1))

    // The session's history: the goal once as input, the final answer once.
    const history = JSON.parse(historyText(gw.dataDir, sid)) as {
      messages: Array<{ role: string; meta: { kind?: string }; parts: Array<{ text?: string }> }>
    }
    expect(history.messages.filter((m) => m.meta.kind === "input").map((m) => m.parts[0]?.text)).toEqual([
      GOAL
    ])
    expect(history.messages.filter((m) => m.meta.kind === "final").map((m) => m.parts[0]?.text)).toEqual([
      done.text
    ])

    // The same key again: answered from history, nothing asked or recorded.
    const asked = gw.upstream.requests.length
    const again = await startRun(sid, { goal: GOAL, idempotencyKey: "release-1" })
    expect(again.frames[0]!.data).toMatchObject({ type: "run", runId, resumed: true })
    expect(again.frames.at(-1)!.data).toMatchObject({ type: "done", text: done.text, replayed: true })
    expect(gw.upstream.requests.length).toBe(asked)
  })

  it("answers a one-part goal directly, without a plan", async () => {
    const sid = await createSession(gw, "run-simple")
    const run = await startRun(sid, { goal: "What does compaction keep?" })
    expect(run.frames.filter((f) => f.event === "transition").map((f) => f.data.to)).toEqual([
      "analyze",
      "judge",
      "answer-directly",
      "done"
    ])
    expect(run.frames.some((f) => f.event.startsWith("step-"))).toBe(false)
  })

  it("ends the stream with the error when the upstream fails, records the run as failed, and the key resumes it", async () => {
    const sid = await createSession(gw, "run-fails")
    // The judge's call succeeds (the local rule), the planner's fails.
    gw.upstream.script(
      { type: "text", text: JSON.stringify({ complexity: "complex", reason: "two parts" }) },
      { type: "error", status: 400, message: "the planner's model is gone" }
    )
    const failed = await startRun(sid, { goal: GOAL, idempotencyKey: "k" })
    expect(failed.status).toBe(200)
    const last = failed.frames.at(-1)!
    expect(last.event).toBe("error")
    expect(last.data.message).toContain("the planner's model is gone")
    const runId = failed.frames[0]!.data.runId
    const state = await call(gw, "GET", `/api/sessions/${sid}/runs/${runId}`)
    expect(state.json).toMatchObject({ phase: "failed", isCompleted: false, complexity: "complex" })
    expect(state.json.error.message).toContain("the planner's model is gone")

    const resumed = await startRun(sid, { goal: GOAL, idempotencyKey: "k" })
    expect(resumed.frames[0]!.data).toMatchObject({ runId, resumed: true })
    const phases = resumed.frames.filter((f) => f.event === "transition").map((f) => f.data.to)
    expect(phases[0]).toBe("plan")
    expect(phases).not.toContain("judge")
    expect(resumed.frames.at(-1)!.event).toBe("done")
  })

  it("refuses a paused session (409), an unknown one (404), a body without a goal (400) and an unknown run (404)", async () => {
    const sid = await createSession(gw, "run-paused")
    expect((await call(gw, "POST", `/api/sessions/${sid}/pause`)).status).toBe(200)
    const paused = await startRun(sid, { goal: "Anything" })
    expect(paused.status).toBe(409)
    expect(paused.json.error.tag).toBe("SessionNotActive")
    expect((await call(gw, "GET", `/api/sessions/${sid}/runs`)).json.runs).toEqual([])
    const unknown = await startRun("no-such-session", { goal: "Anything" })
    expect(unknown.status).toBe(404)
    const noGoal = await startRun(sid, { model: "gpt-4o" })
    expect(noGoal.status).toBe(400)
    expect(noGoal.json.error.message).toContain("goal")
    const missing = await call(gw, "GET", `/api/sessions/${sid}/runs/r-nothing`)
    expect(missing.status).toBe(404)
    expect(missing.json.error).toMatchObject({
      tag: "RunNotFound",
      message: `Session ${sid} has no run r-nothing`
    })
  })
})
